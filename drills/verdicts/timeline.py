"""Timeline, recovery and verdicts: pure functions from phase timestamps to a judged result.

Checks measure (a phase time, a step number, a ratio); this module judges. Every comparison of a
measured value with its target goes through `within`, and every verdict carries one sentence a
reviewer can read ("recovered in 7m12s (432 s), within the 15m target").
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping, Sequence

from drills.core.clock import Clock, parse_iso
from drills.core.record import PHASES, Check, Outcome

__all__ = [
    "PHASES",
    "Timeline",
    "PhaseDuration",
    "Verdict",
    "recovery_seconds",
    "phase_durations",
    "within",
    "judge_recovery",
    "judge_max",
    "judge_min",
    "judge_resume",
    "judge_effect",
    "lost_steps",
    "combine",
    "format_duration",
]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Timeline:
    """When each phase of a drill was first reached (cluster time, aware UTC); None = never reached."""

    injected: datetime | None = None
    detected: datetime | None = None
    alerted: datetime | None = None  # the monitoring's alert fired (drills/detect/alerts.py)
    rescheduled: datetime | None = None
    ready: datetime | None = None
    recovered: datetime | None = None
    caught_up: datetime | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, _aware(f.name, value))

    @classmethod
    def from_events(cls, events: Mapping[str, datetime | float | str] | Iterable[tuple[str, datetime | float | str]]) -> "Timeline":
        """Build from (phase, time) events in any order; the earliest time of each phase wins."""
        timeline = cls()
        pairs = events.items() if isinstance(events, Mapping) else events
        for phase, at in pairs:
            timeline = timeline.mark(phase, at)
        return timeline

    @classmethod
    def from_record(cls, phases: Mapping[str, str]) -> "Timeline":
        """Inverse of `to_record` (the `phases` object of records.jsonl)."""
        return cls.from_events({name: parse_iso(text) for name, text in phases.items() if text})

    def mark(self, phase: str, at: datetime | float | str) -> "Timeline":
        """A copy with `phase` reached at `at`, unless it was already reached earlier."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r} (phases: {', '.join(PHASES)})")
        moment = _aware(phase, at)
        current = getattr(self, phase)
        if current is not None and current <= moment:
            return self
        return replace(self, **{phase: moment})

    @property
    def reached(self) -> dict[str, datetime]:
        """Reached phases in phase order."""
        return {name: getattr(self, name) for name in PHASES if getattr(self, name) is not None}

    @property
    def last_reached(self) -> str | None:
        """The furthest phase (in phase order) that was reached."""
        reached = list(self.reached)
        return reached[-1] if reached else None

    def announce(self, reported: set[str], on_phase: Callable[[str, datetime], None] | None) -> None:
        """Tell `on_phase` once about each phase reached since the last call (`reported` remembers them):
        a monitor's wait loop rebuilds its timeline every tick and must not repeat itself."""
        for name, at in self.reached.items():
            if name not in reported:
                reported.add(name)
                if on_phase:
                    on_phase(name, at)

    def to_record(self) -> dict[str, str]:
        """{phase: ISO time} for reached phases, as records.jsonl stores them (Clock.iso: milliseconds)."""
        return {name: Clock.iso(at) for name, at in self.reached.items()}


@dataclass(frozen=True)
class PhaseDuration:
    """A reached phase: seconds since injection and since the previous reached phase."""

    phase: str
    since_injected: float | None
    previous: str | None
    since_previous: float | None


@dataclass(frozen=True)
class Verdict:
    """A measured value judged against its target, with the sentence that explains it.

    What the sentence says is also said in fields, for code: `never_reached` (the event the check
    waits for never happened at all, so the target is what broke) and `inconclusive` (nothing could be
    judged: the fault had no effect). Reports categorise from these, never from `reason`."""

    name: str
    passed: bool
    measured: float | None
    target: float | None
    unit: str
    reason: str
    baseline: float | None = None  # what `measured` compares with, when the limit is a multiple of it
    target_source: str | None = None  # where the target came from (drills/verdicts/targets.py), when resolved
    never_reached: bool = False
    inconclusive: bool = False
    # inconclusive because a fact the judgement needs was not observed (a store read too late to tell, not
    # readable) — not because the fault had no effect: reports it as `not_observed`
    unobserved: bool = False

    def __post_init__(self) -> None:
        if self.inconclusive and self.passed:
            raise ValueError(f"verdict {self.name}: inconclusive and passed at once")

    @property
    def verdict(self) -> str:
        return "inconclusive" if self.inconclusive else "pass" if self.passed else "fail"

    def to_check(self) -> Check:
        """The check as the record keeps it (`details.checks[]`)."""
        return Check(self.name, Outcome(self.verdict), self.measured, self.target, self.unit, self.reason,
                     self.baseline, self.target_source)

    def to_record(self) -> dict:
        return self.to_check().to_json()


def recovery_seconds(timeline: Timeline) -> float | None:
    """recovered − injected in cluster seconds; None when either is missing."""
    if timeline.injected is None or timeline.recovered is None:
        return None
    return (timeline.recovered - timeline.injected).total_seconds()


def phase_durations(timeline: Timeline) -> list[PhaseDuration]:
    """Each reached phase relative to injection and to the previous reached phase, in phase order."""
    out: list[PhaseDuration] = []
    previous: tuple[str, datetime] | None = None
    for name, at in timeline.reached.items():
        since_injected = (at - timeline.injected).total_seconds() if timeline.injected else None
        since_previous = (at - previous[1]).total_seconds() if previous else None
        out.append(PhaseDuration(name, since_injected, previous[0] if previous else None, since_previous))
        previous = (name, at)
    return out


def within(value: float | None, target: float | None) -> bool:
    """The one comparison of a measured value with its target: value ≤ target (a missing one fails)."""
    if value is None or target is None or math.isnan(value) or math.isnan(target):
        return False
    return value <= target


def judge_recovery(timeline: Timeline, target_s: float, *, subject: str = "the workload",
                   verb: str = "recover") -> Verdict:
    """Pass iff the drill recovered and recovered − injected ≤ target_s (DESIGN §5).

    `subject`/`verb` word the failure: ("the job", "resume") → "the job did not resume within …".
    """
    target = format_duration(target_s)
    measured = recovery_seconds(timeline)
    last = timeline.last_reached or "none"
    if timeline.injected is None:
        reason = f"no fault was injected, so there is no recovery to judge (last phase reached: {last})"
    elif measured is None:
        reason = f"never recovered: {subject} did not {verb} within the {target} target (last phase reached: {last})"
    elif within(measured, target_s):
        reason = f"recovered in {format_duration(measured)} ({_secs(measured)}), within the {target} target"
    else:
        over = format_duration(measured - target_s)
        reason = f"recovered in {format_duration(measured)} ({_secs(measured)}), {over} over the {target} target"
    return Verdict("recovery", within(measured, target_s), measured, float(target_s), "s", reason,
                   never_reached=timeline.injected is not None and measured is None)


def judge_max(name: str, measured: float | None, limit: float, unit: str = "") -> Verdict:
    """Pass iff measured ≤ limit: "lost steps: 150 steps, within the limit of 2000 steps"."""
    if measured is None:
        return Verdict(name, False, None, float(limit), unit, f"{name}: not measured (limit {_fmt(limit, unit)})")
    ok = within(measured, limit)
    where = "within" if ok else "over"
    return Verdict(name, ok, float(measured), float(limit), unit,
                   f"{name}: {_fmt(measured, unit)}, {where} the limit of {_fmt(limit, unit)}")


def judge_min(name: str, measured: float | None, limit: float, unit: str = "") -> Verdict:
    """Pass iff measured ≥ limit: "throughput: 0.93 of baseline, at least the required 0.9 of baseline"."""
    if measured is None:
        return Verdict(name, False, None, float(limit), unit, f"{name}: not measured (required at least {_fmt(limit, unit)})")
    ok = within(limit, measured)
    where = "at least" if ok else "below"
    return Verdict(name, ok, float(measured), float(limit), unit,
                   f"{name}: {_fmt(measured, unit)}, {where} the required {_fmt(limit, unit)}")


def judge_resume(resumed_step: int | None, latest_checkpoint_step: int | None) -> Verdict:
    """Pass iff the job resumed from the latest checkpoint saved before the fault (or a later one)."""
    if latest_checkpoint_step is None:
        reason = "no checkpoint was saved before the fault, so the job had nothing to resume from"
        ok = False
    elif resumed_step is None:
        reason = f"never resumed from a checkpoint (the latest checkpoint was {latest_checkpoint_step})"
        ok = False
    elif within(latest_checkpoint_step, resumed_step):
        reason = f"resumed from step {resumed_step}, the latest checkpoint"
        ok = True
    else:
        reason = (f"resumed from step {resumed_step} but the latest checkpoint was {latest_checkpoint_step}: "
                  "resumed from a stale checkpoint")
        ok = False
    return Verdict("resumed checkpoint", ok, None if resumed_step is None else float(resumed_step),
                   None if latest_checkpoint_step is None else float(latest_checkpoint_step), "step", reason,
                   never_reached=latest_checkpoint_step is not None and resumed_step is None)


def judge_effect(fault: str, observed: str | None) -> Verdict:
    """Did the fault take effect? `observed` is what showed it (e.g. "2 pods evicted"), None when nothing
    did: then the drill is inconclusive — recovery from a fault that never happened proves nothing."""
    if observed:
        return Verdict("fault effect", True, None, None, "", f"{fault} took effect: {observed}")
    return Verdict("fault effect", False, None, None, "",
                   f"inconclusive: {fault} had no observable effect, so recovery was not tested", inconclusive=True)


def lost_steps(step_at_fault: int | None, resumed_step: int | None) -> int | None:
    """Steps of progress thrown away: the last step before the fault minus the step resumed from."""
    if step_at_fault is None or resumed_step is None:
        return None
    return max(0, step_at_fault - resumed_step)


def combine(verdicts: Sequence[Verdict], name: str = "overall") -> Verdict:
    """One verdict for a scenario: pass iff every part passed; any failure fails it; otherwise any
    inconclusive part makes it inconclusive. The reason leads with what did not pass."""
    if not verdicts:
        return Verdict(name, False, None, None, "", "nothing was judged")
    failed = [v for v in verdicts if not v.passed and not v.inconclusive]
    unsure = [v for v in verdicts if v.inconclusive]
    head = next((v for v in verdicts if v.name == "recovery"), verdicts[0])
    reason = "; ".join(v.reason for v in (failed or unsure or verdicts))
    return Verdict(name, not failed and not unsure, head.measured, head.target, head.unit, reason,
                   never_reached=any(v.never_reached for v in failed), inconclusive=bool(unsure and not failed))


def format_duration(seconds: float | None) -> str:
    """Human duration: 432 → "7m12s", 900 → "15m", 3725 → "1h2m5s", 4.25 → "4.2s"."""
    if seconds is None or math.isnan(seconds):
        return "unknown"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def _aware(phase: str, at: datetime | float | str) -> datetime:
    if isinstance(at, str):
        at = parse_iso(at)
    if isinstance(at, (int, float)):
        return datetime.fromtimestamp(at, timezone.utc)
    if not isinstance(at, datetime):
        raise TypeError(f"phase {phase}: expected a datetime, epoch seconds or ISO text, got {type(at).__name__}")
    if at.tzinfo is None:
        raise ValueError(f"phase {phase}: naive datetime {at.isoformat()}; use cluster time (Clock.now(), aware UTC)")
    return at.astimezone(timezone.utc)


def _secs(value: float) -> str:
    return f"{value:.0f} s" if abs(value) >= 10 else f"{value:.1f} s"


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{format_duration(value)} ({_secs(value)})"
    number = str(int(value)) if float(value).is_integer() else f"{value:.6g}"
    if not unit:
        return number
    return f"{number} %" if unit == "%" else f"{number} {unit}"
