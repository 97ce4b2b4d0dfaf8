"""The record of one drill scenario — one line of records.jsonl — as one typed, frozen value.

The recorder (fixtures/recorder.py) builds a `Record`, records.jsonl stores `Record.to_json()`, and
the report reads it back with `Record.from_json()`; nothing else spells the line's keys. `PHASES` (the
recovery phases in order, DESIGN §5) is defined here once. A failure's `Category` comes from what
happened — the exception's type (`category_of_error`) or a judged check's structured fields — never
from the words of its reason, so rewording a sentence cannot move a drill to another category.

JSON shape (DESIGN §7): run_id, drill, scenario, verdict (pass | fail | inconclusive), recovery_s,
target_s, phases {phase: ISO}, reason, category, details {…measurements, checks, faults, reverts},
started, finished, severity, target, defects, wall_started, nodeid (the pytest node id: matches the record to
its JUnit testcase and Allure result; absent on older lines). Times are `Clock.iso` (UTC, ms, Z).
"""

from __future__ import annotations

import enum
import fcntl
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Mapping

from drills.core.clock import Clock, parse_iso
from drills.core.errors import (
    CheckFailed, DrillError, InjectionFailed, InvalidProfile, RevertFailed, SloViolated, StopConditionBreached,
    TargetUnreachable, UnsafeTarget,
)

__all__ = ["PHASES", "Outcome", "Category", "Check", "Record", "category_of_error", "NOT_STARTED", "append_record"]

log = logging.getLogger(__name__)

# alerted: the platform's own monitoring raised the drill's alert (drills/detect; "detected" is the workload noticing)
PHASES: tuple[str, ...] = ("injected", "detected", "alerted", "rescheduled", "ready", "recovered", "caught_up")


class Outcome(str, enum.Enum):
    """A drill's verdict. Inconclusive: the fault had no effect or a precondition was not met (DESIGN §5)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    ABORTED = "aborted"  # a stop condition tripped: the faults were reverted at once, recovery was not judged


class Category(str, enum.Enum):
    """Why a drill did not pass. Names and Allure groups: drills/report/categories.yaml (same ids)."""

    SLO_BREACH = "slo_breach"  # a judged check missed its target, or the phase it waits for never came
    STALE_CHECKPOINT = "stale_checkpoint"
    SOCKET_FALLBACK = "socket_fallback"
    STORAGE_IO = "storage_io"
    DIVERGED = "diverged"  # the job trains again but its loss (or grad norm) is NaN/inf: it learns nothing
    WORKER_FAILED = "worker_failed"  # a worker container exited non-zero / OOMKilled / restarted after the resume
    NOT_EXPORTED = "not_exported"  # a GPU fault DCGM recorded reached no exporter on its node: monitoring is blind to it
    GPU_NOT_ISOLATED = "gpu_not_isolated"  # a GPU DCGM reports faulted was never marked unhealthy (allocatable, taint)
    NOT_REMEDIATED = "not_remediated"  # the site's remediation never cordoned the node of an unhealthy GPU
    UNSAFE_ROLLOUT = "unsafe_rollout"  # a rolling restart took more replicas down at once than the scenario allows
    SERVING_EVICTED = "serving_evicted"  # a serving replica was evicted or preempted to make room for batch work
    UNCLASSIFIED_LOG = "unclassified_log"  # inconclusive: an error-like log line no reader classifies
    NOT_OBSERVED = "not_observed"  # inconclusive: a fact the verdict needs was not observed in this run
    NO_EFFECT = "no_effect"  # inconclusive: the fault changed nothing the drill could observe
    PRECONDITION_NOT_MET = "precondition_not_met"  # inconclusive: CheckFailed (or the target gone) before injecting
    INJECTOR_FAILED = "injector_failed"  # InjectionFailed
    BAD_INPUT = "bad_input"  # InvalidProfile, UnsafeTarget: refused before any change
    REVERT_FAILED = "revert_failed"  # RevertFailed, or a revert the guard reported as failed
    NOT_RESTORED = "not_restored"  # reverted, but the steady state was not back to nominal after the settle period
    NOT_DETECTED = "not_detected"  # the platform's own monitoring raised no alert for the fault within its budget
    ALERT_STORM = "alert_storm"  # one fault raised more distinct alerts than the profile's budget
    PAGED = "paged"  # a planned operation woke the on-call: an alert that must stay quiet fired
    CHECK_FAILED = "check_failed"  # after injecting: a check could not measure, or failed outside a judged verdict
    INTERRUPTED = "interrupted"  # SIGINT / SIGTERM (KeyboardInterrupt)
    ABORTED = "aborted"  # StopConditionBreached: a stop condition over the steady state tripped
    ERROR = "error"  # any other exception: a bug, not a verdict on the platform

    @property
    def outcome(self) -> Outcome:
        """The verdict this category implies for a drill that did not pass."""
        if self is Category.ABORTED:
            return Outcome.ABORTED
        return Outcome.INCONCLUSIVE if self in _INCONCLUSIVE else Outcome.FAIL


_INCONCLUSIVE = frozenset({Category.NO_EFFECT, Category.PRECONDITION_NOT_MET, Category.UNCLASSIFIED_LOG,
                           Category.NOT_OBSERVED})

# Categories of a drill that stopped before injecting anything: when every record of a run is one
# of these (and none has an `injected` phase), the run exits 2 and prints their reasons.
NOT_STARTED = frozenset({Category.BAD_INPUT, Category.INJECTOR_FAILED, Category.PRECONDITION_NOT_MET})


def category_of_error(error: BaseException, injected: bool) -> Category:
    """The category of an exception that stopped a drill; `injected`: a fault was in place by then."""
    if isinstance(error, KeyboardInterrupt):
        return Category.INTERRUPTED
    if isinstance(error, StopConditionBreached):
        return Category.ABORTED
    if isinstance(error, (InvalidProfile, UnsafeTarget)):
        return Category.BAD_INPUT
    if isinstance(error, InjectionFailed):
        return Category.INJECTOR_FAILED
    if isinstance(error, RevertFailed):
        return Category.REVERT_FAILED
    if isinstance(error, SloViolated):
        return Category.SLO_BREACH
    if isinstance(error, (CheckFailed, TargetUnreachable)):
        return Category.CHECK_FAILED if injected else Category.PRECONDITION_NOT_MET
    if isinstance(error, DrillError):  # a plain DrillError: the run's environment (lock, tools) is not ready
        return Category.CHECK_FAILED if injected else Category.PRECONDITION_NOT_MET
    return Category.ERROR


@dataclass(frozen=True)
class Check:
    """One judged check as recorded (`details.checks[]`): a Verdict's figures and sentence."""

    name: str
    verdict: Outcome
    measured: float | None = None
    target: float | None = None
    unit: str = ""
    reason: str = ""
    baseline: float | None = None  # what `measured` compares with, when the limit is a multiple of it
    target_source: str | None = None  # where the target came from (drills/verdicts/targets.py), when resolved

    @property
    def passed(self) -> bool:
        return self.verdict is Outcome.PASS

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "verdict": self.verdict.value, "measured": self.measured, "target": self.target,
               "unit": self.unit, "reason": self.reason}
        if self.baseline is not None:
            out["baseline"] = self.baseline
        if self.target_source is not None:
            out["target_source"] = self.target_source
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Check":
        return cls(name=str(data.get("name") or "?"), verdict=Outcome(data.get("verdict") or "fail"),
                   measured=_float(data.get("measured")), target=_float(data.get("target")),
                   unit=str(data.get("unit") or ""), reason=str(data.get("reason") or ""),
                   baseline=_float(data.get("baseline")), target_source=data.get("target_source"))


@dataclass(frozen=True)
class Record:
    """What one drill scenario measured and concluded (see the module docstring for the JSON shape)."""

    drill: str
    verdict: Outcome
    run_id: str = ""
    scenario: str = ""
    recovery_s: float | None = None
    target_s: float | None = None
    phases: Mapping[str, datetime] = field(default_factory=dict)  # reached phases, PHASES order
    reason: str = ""
    category: Category | None = None
    checks: tuple[Check, ...] = ()
    faults: tuple[Mapping[str, Any], ...] = ()  # each fault's own frozen record, as the guard reported it
    reverts: tuple[Mapping[str, Any], ...] = ()  # {kind, target, ok, error}
    details: Mapping[str, Any] = field(default_factory=dict)  # the drill's other measurements
    started: datetime | None = None  # cluster time
    finished: datetime | None = None
    severity: str = "normal"
    target: str | None = None
    defects: tuple[str, ...] = ()
    wall_started: datetime | None = None  # wall time: orders runs (each twin's clock runs ahead by its own amount)
    nodeid: str = ""  # the pytest node id of the scenario ("" on lines written before it was kept)

    def __post_init__(self) -> None:
        # Times hold what the line can say (UTC, milliseconds), so a record equals its own JSON read back.
        ordered = {name: _ms(self.phases[name]) for name in PHASES if self.phases.get(name) is not None}
        for name in ("started", "finished", "wall_started"):
            object.__setattr__(self, name, _ms(getattr(self, name)))
        object.__setattr__(self, "phases", MappingProxyType(ordered))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "faults", tuple(MappingProxyType(dict(f)) for f in self.faults))
        object.__setattr__(self, "reverts", tuple(MappingProxyType(dict(r)) for r in self.reverts))
        object.__setattr__(self, "defects", tuple(self.defects))

    @property
    def passed(self) -> bool:
        return self.verdict is Outcome.PASS

    @property
    def injected(self) -> datetime | None:
        return self.phases.get("injected")

    @property
    def offsets(self) -> dict[str, float]:
        """Seconds since `injected` for each reached phase, in PHASES order ({} when nothing was injected)."""
        t0 = self.injected
        return {} if t0 is None else {name: (at - t0).total_seconds() for name, at in self.phases.items()}

    @property
    def failing_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def logs(self) -> tuple[str, ...]:
        """The log excerpt the drill kept (`details.logs`: text or lines)."""
        logs = self.details.get("logs")
        if not logs:
            return ()
        return tuple(logs.splitlines()) if isinstance(logs, str) else tuple(str(line) for line in logs)

    @property
    def overlay(self) -> tuple[tuple[float, float], ...]:
        """(seconds since injected, value) points drawn over the timeline chart (`details.overlay`)."""
        return tuple((float(t), float(v)) for t, v in self.details.get("overlay") or ())

    @property
    def overlay_label(self) -> str:
        return str(self.details.get("overlay_label") or "throughput")

    def to_json(self) -> dict[str, Any]:
        """The records.jsonl object (json.dumps-ready)."""
        return {
            "run_id": self.run_id, "drill": self.drill, "scenario": self.scenario, "verdict": self.verdict.value,
            "recovery_s": self.recovery_s, "target_s": self.target_s,
            "phases": {name: Clock.iso(at) for name, at in self.phases.items()},
            "reason": self.reason, "category": None if self.category is None else self.category.value,
            "details": {**self.details, "checks": [c.to_json() for c in self.checks],
                        "faults": [dict(f) for f in self.faults], "reverts": [dict(r) for r in self.reverts]},
            "started": _iso(self.started), "finished": _iso(self.finished), "severity": self.severity,
            "target": self.target, "defects": list(self.defects), "wall_started": _iso(self.wall_started),
            **({"nodeid": self.nodeid} if self.nodeid else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Record":
        """Inverse of `to_json`; ValueError (naming the field) for a verdict, category or time it cannot read."""
        if not isinstance(data, Mapping) or "drill" not in data or "verdict" not in data:
            raise ValueError("a record needs at least `drill` and `verdict`")
        details = dict(data.get("details") or {})
        checks = details.pop("checks", None) or []
        faults = details.pop("faults", None) or []
        reverts = details.pop("reverts", None) or []
        phases = {}
        for name, text in (data.get("phases") or {}).items():
            if name not in PHASES:
                log.debug("record of %s: ignoring unknown phase %r", data.get("drill"), name)
            elif text:
                phases[name] = _time(f"phases.{name}", text)
        return cls(
            run_id=str(data.get("run_id") or ""), drill=str(data["drill"]), scenario=str(data.get("scenario") or ""),
            verdict=_enum(Outcome, "verdict", data["verdict"]),
            recovery_s=_float(data.get("recovery_s")), target_s=_float(data.get("target_s")), phases=phases,
            reason=str(data.get("reason") or ""),
            category=None if not data.get("category") else _enum(Category, "category", data["category"]),
            checks=tuple(Check.from_json(c) for c in checks if isinstance(c, Mapping)),
            faults=tuple(f for f in faults if isinstance(f, Mapping)),
            reverts=tuple(r for r in reverts if isinstance(r, Mapping)), details=details,
            started=_time("started", data.get("started")), finished=_time("finished", data.get("finished")),
            severity=str(data.get("severity") or "normal"),
            target=None if data.get("target") is None else str(data["target"]),
            defects=tuple(str(d) for d in data.get("defects") or ()),
            wall_started=_time("wall_started", data.get("wall_started")), nodeid=str(data.get("nodeid") or ""),
        )


def append_record(path: str | os.PathLike, record: Record) -> None:
    """Append `record` as its one line of records.jsonl: one write() of the whole line under an exclusive
    flock, so lanes of a run (drills.core.lanes) appending at once never interleave their lines."""
    data = (json.dumps(record.to_json(), ensure_ascii=False, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)  # closing drops the lock


def _enum(kind: type[enum.Enum], name: str, value: Any):
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise ValueError(f"`{name}` is {value!r}, not one of {known}") from None


def _time(name: str, value: Any) -> datetime | None:
    if not value:
        return None
    try:
        at = parse_iso(str(value))
    except ValueError:
        raise ValueError(f"`{name}` is {value!r}, not an ISO time") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)  # older lines: naive meant UTC


def _ms(at: datetime | None) -> datetime | None:
    if at is None:
        return None
    at = at.astimezone(timezone.utc) if at.tzinfo else at.replace(tzinfo=timezone.utc)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def _iso(at: datetime | None) -> str | None:
    return None if at is None else Clock.iso(at)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
