"""Whether a model replica's server process answers, as the gateway must know it: read from its pod, not from
its Ready condition (a pod without a readiness probe is Ready long before its model is loaded).

A replica's process listens once its model is loaded — the container's start plus the same jittered startup
delay the kubelet and the replica's vLLM log use (`startup_delay`) — and stops at SIGTERM. A pod deleted
gracefully gets SIGTERM when its preStop hook ends (at most when the grace period does); vLLM 0.6 exits at once
on SIGTERM and aborts the requests in flight (vllm-project/vllm#36666: "SIGTERM to the API server … would cause
immediate process termination"; `--shutdown-timeout` came later), so a preStop sleep that outlasts the endpoint
propagation is what keeps a rolling restart lossless. `terminated(name)` is an event the gateway races each
request against.

The preStop is counted from the later of the delete and the moment the gateway stopped routing to the pod
(`unrouted`): the endpoint propagation the platform owes is `endpoints_lag` (modelled on top, as stale routes), and
whatever the twin's own controllers take in wall time is not the platform's (at 600×, 10 ms of wall latency
between the kubelet, the endpoints controller and the gateway are 6 s of cluster time — longer than a preStop).

Pods removed at once (a force delete with grace 0) and containers made to exit keep the gateway's older model:
the requests already routed to them complete (noted as a known simplification: their kill is abrupt).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from drills.core.clock import parse_iso
from drills.twin.controllers.nodeutil import pre_stop_seconds, startup_delay

__all__ = ["ReplicaProcesses", "UP", "LOADING", "GONE"]

log = logging.getLogger(__name__)

UP, LOADING, GONE = "up", "loading", "gone"


@dataclass
class _Process:
    listens_at: float | None = None  # twin ts its model is loaded (None: no running container)
    sigterm_at: float | None = None  # twin ts it gets SIGTERM (None: not being deleted gracefully, or not yet due)
    deleted_at: float | None = None  # twin ts of its graceful delete
    hold_s: float = 0.0  # what holds SIGTERM back after the delete: the preStop, within the grace period
    unrouted_at: float | None = None  # twin ts the gateway stopped routing to it
    terminated: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None


class ReplicaProcesses:
    """Pod name → its server process, fed by a pod informer's events (`on_pod`)."""

    def __init__(self, clock, timings) -> None:
        self.clock, self.timings = clock, timings
        self._procs: dict[str, _Process] = {}

    def on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        name = pod["metadata"]["name"]
        if etype == "DELETED":
            proc = self._procs.pop(name, None)
            if proc is not None and proc.deleted_at is not None:  # terminated gracefully and removed: surely gone
                if proc.timer is not None:
                    proc.timer.cancel()
                proc.terminated.set()
            return
        proc = self._procs.setdefault(name, _Process())
        proc.listens_at = self._listens_at(pod)
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and proc.deleted_at is None:
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            proc.deleted_at = parse_iso(meta["deletionTimestamp"]).timestamp() - grace
            proc.hold_s = min(pre_stop_seconds(pod), grace)
            self._schedule(proc)

    def unrouted(self, name: str) -> None:
        """The gateway stopped routing to `name` (it left the Service's endpoints)."""
        proc = self._procs.setdefault(name, _Process())
        if proc.unrouted_at is None:
            proc.unrouted_at = self.clock.timestamp()
            self._schedule(proc)

    def _schedule(self, proc: _Process) -> None:
        """SIGTERM `hold_s` after the later of the delete and the route's removal, once both happened."""
        if proc.deleted_at is None or proc.unrouted_at is None or proc.sigterm_at is not None:
            return
        proc.sigterm_at = max(proc.deleted_at, proc.unrouted_at) + proc.hold_s
        wait = max(0.0, self.clock.wall_seconds(proc.sigterm_at - self.clock.timestamp()))
        proc.timer = asyncio.get_running_loop().call_later(wait, proc.terminated.set)

    def state(self, name: str) -> str | None:
        """UP (answers), LOADING (its container runs, the model is not loaded: nothing listens yet), GONE, or
        None when no pod of that name is known (not yet seen, or deleted)."""
        proc = self._procs.get(name)
        if proc is None:
            return None
        now = self.clock.timestamp()
        if proc.sigterm_at is not None and now >= proc.sigterm_at:
            return GONE
        if proc.listens_at is None:
            return GONE
        return UP if now >= proc.listens_at else LOADING

    def terminated(self, name: str) -> asyncio.Event | None:
        proc = self._procs.get(name)
        return None if proc is None else proc.terminated

    def _listens_at(self, pod: dict) -> float | None:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        started = ((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") if statuses else None
        if not started:
            return None
        return parse_iso(started).timestamp() + startup_delay(pod, self.timings)
