"""A node-health agent that quarantines a node it once saw lost (defects `recordon-agent`, `quarantine-label-agent`,
`device-plugin-lost`).

Sites run such agents (node-problem-detector with a remediator, a GPU health daemon, a home-grown
quarantine script): a node that lost its GPUs, went NotReady, was cordoned or got a NoExecute taint is
cordoned again a little after it comes back, until a person clears it. For a drill that is a revert that
does not hold: the drill uncordons (or untaints, or heals) the node, its API answers OK, and
`recordon_after` twin seconds later the node is out of service again. The twin's agent acts only through
the API (a merge patch of `spec.unschedulable` and an Event), each time a node it saw healthy first comes
back from a loss (a node that starts NotReady is not "back"; its own cordon is a loss, so an uncordon by
`drills revert` is undone again too). It may instead label the node out of its pool (a selector its workloads
no longer match) or leave its GPUs unregistered (the device plugin died in the drain): the node is schedulable
and untainted, and useless. Off unless the profile sets `health_agent`.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import condition

__all__ = ["NodeHealthAgent", "lost"]

log = logging.getLogger(__name__)

NODES = by_kind("v1", "Node")
GPU = "nvidia.com/gpu"


def lost(node: dict) -> bool:
    """Out of service as a health agent sees it: cordoned, a NoExecute taint, GPUs unhealthy, or not Ready."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return True
    if any(t.get("effect") == "NoExecute" for t in spec.get("taints") or []):
        return True
    if (condition(node, "GPUHealthy") or {}).get("status") == "False":
        return True
    return (condition(node, "Ready") or {}).get("status") != "True"


class NodeHealthAgent(Controller):
    name = "node-health-agent"

    def setup(self) -> None:
        agent = getattr(self.ctx.profile, "health_agent", None)
        self.after_s = None if agent is None or agent.recordon_after is None else float(agent.recordon_after)
        self.label = None if agent is None or not agent.quarantine_label else agent.quarantine_label.split("=", 1)
        self.unregister = agent is not None and agent.gpus_unregistered
        self.act_s = 0.0 if agent is None else float(agent.act_after)
        self._healthy: set[str] = set()  # seen in service
        self._lost: set[str] = set()  # seen lost after being seen in service
        if self.after_s is not None or self.label or self.unregister:
            self.nodes = self.ctx.informers.informer(NODES)
            self.nodes.add_handler(self._on_node)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            return
        if lost(node):
            if name in self._healthy:
                self._lost.add(name)
        elif name in self._lost:
            self._lost.discard(name)
            if self.after_s is not None:
                self.enqueue_after(("recordon", name), self.after_s)
            if self.label or self.unregister:
                self.enqueue_after(("quarantine", name), self.act_s)
        else:
            self._healthy.add(name)

    async def reconcile(self, key: Hashable) -> None:
        node = self.nodes.get("", key[1])
        if node is None or lost(node):
            return
        if key[0] == "quarantine":
            await self._quarantine(node)
            return
        await self.ctx.client.patch(NODES, None, key[1], {"spec": {"unschedulable": True}}, kind="merge")
        await record_event(self.ctx.client, node, "NodeQuarantined", f"node-health-agent: {key[1]} was lost "
                           "earlier; cordoned until an operator clears it", type="Warning",
                           component="node-health-agent", clock=self.ctx.clock, host=key[1])
        log.info("node-health-agent: cordoned %s again (%g s after it came back)", key[1], self.after_s)

    async def _quarantine(self, node: dict) -> None:
        """Out of its pool without a cordon: a label its workloads' selectors no longer match, and/or GPUs its
        device plugin never registered again (allocatable 0) — each an Event, as a site's agent leaves one."""
        name = node["metadata"]["name"]
        if self.label:
            key, value = self.label
            await self.ctx.client.patch(NODES, None, name, {"metadata": {"labels": {key: value}}}, kind="merge")
            await record_event(self.ctx.client, node, "NodeQuarantined", f"node-health-agent: {name} was lost "
                               f"earlier; labelled {key}={value} until an operator clears it", type="Warning",
                               component="node-health-agent", clock=self.ctx.clock, host=name)
        if self.unregister:
            await self.ctx.client.patch(NODES, None, name, {"status": {"allocatable": {GPU: "0"}}}, sub="status",
                                        kind="strategic")
            await record_event(self.ctx.client, node, "GPUsNotRegistered", f"nvidia-device-plugin on {name} did not "
                               "register again after the drain: 0 nvidia.com/gpu allocatable", type="Warning",
                               component="nvidia-device-plugin", clock=self.ctx.clock, host=name)
        log.info("node-health-agent: quarantined %s (label %s, GPUs unregistered %s)", name, self.label, self.unregister)
