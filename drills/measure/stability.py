"""The stability window after a training job recovered (DESIGN §5): how long it was watched, what showed a
restart in it (its new workers stopping, further or failed resumes), the new workers' mean throughput; and
the NCCL transport each worker initialised on, before the fault and after the restart. Measured from the
monitor's state (drills.measure.job_state); `drills.verdicts.training` judges.
"""

from __future__ import annotations

import logging
from datetime import datetime

from drills.core.kubetime import may_be_after, not_before
from drills.measure import throughput as tp
from drills.measure.job_state import JobState
from drills.measure.logformats import TrainingEvent
from drills.verdicts.timeline import Timeline

__all__ = ["stability_window", "transports", "who"]

log = logging.getLogger(__name__)


def stability_window(state: JobState, samples: list[tp.Sample], timeline: Timeline, old: set[str],
                     now: datetime) -> tuple[float | None, tuple[str, ...], float | None]:
    """The stability window after `recovered`: how long it was watched, what showed a restart in it
    (new workers stopping, resumes after the first, retries), the new workers' mean throughput."""
    if timeline.recovered is None:
        return None, (), None
    start = timeline.recovered
    ended_at = state.job_left_running_at if state.ended(timeline.injected or start) else None
    end = min(now, not_before(ended_at, start)) if ended_at and may_be_after(ended_at, start) else now
    running = {u for u, at, _, _ in state.steps if u not in old and at >= start}
    stopped = [state.workers[u].name for u in running
               if state.workers.get(u) and state.workers[u].stopped_at is not None
               and may_be_after(state.workers[u].stopped_at, start)]  # whole seconds (core/kubetime.py)
    resumes = sorted({at for u, at, _ in state.resumes if u not in old and at > start})
    failed = sorted({at for u, at, _ in state.resume_failures if u not in old and at > start})
    signs = ([f"workers stopped {len(stopped)} time(s) after it resumed ({', '.join(sorted(set(stopped)))})"]
             if stopped else []) \
        + ([f"{len(resumes)} further resume(s)"] if resumes else []) \
        + ([f"{len(failed)} failed resume(s)"] if failed else [])
    values = [s.value for s in samples if s.worker not in old and start <= s.at <= end and s.value]
    mean = sum(values) / len(values) if values else None
    return max(0.0, (end - start).total_seconds()), tuple(signs), mean


def transports(state: JobState, nccl: list[tuple[str, TrainingEvent]], old: set[str],
               injected_at: datetime) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(before, after, sockets_after) from the workers' `nccl_transport` lines."""
    lines = [(u, e) for u, e in nccl if e.kind == "nccl_transport"]
    before = tuple(sorted({_label(e) for u, e in lines if u in old and e.at <= injected_at}))
    after = tuple(sorted({_label(e) for u, e in lines if u not in old}))
    sockets = tuple(sorted({who(state, u, e) for u, e in lines if u not in old and not e.is_rdma}))
    return before, after, sockets


def who(state: JobState, uid: str, event: TrainingEvent) -> str:
    """"<pod> (rank N)" for a worker's log event."""
    worker = state.workers.get(uid)
    name = worker.name if worker else uid
    return name if event.rank is None else f"{name} (rank {event.rank})"


def _label(event: TrainingEvent) -> str:
    return f"NET/{event.transport or '?'}" + (f" ({', '.join(event.devices)})" if event.devices else "")
