"""Ground truth: when each recovery condition really became true inside the twin.

The drills measure recovery from the outside (watches, logs, HTTP probes); the twin's workloads
record here the moment each condition actually held, so tests can compare a measurement with the
truth. Every transition is one record in an append-only, time-ordered list (`seq` increases), so
"the first X after time T" is a filter on the list. `GET /twin/v1/truth` serves `snapshot()`.

Record kinds (subject = "namespace/name" of a training job or an inference Deployment):

training: `job_started`, `fault` (detail `cause`, `step_at_fault`), `job_resumed` (every worker Running
again after a restart), `resumed_from_checkpoint` (detail `step`), `first_step_after_resume`
(detail `step`), `caught_up` (step ≥ step at the last fault), `checkpoint_saved` (detail `step`,
`duration_s`), `nccl_transport` (detail `transport`), `fabric_fault` (detail `leaf`, `uplinks_up`),
`nccl_warn`, `rerouted`, `throughput_degraded`, `throughput_restored` (≥ 90 % of baseline again
after a fabric event), `nccl_timeout`, `worker_crashed`.
inference: `all_ready`, `not_all_ready`, `gateway_outage_started` (no replica routable),
`gateway_serving` (a replica routable again after an outage: every request from then on is
answered), `first_answer_after_outage` (the first 200 the gateway actually sent after an outage).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from drills.core.clock import Clock, to_iso

__all__ = ["Truth", "TRAINING_KINDS", "INFERENCE_KINDS"]

log = logging.getLogger(__name__)

TRAINING_KINDS = (
    "job_started", "fault", "job_resumed", "resumed_from_checkpoint", "first_step_after_resume", "caught_up",
    "checkpoint_saved", "nccl_transport", "fabric_fault", "nccl_warn", "rerouted", "throughput_degraded",
    "throughput_restored", "nccl_timeout", "worker_crashed", "crash_after_resume", "crash_before_drill",
)
INFERENCE_KINDS = ("all_ready", "not_all_ready", "gateway_outage_started", "gateway_serving",
                   "first_answer_after_outage")
MAX_RECORDS = 50_000


class Truth:
    """Append-only transition records plus the latest state per subject (thread-safe)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._lock = threading.Lock()
        self._records: list[dict] = []
        self._times: list[float] = []  # each record's exact time: `at` is rounded to the millisecond for reading
        self._seq = 0
        self._state: dict[str, dict[str, dict]] = {"training": {}, "inference": {}}

    def record(self, area: str, subject: str, kind: str, at: float | None = None, **detail: Any) -> dict:
        """Append one transition (`at` twin epoch seconds, default now); returns the record."""
        when = self.clock.timestamp() if at is None else float(at)
        with self._lock:
            self._seq += 1
            rec = {"seq": self._seq, "area": area, "subject": subject, "kind": kind,
                   "at": round(when, 3), "atIso": _iso(when), **detail}
            self._records.append(rec)
            self._times.append(when)
            if len(self._records) > MAX_RECORDS:
                del self._records[: len(self._records) - MAX_RECORDS]
                del self._times[: len(self._times) - MAX_RECORDS]
            state = self._state.setdefault(area, {}).setdefault(subject, {})
            state.setdefault("last", {})[kind] = {"at": rec["at"], "atIso": rec["atIso"], **detail}
        log.debug("truth %s %s %s %s", area, subject, kind, detail)
        return rec

    def update(self, area: str, subject: str, **values: Any) -> None:
        """Set current-state fields of a subject (baseline throughput, step, transport…). A callable value is
        read when the truth is (`snapshot`), not at every update: what costs a look at the store, say."""
        with self._lock:
            self._state.setdefault(area, {}).setdefault(subject, {}).update(values)

    def records(self, kind: str | None = None, subject: str | None = None, since: float | None = None) -> list[dict]:
        """Records of `kind` on `subject` made at or after `since` (twin seconds, as the clock read it). Compared
        with the exact time, not the rounded `at`: the twin's clock holds while the twin works, so what a request
        caused is stamped at the very instant the caller read before it — rounded down, it would seem earlier."""
        with self._lock:
            return [dict(r) for r, t in zip(self._records, self._times)
                    if (kind is None or r["kind"] == kind) and (subject is None or r["subject"] == subject)
                    and (since is None or t >= since)]

    def snapshot(self) -> dict:
        """The JSON document `GET /twin/v1/truth` answers."""
        now = self.clock.timestamp()
        with self._lock:
            return {
                "now": round(now, 3), "nowIso": _iso(now), "scale": getattr(self.clock, "scale", 1.0),
                "training": {k: _copy(v) for k, v in self._state.get("training", {}).items()},
                "inference": {k: _copy(v) for k, v in self._state.get("inference", {}).items()},
                "records": [dict(r) for r in self._records],
            }


def _iso(ts: float) -> str:
    """Twin time with milliseconds (to_iso is second precision, as Kubernetes writes objects)."""
    ms = int(round(ts * 1000))
    return f"{to_iso(ms // 1000)[:-1]}.{ms % 1000:03d}Z"


def _copy(state: dict) -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v() if callable(v) else v) for k, v in state.items()}
