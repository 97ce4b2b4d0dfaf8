"""A site's GPU remediation: a node whose GPU is marked unhealthy is cordoned, then drained (twin profile
`gpu_remediation`; off by default — the drill then drains, as on a site that says it has none).

What NVIDIA's NVSentinel does with a fatal GPU health event (its fault-quarantine module cordons and taints the
node, its node-drainer evicts the workloads), reduced to what a drill observes: `after` twin seconds from the
`GPUHealthy=False` condition, a merge patch of `spec.unschedulable`, a Warning event, then an Eviction (through
the API, PodDisruptionBudgets honoured) of every pod on the node that no DaemonSet owns. It acts only through the
API, like any controller, and never uncordons: bringing the node back is the operator's (or the drill's revert).
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import condition, is_terminal

__all__ = ["GpuRemediation"]

log = logging.getLogger(__name__)

NODES = by_kind("v1", "Node")
PODS = by_kind("v1", "Pod")


def _unhealthy(node: dict) -> bool:
    return (condition(node, "GPUHealthy") or {}).get("status") == "False"


class GpuRemediation(Controller):
    name = "gpu-remediation"

    def setup(self) -> None:
        spec = getattr(self.ctx.profile, "gpu_remediation", None)
        self.after_s = None if spec is None else float(spec.after)
        self._handled: set[str] = set()  # nodes remediated for their current mark (cleared when the GPU heals)
        if self.after_s is not None:
            self.nodes = self.ctx.informers.informer(NODES)
            self.pods = self.ctx.informers.informer(PODS)
            self.nodes.add_handler(self._on_node)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED" or not _unhealthy(node):
            self._handled.discard(name)
        elif name not in self._handled:
            self._handled.add(name)
            self.enqueue_after(("remediate", name), self.after_s)

    async def reconcile(self, key: Hashable) -> None:
        name = key[1]
        node = self.nodes.get("", name)
        if node is None or not _unhealthy(node):
            return
        if not (node.get("spec") or {}).get("unschedulable"):
            await self.ctx.client.patch(NODES, None, name, {"spec": {"unschedulable": True}}, kind="merge")
            await record_event(self.ctx.client, node, "NodeQuarantined", f"gpu-remediation: {name} has an unhealthy "
                               "GPU; cordoned and drained", type="Warning", component="gpu-remediation",
                               clock=self.ctx.clock, host=name)
        for pod in [p for p in self.pods.items() if (p.get("spec") or {}).get("nodeName") == name]:
            owners = pod["metadata"].get("ownerReferences") or []
            if is_terminal(pod) or any(o.get("kind") == "DaemonSet" for o in owners):
                continue
            ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod_name, "namespace": ns}}
            try:
                await self.ctx.client.post(self.ctx.client.path(PODS, ns, pod_name, "eviction"), body)
            except ApiError as err:
                if err.status == 429:  # a budget blocks it: try again later, as a drainer does
                    self.enqueue_after(key, 5.0)
                elif err.status != 404:
                    raise
        log.info("gpu-remediation: cordoned and drained %s", name)
