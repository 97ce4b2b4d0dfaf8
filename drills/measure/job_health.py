"""The training job's health after a fault, beyond "it steps again" (DESIGN §5b): what every drill that watches
the job after a fault (GPU node loss, switch uplink drop) reads from the resume through its stability window.

- **learning**: every loss (and grad norm) its workers logged (`drills.measure.logloss`): one NaN/inf after the
  resume is a job that runs and learns nothing; so is a job whose optimizer skips its steps (a loss scaler at its
  floor: every step overflows and is skipped while the step counter advances) — the steps skipped of those made;
- **the second key**: its pods' container states (`drills.measure.job_state.ContainerExit`): a worker container
  that exited non-zero, was OOMKilled or restarted after the resume failed, whatever its log says;
- **unknown lines**: error-like lines no reader classified (`drills.measure.logunknown`) after the fault, less
  those the profile's `log_ignore` covers (kept and listed: explicit, never silent);
- **known errors**: errors a reader did classify (a GPU's Xid or ECC error, an NCCL error, a traceback) that a
  worker logged once the job was back (the resume, or the recovery): a job that reports its GPU failing while it
  "trains on" is not healthy — before that moment they are the fault's own consequences.

Pure readings of the monitor's state; `drills.verdicts.health` judges.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping

from drills.core.clock import Clock
from drills.core.kubetime import may_be_after
from drills.measure.job_state import ContainerExit, JobState

__all__ = ["LossSeen", "UnknownLine", "SkippedSteps", "JobHealth", "job_health"]

log = logging.getLogger(__name__)

_LISTED = 10  # unknown / ignored lines kept in the record
_KEPT = 50  # loss readings kept before the fault (the last) and in the window (the first)


@dataclass(frozen=True)
class LossSeen:
    pod: str
    at: datetime
    step: int | None
    loss: float | None
    grad_norm: float | None

    @property
    def finite(self) -> bool:
        return all(v is None or math.isfinite(v) for v in (self.loss, self.grad_norm))


@dataclass(frozen=True)
class UnknownLine:
    pod: str
    at: datetime | None
    line: str
    ignored_by: str | None = None  # the profile's log_ignore pattern that covers it

    def sentence(self) -> str:
        return f"{self.pod}{f' at {Clock.iso(self.at)}' if self.at else ''}: {self.line}"


@dataclass(frozen=True)
class SkippedSteps:
    """What one worker's log said of skipped optimizer steps between two of its step lines in the window: `skipped`
    of the `stepped` steps from `first_step` to `last_step` (the counts after the first line: it ends an interval
    that began before the window)."""

    pod: str
    skipped: int
    stepped: int
    first_step: int
    last_step: int
    at: datetime  # the window's last step line read

    @property
    def fraction(self) -> float:
        return min(1.0, self.skipped / self.stepped) if self.stepped > 0 else 0.0


@dataclass(frozen=True)
class JobHealth:
    """What the job showed from `since` (the resume, or the recovery) to `until` (the window's end)."""

    subject: str  # "resumed" (node loss) | "recovered" (uplink drop): how the sentences name the window's start
    since: datetime | None
    until: datetime | None
    losses_before: int  # loss readings before the fault
    losses_after: int  # … and in the window
    first_bad: LossSeen | None  # the first NaN/inf reading in the window
    last: LossSeen | None  # the last reading in the window
    exits: tuple[ContainerExit, ...]  # failed container terminations in the window
    pods_read: int  # pods whose container states were read
    unknown: tuple[UnknownLine, ...]  # after the fault, not covered by log_ignore
    ignored: tuple[UnknownLine, ...]  # after the fault, covered by log_ignore (listed, not judged)
    ignore_patterns: tuple[str, ...] = ()
    errors: tuple[UnknownLine, ...] = ()  # classified errors (kind: text) a worker logged in the window
    # the finite losses just before the fault and in the window, in time order: does the job go on learning from
    # where it was (not flat, not back at a fresh model's loss)? `_KEPT` of each at most
    prior: tuple[LossSeen, ...] = ()
    window: tuple[LossSeen, ...] = ()
    # the worker whose log shows the largest share of skipped steps in the window (None: no log said anything of it)
    skipped: SkippedSteps | None = None

    def details(self) -> dict:
        bad = self.first_bad
        return {"health_window": [self.since and Clock.iso(self.since), self.until and Clock.iso(self.until)],
                "loss_readings_before": self.losses_before, "loss_readings_after": self.losses_after,
                "losses_before_fault": [_num(r.loss) for r in self.prior],
                "losses_after_first": [_num(r.loss) for r in self.window[:_LISTED]],
                "first_nonfinite_loss": None if bad is None else {
                    "pod": bad.pod, "at": Clock.iso(bad.at), "step": bad.step, "loss": _num(bad.loss),
                    "grad_norm": _num(bad.grad_norm)},
                "last_loss": None if self.last is None else {"step": self.last.step, "loss": _num(self.last.loss),
                                                             "grad_norm": _num(self.last.grad_norm)},
                "container_exits": [{"pod": e.pod, "container": e.container, "exit_code": e.exit_code,
                                     "reason": e.reason, "message": e.message, "restarts": e.restarts,
                                     "at": e.at and Clock.iso(e.at), "source": e.source} for e in self.exits],
                "skipped_steps": None if self.skipped is None else {
                    "pod": self.skipped.pod, "skipped": self.skipped.skipped, "stepped": self.skipped.stepped,
                    "steps": [self.skipped.first_step, self.skipped.last_step]},
                "unclassified_lines": [u.sentence() for u in self.unknown[:_LISTED]],
                "errors_in_window": [u.sentence() for u in self.errors[:_LISTED]],
                "log_ignore": list(self.ignore_patterns),
                "ignored_lines": [f"{u.sentence()} (log_ignore {u.ignored_by!r})" for u in self.ignored[:_LISTED]]}


def job_health(state: JobState, unknown: Mapping[str, Iterable[tuple[datetime | None, str, str]]],
               uids: set[str] | None, injected_at: datetime, since: datetime | None, until: datetime,
               ignore: Iterable[str] = (), subject: str = "resumed",
               errors: Mapping[str, Iterable] | None = None) -> JobHealth:
    """Read the window [`since`, `until`] of the workers `uids` (None: every worker of the job); unknown lines
    count from the fault (`injected_at`) on, from every worker; classified `errors` (uid → LogErrors) from
    `since` on, from every worker."""
    def name(uid: str) -> str:
        w = state.workers.get(uid)
        return w.name if w else uid

    def mine(uid: str) -> bool:
        return uids is None or uid in uids

    def step_of(uid: str, at: datetime, step: int | None) -> int | None:
        """A loss line of its own belongs to the step its pod's next step line shows (HF: dict, then the bar)."""
        if step is not None:
            return step
        return min((s for u, t, s, _ in state.steps if u == uid and t >= at), default=None)

    start = since or until
    readings = sorted((LossSeen(name(u), at, step_of(u, at, step), loss, grad)
                       for u, at, step, loss, grad in state.losses if mine(u) and start <= at <= until),
                      key=lambda r: r.at)
    before = sum(1 for _, at, *_ in state.losses if at < injected_at)
    prior = sorted((LossSeen(name(u), at, step, loss, grad) for u, at, step, loss, grad in state.losses
                    if at < injected_at and loss is not None and math.isfinite(loss)), key=lambda r: r.at)[-_KEPT:]
    finite = [r for r in readings if r.loss is not None and r.finite][:_KEPT]
    exits = sorted((e for u, w in state.workers.items() if mine(u) for e in w.exits.values()
                    if e.failed and e.at is not None and since is not None and may_be_after(e.at, since)
                    and e.at <= until),  # finishedAt is whole seconds: an exit in the resume's second counts
                   key=lambda e: e.at)  # type: ignore[arg-type, return-value]
    patterns = [(p, re.compile(p)) for p in ignore]
    lines: list[UnknownLine] = []
    for uid, seen in unknown.items():
        for at, body, _raw in seen:
            if at is not None and (at < injected_at or at > until):
                continue
            cover = next((p for p, rx in patterns if rx.search(body)), None)
            lines.append(UnknownLine(name(uid), at, body, cover))
    lines.sort(key=lambda u: (u.at is None, u.at or injected_at))
    known = sorted((UnknownLine(name(uid), e.at, f"{e.kind}: {e.text}") for uid, errs in (errors or {}).items()
                    for e in errs if since is not None and e.at is not None and since <= e.at <= until),
                   key=lambda u: u.at)  # type: ignore[arg-type, return-value]
    return JobHealth(subject, since, until, before, len(readings), next((r for r in readings if not r.finite), None),
                     readings[-1] if readings else None, tuple(exits),
                     sum(1 for u in state.workers if mine(u)),
                     tuple(u for u in lines if u.ignored_by is None), tuple(u for u in lines if u.ignored_by),
                     tuple(p for p, _ in patterns), tuple(known), tuple(prior), tuple(finite),
                     _skipped(state, [u for u in state.workers if mine(u)], since, until, name))


def _skipped(state: JobState, uids: list[str], since: datetime | None, until: datetime,
             name) -> SkippedSteps | None:
    """Per worker: the skipped steps its log counted after its first step line in the window, up to its last, of the
    steps between those lines; the worker with the largest share (None: no worker's log said anything of skipping)."""
    if since is None:
        return None
    found: list[SkippedSteps] = []
    for uid in uids:
        lines = sorted((at, step) for u, at, step, _ in state.steps if u == uid and since <= at <= until)
        said = [(at, n) for u, at, n in state.skipped if u == uid and since <= at <= until]
        if len(lines) < 2 or not said:
            continue
        (first_at, first), (last_at, last) = lines[0], lines[-1]
        n = sum(k for at, k in said if first_at < at <= last_at)
        found.append(SkippedSteps(name(uid), n, max(0, last - first), first, last, last_at))
    return max(found, key=lambda s: (s.fraction, s.stepped), default=None)


def _num(value: float | None) -> float | str | None:
    """JSON has no NaN: a non-finite value is kept as its name."""
    return value if value is None or math.isfinite(value) else str(value)
