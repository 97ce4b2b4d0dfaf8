"""What the twin's workload parts share in one process: ground truth, the checkpoint store, and the
fabric's leaf state (fed from the switches' SSH threads into the asyncio loop).

One hub per Twin (`hub_for(twin)`), created by the workloads provider; a controller that runs
without it (a bare test twin) gets one made on demand, so it never depends on start order.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Callable

from drills.twin.workloads.progress import LeafView
from drills.twin.workloads.store import CheckpointStore
from drills.twin.workloads.truth import Truth

__all__ = ["WorkloadHub", "LeafViews", "hub_for"]

log = logging.getLogger(__name__)

LeafListener = Callable[[str, LeafView], None]


class LeafViews(dict):
    """leaf → LeafView, live; jobs also report through it the traffic they put across each leaf's
    uplinks (`carry`), which the switches count (drills.twin.fabric.traffic). No fabric: nothing counts."""

    traffic = None

    def carry(self, owner: str, loads: dict[str, float]) -> None:
        if self.traffic is not None:
            self.traffic.carry(owner, loads)


class WorkloadHub:
    """Truth, checkpoint store and leaf states of one twin; listeners hear leaf changes on the loop."""

    def __init__(self, twin: Any):
        self.twin = twin
        self.truth = Truth(twin.clock)
        profile = twin.profile
        store_dir = profile.storage.store_dir if profile is not None else "checkpoint-store"
        self.store_root = Path(twin.state_dir) / store_dir
        self.contention_slowdown = profile.storage.contention_slowdown if profile is not None else 1.0
        self._store: CheckpointStore | None = None
        self.leaves = LeafViews()
        self.fabric = None  # FabricHandle once the fabric component started
        self._listeners: list[LeafListener] = []

    @property
    def store(self) -> CheckpointStore:
        if self._store is None:
            self._store = CheckpointStore(self.store_root, self.contention_slowdown)
        return self._store

    def leaf(self, name: str) -> LeafView | None:
        return self.leaves.get(name)

    def on_leaf_change(self, listener: LeafListener) -> None:
        self._listeners.append(listener)

    def attach_fabric(self, handle: Any, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """Adopt a started fabric: seed leaf states, and hop every link event onto `loop`."""
        self.fabric = handle
        self.leaves.traffic = getattr(handle, "traffic", None)
        now = self.twin.clock.timestamp()
        for leaf in handle.fabric.leaves():
            r = handle.fabric.redundancy(leaf)
            self.leaves[leaf] = LeafView(leaf, r.up, r.total, now)
        return handle.fabric.on_change(self._on_event, loop=loop)

    def _on_event(self, event: Any) -> None:
        """Runs on the loop thread (Fabric.on_change hands it over with call_soon_threadsafe)."""
        red = event.redundancy
        if red is None:
            return
        prev = self.leaves.get(red.leaf)
        if prev is not None and prev.up == red.up:
            return
        view = LeafView(red.leaf, red.up, red.total, event.at)
        self.leaves[red.leaf] = view
        for listener in list(self._listeners):
            try:
                listener(red.leaf, view)
            except Exception:  # noqa: BLE001 — one broken listener must not stop the others
                log.exception("leaf listener %r failed on %s", listener, red.leaf)


def hub_for(twin: Any) -> WorkloadHub:
    """The twin's hub, created on first use."""
    hub = getattr(twin, "workloads", None)
    if hub is None:
        hub = WorkloadHub(twin)
        twin.workloads = hub
    return hub
