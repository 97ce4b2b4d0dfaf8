"""Which node, uplink or replica a drill hits: the one place a drill chooses its target (the seed's 随机).

A drill's fault hits one of several eligible targets — a node running the job, an uplink of the job's leaf, the
replicas of the serving Deployment. Without `--random` the choice is the first in name order, as it always was
(a run is repeatable). With `drills run --random SEED` it is drawn from the eligible targets that the profile's
allowlist admits, by a generator seeded with (seed, scenario, kind): the same seed gives the same choices,
another seed spreads them over the allowlist, and a scenario's choice does not depend on which other scenarios
ran. With `--replay RUN` each scenario takes the choices RUN recorded (`details.random.choices`); a recorded
target that is not eligible now is a precondition not met, never silently swapped for another.

The choice is recorded (`details.random`: seed, choices, replayed run) so a reviewer sees what was hit and why,
and a later run can repeat it. Pure: candidates in, choices out; the pytest layer is fixtures/picks.py.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from drills.core.errors import CheckFailed, DrillError

__all__ = ["KINDS", "RandomPlan", "Picker", "choose", "new_seed", "parse_seed", "recorded_choices", "load_replay"]

log = logging.getLogger(__name__)

# What a drill may pick at random: a node (a GPU fault marks the node's GPUs: the GPU is picked with its node), an
# uplink "switch:interface", a replica by where it runs "<node>/<i>" (drills.faults.pods: its name dies with it).
KINDS = ("node", "uplink", "replica", "gpu")


@dataclass(frozen=True)
class RandomPlan:
    """The run's way of choosing: `seed` (None: first in name order), or the choices a run recorded, by scenario."""

    seed: int | None = None
    replay: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)  # scenario → kind → values
    replayed_from: str | None = None

    def to_json(self) -> str:
        return json.dumps({"seed": self.seed, "replayed_from": self.replayed_from,
                           "replay": {s: {k: list(v) for k, v in c.items()} for s, c in self.replay.items()}})

    @classmethod
    def from_json(cls, text: str) -> "RandomPlan":
        data = json.loads(text)
        return cls(data.get("seed"), {s: {k: tuple(v) for k, v in c.items()} for s, c in data.get("replay", {}).items()},
                   data.get("replayed_from"))


def choose(kind: str, candidates: Iterable[str], count: int, seed: int, scenario: str) -> tuple[str, ...]:
    """`count` of `candidates` drawn by a generator seeded with (seed, scenario, kind), in name order. The same
    arguments always give the same choice (a str seed is hashed with SHA-512 by `random`, not Python's hash)."""
    pool = sorted(set(candidates))
    count = max(0, min(count, len(pool)))
    rng = random.Random(f"{seed}:{scenario}:{kind}")
    return tuple(sorted(rng.sample(pool, count)))


def new_seed() -> int:
    """A fresh seed for `--random` without one (a nightly schedule's rotation); it is recorded like a given one."""
    return secrets.randbelow(2**32)


def parse_seed(text: str | None) -> int | None:
    """`--random`'s value: digits (a seed), `auto` (a fresh one), None (not random). DrillError otherwise."""
    if text is None:
        return None
    if text == "auto":
        return new_seed()
    from drills.core.grammar import check_flag

    check_flag("--random", "seed", text)
    return int(text)


def recorded_choices(records: Iterable[Mapping[str, Any]]) -> tuple[int | None, dict[str, dict[str, tuple[str, ...]]]]:
    """(the seed, scenario → kind → choices) a run's records hold (`details.random`); empty when it chose nothing."""
    seed, out = None, {}
    for rec in records:
        rnd = (rec.get("details") or {}).get("random") or {}
        if rnd.get("seed") is not None:
            seed = rnd["seed"]
        choices = rnd.get("choices") or {}
        if choices and rec.get("scenario"):
            out[rec["scenario"]] = {k: tuple(v) for k, v in choices.items() if k in KINDS}
    return seed, out


class Picker:
    """One scenario's chooser: `pick(kind, candidates, count)`; `note` receives `details.random` after each pick."""

    def __init__(self, plan: RandomPlan, scenario: str, note: Callable[..., None] | None = None) -> None:
        self.plan, self.scenario, self._note = plan, scenario, note
        self.choices: dict[str, tuple[str, ...]] = {}

    @property
    def active(self) -> bool:
        return self.plan.seed is not None or self.plan.replayed_from is not None

    def pick(self, kind: str, candidates: Iterable[str], count: int = 1,
             allowed: Callable[[str], bool] | None = None) -> tuple[str, ...]:
        """`count` of `candidates`. Not random: the first `count` in the order given (what drills always hit).
        Random: drawn from the candidates `allowed` admits (the profile's allowlist), by the seed. Replay: the
        replayed run's choice, CheckFailed (precondition not met) when that target is not eligible now."""
        if kind not in KINDS:
            raise DrillError(f"unknown pick kind {kind!r} (kinds: {', '.join(KINDS)})")
        candidates = list(dict.fromkeys(candidates))
        if not self.active:
            return tuple(candidates[:count])
        pool = sorted(c for c in candidates if allowed is None or allowed(c))
        if self.plan.replayed_from is not None and kind in self.plan.replay.get(self.scenario, {}):
            chosen = self.plan.replay[self.scenario][kind]
            gone = [c for c in chosen if c not in pool]
            if gone:
                raise CheckFailed(f"precondition not met: replaying run {self.plan.replayed_from}, its {kind} "
                                  f"{', '.join(gone)} is not eligible now (eligible: {', '.join(pool) or 'none'}); "
                                  "nothing injected")
        elif self.plan.seed is not None:
            chosen = choose(kind, pool, count, self.plan.seed, self.scenario)
        else:  # replaying a run that chose no such target: the first, as that run did
            chosen = tuple(pool[:count])
        if not chosen:
            raise CheckFailed(f"precondition not met: no {kind} to pick at random — none of "
                              f"{', '.join(candidates) or 'none'} is in the profile's allowlist; nothing injected")
        self.choices[kind] = tuple(chosen)
        log.info("%s: %s picked %s of %s", self.scenario, kind, ", ".join(chosen), ", ".join(pool))
        if self._note is not None:
            self._note(random=self.to_record())
        return tuple(chosen)

    def to_record(self) -> dict[str, Any]:
        return {"seed": self.plan.seed, "replayed_from": self.plan.replayed_from,
                "choices": {k: list(v) for k, v in self.choices.items()}}

    def __repr__(self) -> str:  # short: an Allure step parameter
        return f"Picker(seed={self.plan.seed}, replay={self.plan.replayed_from})"


def load_replay(reports_root: Path, run_id: str) -> RandomPlan:
    """The RandomPlan that repeats run `run_id`'s choices; DrillError (one line) when the run is unknown or
    recorded no random choice."""
    from drills.core.grammar import check_flag

    check_flag("--replay", "run_id", run_id)
    path = Path(reports_root) / run_id / "records.jsonl"
    if not path.is_file():
        raise DrillError(f"--replay {run_id}: no such run in {reports_root} (no {path.name}); pass a run id from "
                         f"`drills report` history or {reports_root}/")
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    seed, choices = recorded_choices(records)
    if not choices:
        raise DrillError(f"--replay {run_id}: that run recorded no target choice (it ran without --random); "
                         "replay a run made with --random")
    return RandomPlan(seed, choices, run_id)

