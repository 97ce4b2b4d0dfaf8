"""The node half of every twin kubelet: Lease renewals and Ready-condition heartbeats, the restart of
a stopped kubelet, and the NVIDIA device plugin's GPU health (allocatable `nvidia.com/gpu` drops, a
`GPUHealthy=False` condition with the XID, the profile's unhealthy-GPU taint, a Warning event).

A GPU is unhealthy when the driver broke it (the `/twin/v1/nodes/{name}/gpu` fault) or when DCGM's field cache
holds a critical XID for it (`dcgmi test --inject … -f 230`, drills/twin/workloads/dcgmi.py): the twin's GPU
health stands for the device plugin together with a DCGM health consumer (NVSentinel's GPU health monitor, a
site's DCGM-policy agent). The real device plugin reads NVML events only (NVIDIA/k8s-device-plugin
internal/rm/health.go), so on a site that runs no DCGM health consumer an injected XID marks nothing — which
`no-gpu-health-check` models here.

Heartbeat write load is bounded in wall time, not twin time: at scale 60 the real cadence (a Lease
renew every 10 s per node) would be ~6,000 writes/s for 1,024 nodes. Renewals are staggered round-robin
at `max(profile interval, nodes / budget)`: LEASE_WRITES_PER_S Lease writes and STATUS_WRITES_PER_S
node-status heartbeats per wall second at most. Liveness therefore does not come from Lease age:
a kubelet stops heartbeating when the fault endpoint marks it stopped (`twin.gpu-drills.io/kubelet:
stopped` with `…/kubelet-stopped-at`, its last heartbeat), and the node lifecycle controller counts
the grace period from that instant.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import TwinClient
from drills.twin.controllers.events import record_event
from drills.twin.controllers.kubelet import KUBELET_AGENT
from drills.twin.controllers.nodeutil import (
    DCGM_FIELDS_ANNOTATION, GPU, GPU_UNHEALTHY_AT, GPU_XID_ANNOTATION, condition, dcgm_critical_xids, gpu_unhealthy,
    kubelet_stopped, parse_quantity,
)

__all__ = ["NodeAgent", "LEASE_WRITES_PER_S", "STATUS_WRITES_PER_S", "XID_MESSAGES"]

log = logging.getLogger(__name__)

NODES = by_kind("v1", "Node")
LEASES = by_kind("coordination.k8s.io/v1", "Lease")
LEASE_WRITES_PER_S = 5.0    # wall-clock budget for Lease renewals, all nodes together
STATUS_WRITES_PER_S = 1.0   # wall-clock budget for Ready-condition heartbeats (each one a Node event every watcher decodes)
TICK_WALL_S = 0.25
XID_MESSAGES = {
    13: "Graphics Engine Exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
    48: "Double Bit ECC Error", 63: "ECC page retirement or row remapping recording event",
    74: "NVLink Error", 79: "GPU has fallen off the bus", 94: "Contained ECC error",
    95: "Uncontained ECC error", 119: "GSP RPC timeout",
}
_TICK = ("tick",)


class NodeAgent(Controller):
    name = "node-agent"

    def setup(self) -> None:
        self.client = TwinClient(self.ctx.client.base_url, user_agent=KUBELET_AGENT, app=self.ctx.client.app)
        self.nodes = self.ctx.informers.informer(NODES)
        profile = self.ctx.profile
        self.timings = getattr(profile, "timings", None)
        self.gpu_checks = bool(getattr(profile, "gpu_health_check", True))
        taint = getattr(profile, "unhealthy_gpu_taint", None)
        self.gpu_taint = taint.to_k8s() if taint is not None and self.gpu_checks else None
        self._was_stopped: set[str] = set()
        self._lease_cursor = self._status_cursor = 0
        self._lease_credit = self._status_credit = 0.0
        self.writes = {"lease": 0, "status": 0}
        self.nodes.add_handler(self._on_node)

    def start(self):
        task = super().start()
        self.enqueue(_TICK)
        return task

    async def stop(self) -> None:
        await super().stop()
        await self.client.close()

    async def reconcile(self, key: Hashable) -> None:
        if key == _TICK:
            try:
                await self._heartbeats()
            finally:
                self.enqueue_after(_TICK, TICK_WALL_S * self.ctx.clock.scale)
            return
        node = self.nodes.get("", key[1])
        if node is None:
            return
        if key[0] == "started":
            await self._kubelet_started(node)
        elif key[0] == "gpu":
            await self._gpu_health(node)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._was_stopped.discard(name)
            return
        if kubelet_stopped(node):
            self._was_stopped.add(name)
        elif name in self._was_stopped:
            self._was_stopped.discard(name)
            self.enqueue(("started", name))
        if self.gpu_checks and _gpu_signature(node) != _gpu_signature(old or {}) or \
                (self.gpu_checks and etype == "ADDED" and _broken(node)):
            self.enqueue(("gpu", name))

    # -- heartbeats -----------------------------------------------------------------------------
    def intervals(self, n_nodes: int) -> tuple[float, float]:
        """(lease, status) heartbeat intervals in twin seconds for `n_nodes`, within the wall budgets."""
        scale = self.ctx.clock.scale
        lease = max(float(getattr(self.timings, "node_lease_renew_interval", 10.0)), n_nodes / LEASE_WRITES_PER_S * scale)
        status = max(float(getattr(self.timings, "node_status_update_frequency", 10.0)),
                     n_nodes / STATUS_WRITES_PER_S * scale)
        return lease, status

    async def _heartbeats(self) -> None:
        names = sorted(name for (_, name) in self.nodes.cache)
        if not names:
            return
        lease_s, status_s = self.intervals(len(names))
        tick_twin = TICK_WALL_S * self.ctx.clock.scale
        self._lease_credit += len(names) * tick_twin / lease_s
        self._status_credit += len(names) * tick_twin / status_s
        now = to_iso(self.ctx.clock.now())
        micro = self.ctx.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        n = int(self._lease_credit)
        self._lease_credit -= n
        for name in self._rotate(names, "_lease_cursor", n):
            await self.client.patch(LEASES, "kube-node-lease", name, {"spec": {"renewTime": micro}}, kind="merge")
            self.writes["lease"] += 1
        n = int(self._status_credit)
        self._status_credit -= n
        for name in self._rotate(names, "_status_cursor", n):
            await self.client.patch(NODES, None, name, {"status": {"conditions": [
                {"type": "Ready", "lastHeartbeatTime": now}]}}, sub="status", kind="strategic")
            self.writes["status"] += 1

    def _rotate(self, names: list[str], cursor: str, count: int) -> list[str]:
        """The next `count` nodes round-robin whose kubelet runs (stopped ones are skipped)."""
        out: list[str] = []
        start = getattr(self, cursor)
        for i in range(min(count, len(names))):
            name = names[(start + i) % len(names)]
            node = self.nodes.get("", name)
            if node is not None and not kubelet_stopped(node) and (condition(node, "Ready") or {}).get("status") == "True":
                out.append(name)
        setattr(self, cursor, (start + min(count, len(names))) % len(names))
        return out

    async def _kubelet_started(self, node: dict) -> None:
        name, now = node["metadata"]["name"], to_iso(self.ctx.clock.now())
        micro = self.ctx.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        await self.client.patch(LEASES, "kube-node-lease", name, {"spec": {"renewTime": micro}}, kind="merge")
        ready = condition(node, "Ready") or {}
        cond = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now}
        if ready.get("status") != "True":
            cond["lastTransitionTime"] = now
        await self.client.patch(NODES, None, name, {"status": {"conditions": [cond]}}, sub="status", kind="strategic")
        await record_event(self.client, node, "Starting", "Starting kubelet.", component="kubelet",
                           clock=self.ctx.clock, host=name)
        if ready.get("status") != "True":
            await record_event(self.client, node, "NodeReady", f"Node {name} status is now: NodeReady",
                               component="kubelet", clock=self.ctx.clock, host=name)
        log.info("kubelet on %s started again", name)

    # -- GPU health (nvidia-device-plugin) -------------------------------------------------------
    async def _gpu_health(self, node: dict) -> None:
        name = node["metadata"]["name"]
        capacity = int(parse_quantity(((node.get("status") or {}).get("capacity") or {}).get(GPU)))
        if not capacity:
            return
        broken = min(capacity, _broken(node))
        want = str(capacity - broken)
        have = ((node.get("status") or {}).get("allocatable") or {}).get(GPU)
        cond = condition(node, "GPUHealthy")
        now = to_iso(self.ctx.clock.now())
        ann = node["metadata"].get("annotations") or {}
        dcgm = dcgm_critical_xids(node)
        xid = _int(ann.get(GPU_XID_ANNOTATION), 79) if gpu_unhealthy(node) or not dcgm else next(iter(dcgm.values()))
        index = capacity - 1 if gpu_unhealthy(node) or not dcgm else next(iter(dcgm))
        if broken:
            seen = "nvidia-device-plugin" if gpu_unhealthy(node) else f"DCGM (GPU {index}: DCGM_FI_DEV_XID_ERRORS={xid})"
            message = (f"{broken}/{capacity} GPUs unhealthy: Xid {xid} ({XID_MESSAGES.get(xid, 'critical error')}) "
                       f"on GPU 0000:{0x18 + 0x11 * index:02x}:00.0; reported by {seen}, marked unhealthy")
            new_cond = {"type": "GPUHealthy", "status": "False", "reason": "XidCriticalError", "message": message,
                        "lastHeartbeatTime": ann.get(GPU_UNHEALTHY_AT) or now}
        else:
            message = f"all {capacity} GPUs healthy"
            new_cond = {"type": "GPUHealthy", "status": "True", "reason": "GPUsHealthy", "message": message,
                        "lastHeartbeatTime": now}
        if cond is None and not broken and have == want:
            return  # a node that was never unhealthy keeps its plain status
        if have != want or (cond or {}).get("status") != new_cond["status"]:
            if (cond or {}).get("status") != new_cond["status"]:
                new_cond["lastTransitionTime"] = now
            await self.client.patch(NODES, None, name, {"status": {"allocatable": {GPU: want},
                                                                   "conditions": [new_cond]}},
                                    sub="status", kind="strategic")
            await record_event(self.client, node, "GPUUnhealthy" if broken else "GPUHealthy", message,
                               type="Warning" if broken else "Normal", component="nvidia-device-plugin",
                               clock=self.ctx.clock, host=name)
            log.info("device plugin on %s: allocatable %s %s -> %s", name, GPU, have, want)
        await self._gpu_taint(node, bool(broken))

    async def _gpu_taint(self, node: dict, broken: bool) -> None:
        if self.gpu_taint is None:
            return
        taints = list((node.get("spec") or {}).get("taints") or [])
        has = any(t.get("key") == self.gpu_taint["key"] and t.get("effect") == self.gpu_taint["effect"] for t in taints)
        if has == broken:
            return
        if broken:
            taints.append({**self.gpu_taint, "timeAdded": to_iso(self.ctx.clock.now())})
        else:
            taints = [t for t in taints if not (t.get("key") == self.gpu_taint["key"]
                                                and t.get("effect") == self.gpu_taint["effect"])]
        await self.client.patch(NODES, None, node["metadata"]["name"], {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}},
            kind="merge")


def _broken(node: dict) -> int:
    """How many GPUs of the node are unhealthy: broken by the driver, or with a critical XID in DCGM's cache."""
    return max(gpu_unhealthy(node), len(dcgm_critical_xids(node)))


def _gpu_signature(node: dict) -> tuple:
    ann = (node.get("metadata") or {}).get("annotations") or {}
    return (gpu_unhealthy(node) if node else 0, ann.get(GPU_XID_ANNOTATION), ann.get(DCGM_FIELDS_ANNOTATION))


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
