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
        self.storage = profile.storage if profile is not None else None
        self.mount = None  # StoreMount once the store component mounted the modelled store
        self._store: CheckpointStore | None = None
        self.leaves = LeafViews()
        self.fabric = None  # FabricHandle once the fabric component started
        self.gateway: Any = None  # the inference gateway (its replicas' load), once installed
        self.training_sims: dict = {}  # (ns, job) → JobSim, the training controller's (whether a job steps)
        self._listeners: list[LeafListener] = []

    @property
    def store(self) -> CheckpointStore:
        if self._store is None:
            root = self.backing_root if self.modelled_store else self.store_root
            self._store = CheckpointStore(root, self.contention_slowdown)
        return self._store

    def volume_dir(self, volume: dict) -> Path | None:
        """The host directory backing a pod volume: every PersistentVolumeClaim is the checkpoint store (as the fio
        pods see it); anything else (emptyDir, hostPath) is node-local and holds nothing another pod can read."""
        return self.store.root if "persistentVolumeClaim" in (volume or {}) else None

    @property
    def modelled_store(self) -> bool:
        """Whether the profile asks for the mounted store with a modelled bandwidth (storefs)."""
        return self.storage is not None and self.storage.io_bandwidth_mb_s is not None

    @property
    def backing_root(self) -> Path:
        """Where the mounted store's files really live (the twin writes its own markers there)."""
        return self.store_root.with_name(self.store_root.name + ".data")

    async def mount_store(self) -> dict:
        """Mount the modelled store at `store_root` (component start); twin.json gets its path and model."""
        import asyncio

        from drills.twin.workloads.store_mount import StoreMount, fuse_available
        from drills.twin.workloads.storefs import StoreModel

        if not self.modelled_store:
            return {"checkpoint_store": str(self.store.root), "checkpoint_store_model": None}
        st = self.storage
        model = StoreModel(st.io_bandwidth_mb_s, st.client_bandwidth_mb_s)
        mount = StoreMount(self.store_root, self.backing_root, model, corrupt_reads=st.corrupt_reads)
        why = fuse_available()
        if why is None:
            try:
                await asyncio.to_thread(mount.start)
            except OSError as err:
                why = str(err)
        if why is not None:  # the twin still runs (other drills need no store model); twin.json says so
            log.warning("twin store NOT modelled (a plain directory: the storage drill measures the local disk): %s; "
                        "install libfuse2 and fusepy (make bootstrap)", why)
            self.store_root = self.backing_root
            return {"checkpoint_store": str(self.store.root), "checkpoint_store_model": None,
                    "checkpoint_store_unmodelled": why}
        self.mount = mount
        self.store.model = mount.model  # the serving process's model, asked over its pipe
        return {"checkpoint_store": str(self.store_root),
                "checkpoint_store_model": {"bandwidth_mb_s": st.io_bandwidth_mb_s,
                                           "client_bandwidth_mb_s": st.client_bandwidth_mb_s}}

    async def unmount_store(self) -> None:
        import asyncio

        if self.mount is not None:
            await asyncio.to_thread(self.mount.stop)
            self.mount = None

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
