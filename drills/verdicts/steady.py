"""The steady-state hypothesis, judged: each reading of the platform against its nominal (pure).

Chaos Toolkit checks a steady-state hypothesis before and after an experiment; a drill does the same with
the profile's `nominal:` (drills/profile/nominal.py). Before the first fault, a platform that is not
nominal gets nothing injected and the drill is inconclusive (`precondition_not_met`): recovery cannot be
proved on a platform that was broken already. After the revert and a settle period, a platform that is
not back to nominal fails the drill (`not_restored`). A reading that could not be taken is not nominal:
unknown is not healthy (DESIGN §5b). The readers are drills/measure/steady.py; this module only compares.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from drills.core.clock import Clock
from drills.core.kubetime import latest, may_be_after, surely_before

__all__ = ["Reading", "Hypothesis", "throughput_reading", "restart_reading", "replicas_reading", "uplink_reading",
           "latency_reading",
           "store_reading", "gpu_use_reading", "answers_reading", "unobserved", "GPU_IDLE_PCT"]

log = logging.getLogger(__name__)

When = Literal["before", "after"]


@dataclass(frozen=True)
class Reading:
    """One facet of the steady state: what was read, where, and what nominal is. `ok` None: not observed."""

    facet: str  # "training throughput", "worker restarts", "inference replicas", "uplink leaf-1:Ethernet48", …
    value: float | None
    unit: str
    expected: str  # "≥ 204.8 samples/s (0.8 × nominal 256 samples/s, profile nominal.drills.gpu-node-loss)"
    source: str  # where the value was read: "pods/log ai-platform/llm-finetune-8b-worker-0 (12 step lines …)"
    ok: bool | None
    detail: str = ""  # what the value means, when a number alone does not say it
    withheld: bool = False  # deliberately not read (`drills validate` writes no store probe): unknown, not failed

    @property
    def observed(self) -> bool:
        return self.ok is not None

    def sentence(self) -> str:
        value = "not observed" if self.value is None and not self.detail else \
            (self.detail or f"{_num(self.value)} {self.unit}".strip())
        mark = "nominal" if self.ok else ("NOT OBSERVED" if self.ok is None else "NOT NOMINAL")
        return f"{self.facet}: {value}, expected {self.expected} — {mark} (read from {self.source})"

    def to_dict(self) -> dict[str, Any]:
        return {"facet": self.facet, "value": self.value, "unit": self.unit, "expected": self.expected,
                "source": self.source, "ok": self.ok, "detail": self.detail, "withheld": self.withheld}


@dataclass(frozen=True)
class Hypothesis:
    """Every reading of one check (before the fault, or after the revert) and whether all were nominal."""

    when: When
    drill: str
    readings: tuple[Reading, ...]
    at: datetime | None = None  # cluster time of the check
    opted_out: str = ""  # why nothing was checked: the profile opts the drill out (`{drill: {}}`), said, never hidden

    @property
    def nominal(self) -> bool:
        return all(r.ok is True for r in self.readings)

    @property
    def off(self) -> tuple[Reading, ...]:
        return tuple(r for r in self.readings if r.ok is not True)

    def off_sentence(self) -> str:
        """Every reading that is not nominal, one clause each (value, source, expected)."""
        return "; ".join(r.sentence() for r in self.off)

    def reason(self) -> str:
        """One sentence naming every reading that is not nominal (value, source, expected)."""
        if self.nominal:
            return f"steady state {self.when} the drill: nominal ({len(self.readings)} reading(s))"
        head = ("the platform was not nominal before the fault, so nothing was injected"
                if self.when == "before" else "the platform was not back to nominal after the revert")
        return f"{head}: {self.off_sentence()}"

    def to_dict(self) -> dict[str, Any]:
        out = {"when": self.when, "drill": self.drill, "nominal": self.nominal,
               "at": self.at and Clock.iso(self.at), "readings": [r.to_dict() for r in self.readings]}
        if self.opted_out:
            out.update(nominal=None, checked=False, why=self.opted_out)
        return out


def throughput_reading(measured: float | None, unit: str, source: str, nominal: float | None, nominal_source: str,
                       min_ratio: float) -> Reading:
    """The job's recent throughput against `min_ratio` × nominal; a nominal that could not be established
    (no history) or a throughput not read is not observed."""
    if nominal is None:
        return Reading("training throughput", measured, unit, f"a nominal throughput ({nominal_source})", source, None,
                       detail="" if measured is None else f"{_num(measured)} {unit}")
    floor = min_ratio * nominal
    expected = f"≥ {_num(floor)} {unit} ({min_ratio:g} × nominal {_num(nominal)} {unit}, {nominal_source})"
    if measured is None:
        return Reading("training throughput", None, unit, expected, source, None)
    ratio = measured / nominal
    return Reading("training throughput", round(measured, 3), unit, expected, source, measured >= floor,
                   detail=f"{_num(measured)} {unit} ({ratio:.0%} of nominal)")


def restart_reading(last_restart: datetime | None, what: str, source: str, now: datetime, window_s: float,
                    since: datetime | None = None, verified: datetime | None = None) -> Reading:
    """No worker restart in the last `window_s` (and none after `since`, the revert, when given). `verified`: when
    an earlier drill of this run last found the platform back to nominal after its revert — a restart before
    that was that drill's own, already checked restored (drills run one after another on one cluster)."""
    expected = f"no worker restart in the last {_dur(window_s)}"
    if since is not None:
        expected += " nor after the revert"
    if last_restart is None:
        return Reading("worker restarts", None, "", expected, source, True, detail="none recorded")
    ago = (now - last_restart).total_seconds()
    # after the revert the drill's own restart is expected: only one after the revert counts. The restart's time is
    # whole seconds (lastTransitionTime, finishedAt): one in the revert's second may be after it (core/kubetime.py)
    recent = (now - latest(last_restart)).total_seconds() < window_s if since is None else \
        may_be_after(last_restart, since)
    detail = f"{what} {_dur(ago)} ago"
    if recent and since is None and verified is not None and surely_before(last_restart, verified):
        recent, detail = False, f"{detail}, by an earlier drill of this run, found back to nominal after it"
    return Reading("worker restarts", round(ago, 1), "s ago", expected, source, not recent, detail=detail)


def replicas_reading(ready_serving: int | None, ready: int | None, desired: int | None, expected_n: int,
                     source: str) -> Reading:
    """Every one of the nominal replicas Ready and in the Service's endpoints."""
    expected = f"{expected_n} replica(s) Ready and in the Service's endpoints"
    if ready_serving is None:
        return Reading("inference replicas", None, "", expected, source, None)
    detail = (f"{ready_serving} Ready and in the endpoints ({ready} Ready, the Deployment wants "
              f"{desired if desired is not None else '?'})")
    return Reading("inference replicas", ready_serving, "replicas", expected, source, ready_serving >= expected_n,
                   detail=detail)


def answers_reading(sent: int, failures: dict[str, int], source: str) -> Reading:
    """The endpoint's probe completions: nominal iff every one was a valid completion (drills/load/outcome.py, the
    load's own classifier). `failures`: kind and reason → count; none sent (nothing reached) is not observed."""
    expected = f"{sent} of {sent} probe completions valid (2xx, no error payload, generated text, one model)"
    if sent <= 0:
        return Reading("inference answers", None, "", expected, source, None)
    bad = sum(failures.values())
    said = "; ".join(f"{n}× {why}" for why, n in failures.items())
    detail = f"{sent - bad} of {sent} valid" + (f" ({said})" if said else "")
    return Reading("inference answers", float(sent - bad), "answers", expected, source, bad == 0, detail=detail)


def latency_reading(latencies_s: list[float], source: str, nominal_s: float | None, nominal_source: str,
                    max_ratio: float) -> Reading:
    """The median latency of the valid probe completions against `max_ratio` × nominal; no valid probe, or no
    nominal to compare with (no history yet), is not observed."""
    measured = statistics.median(latencies_s) if latencies_s else None
    shown = "" if measured is None else f"{_ms(measured)} (median of {len(latencies_s)} valid probe completion(s))"
    if nominal_s is None:
        return Reading("inference latency", measured, "s", f"a nominal latency ({nominal_source})", source, None,
                       detail=shown)
    ceiling = max_ratio * nominal_s
    expected = f"≤ {_ms(ceiling)} ({max_ratio:g} × nominal {_ms(nominal_s)}, {nominal_source})"
    if measured is None:
        return Reading("inference latency", None, "s", expected, source, None,
                       detail="not observed: no probe completion was valid")
    return Reading("inference latency", round(measured, 4), "s", expected, source, measured <= ceiling,
                   detail=f"{shown}, {measured / nominal_s:.1f}× nominal")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def uplink_reading(switch: str, interface: str, admin_up: bool | None, oper_up: bool | None, source: str) -> Reading:
    """One uplink of the job's leaf: admin and oper up (oper up: the far end is up too — a link is up only
    when both ends are)."""
    facet = f"uplink {switch}:{interface}"
    if admin_up is None or oper_up is None:
        return Reading(facet, None, "", "admin up and oper up", source, None)
    state = f"admin {'up' if admin_up else 'down'}, oper {'up' if oper_up else 'down'}"
    return Reading(facet, 1.0 if admin_up and oper_up else 0.0, "", "admin up and oper up", source,
                   admin_up and oper_up, detail=state)


def store_reading(measured_mb_s: float | None, source: str, nominal_mb_s: float, min_ratio: float,
                  withheld: bool = False) -> Reading:
    """The store's write bandwidth as a checkpoint-shaped probe measures it, against its nominal."""
    floor = min_ratio * nominal_mb_s
    expected = f"≥ {_num(floor)} MB/s ({min_ratio:g} × nominal {_num(nominal_mb_s)} MB/s)"
    if measured_mb_s is None:
        return Reading("store bandwidth", None, "MB/s", expected, source, None, withheld=withheld)
    return Reading("store bandwidth", round(measured_mb_s, 1), "MB/s", expected, source, measured_mb_s >= floor)


GPU_IDLE_PCT = 5.0  # a GPU job's GPUs average well above this; a process on the CPU leaves them at 0 %


def gpu_use_reading(pod: str, gpus: int, utilization: tuple[int, ...] | None, apps: tuple | None, cuda_line: str | None,
                    source: str, why_unread: str = "") -> Reading:
    """A worker's GPUs in use (the seed's §5.1): nvidia-smi shows compute processes holding them and an average
    utilisation above GPU_IDLE_PCT, and the job's log has no torch "CUDA initialization" warning. Either key saying
    idle or CPU is not nominal; the log alone never makes it nominal: nvidia-smi not read is not observed."""
    facet = f"GPUs in use by {pod}"
    expected = (f"its {gpus} GPU(s) held by compute processes and busy (mean utilisation > {GPU_IDLE_PCT:g} %), "
                "no \"CUDA initialization\" warning in its log")
    said = f"; its log: \"CUDA initialization: {cuda_line.split('. ', 1)[0].rstrip('.')}.\"" if cuda_line else ""
    if utilization is None or apps is None:
        return Reading(facet, None, "%", expected, f"{source}: {why_unread or 'nvidia-smi not read'}",
                       False if cuda_line else None, detail=f"nvidia-smi not read ({why_unread}){said}" if said else "")
    mean = sum(utilization) / len(utilization) if utilization else 0.0
    busy = bool(apps) and mean > GPU_IDLE_PCT
    detail = (f"{len(utilization)} GPU(s) at {_num(mean)} % mean utilisation, {len(apps)} compute process(es)"
              f"{' holding them' if apps else ' (none holds a GPU: the process runs on the CPU)'}{said}")
    return Reading(facet, round(mean, 1), "%", expected, source, busy and not cuda_line, detail=detail)


def unobserved(facet: str, expected: str, why: str) -> Reading:
    """A facet whose reading could not be taken: `why` names what was missing."""
    return Reading(facet, None, "", expected, why, None)


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _dur(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
