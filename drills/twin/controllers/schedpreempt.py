"""Preemption, the scheduler's last resort for a pod that fits nowhere (scheduler.py): evict the fewest,
lowest-priority pods from one node so it fits there.

kube-scheduler's DefaultPreemption: a pending pod evicts lower-priority pods unless its priority class says
`preemptionPolicy: Never` (the `no-preemption` defect), treating PodDisruptionBudgets as best effort. A Volcano
pod takes lower-priority pods of its own queue, and pods of another queue only when that queue is reclaimable
(schedfit.may_preempt), and never a pod whose PodDisruptionBudget allows no more disruptions (Volcano's pdb
plugin). Victims get a `DisruptionTarget` condition and a `Preempted` event before they are deleted; the
preemptor is nominated to the node.
"""

from __future__ import annotations

import logging

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.client import key_of
from drills.twin.controllers.events import record_event
from drills.twin.controllers.schedfit import (
    NodeState, Snapshot, filter_node, fits_resources, may_preempt, pod_requests_cached, within_budgets,
)

__all__ = ["Preemption"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")


class Preemption:
    """Mixed into the Scheduler: uses its `ctx`, `pods`, `pdbs`, `queues`, `_on_node`, `_victims` and `_priority`."""

    def _plan_preemption(self, pod: dict, req: dict, prio: int, states: Snapshot):
        """(node, victims) freeing room by evicting the fewest, lowest-priority pods; None when no node helps."""
        best, best_cost, helpful, not_helpful = None, None, 0, 0
        for st in states.values():
            if filter_node(pod, st, resources=False):
                not_helpful += 1
                continue
            candidates = []
            for vkey in self._on_node.get(st.name, ()):
                victim = self.pods.get(*vkey)
                if victim is not None and not victim["metadata"].get("deletionTimestamp"):
                    vprio = self._priority(victim)[0]
                    if may_preempt(pod, prio, victim, vprio, self._reclaimable):
                        candidates.append((vprio, victim))
            candidates.sort(key=lambda c: (c[0], c[1]["metadata"].get("name", "")))
            trial = NodeState(st.name, st.node, st.allocatable, dict(st.used))
            victims: list[dict] = []
            budgets = self._budgets(pod)
            for vprio, victim in candidates:
                if not fits_resources(req, trial):
                    break
                if not within_budgets(victim, budgets):  # Volcano's pdb plugin: never below a budget
                    continue
                trial.add(pod_requests_cached(victim), -1.0)
                victims.append(victim)
            if not victims or fits_resources(req, trial):
                helpful += 1
                continue
            cost = (max(self._priority(v)[0] for v in victims), len(victims), st.name)
            if best_cost is None or cost < best_cost:
                best, best_cost = (st.name, victims), cost
        return best, helpful, not_helpful

    async def _preempt(self, pod: dict, node: str, victims: list[dict]) -> None:
        client, now = self.ctx.client, to_iso(self.ctx.clock.now())
        component = _component(pod)
        ns, name = key_of(pod)
        for victim in victims:
            vns, vname = key_of(victim)
            log.info("scheduler: preempting %s/%s on %s for %s/%s", vns, vname, node, ns, name)
            self._victims[(vns, vname)] = victim["metadata"].get("uid", "")
            await client.patch(PODS, vns, vname, {"metadata": {"uid": victim["metadata"].get("uid")},
                                                  "status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{component}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": now}]}}, sub="status", kind="strategic")
            await record_event(client, victim, "Preempted",
                               f"Preempted by pod {pod['metadata'].get('uid', '')} on node {node}",
                               component=component, clock=self.ctx.clock)
            await client.delete(PODS, vns, vname, uid=victim["metadata"].get("uid"))
        await client.patch(PODS, ns, name, {"status": {"nominatedNodeName": node}}, sub="status", kind="merge")

    def _budgets(self, preemptor: dict) -> list[list] | None:
        """[namespace, selector, disruptions still allowed] per PodDisruptionBudget, for a Volcano preemptor (its pdb
        plugin filters preempt and reclaim victims); None for kube-scheduler, whose preemption treats budgets as best
        effort."""
        if (preemptor.get("spec") or {}).get("schedulerName") != "volcano":
            return None
        budgets = [[p["metadata"].get("namespace"), (p.get("spec") or {}).get("selector"),
                    int((p.get("status") or {}).get("disruptionsAllowed") or 0)] for p in self.pdbs.items()]
        for key, uid in list(self._victims.items()):  # its own evictions count before the budget's status shows them
            victim = self.pods.get(*key)
            if victim is None or victim["metadata"].get("uid") != uid:
                del self._victims[key]
            else:
                within_budgets(victim, budgets)
        return budgets

    def _reclaimable(self, queue: str) -> bool:
        """Volcano's `reclaimable` of a queue (default true; a queue not found: its default, as Volcano's)."""
        spec = (self.queues.get("", queue) or {}).get("spec") or {}
        return spec.get("reclaimable", True) is not False


def _component(pod: dict) -> str:
    return "volcano" if (pod.get("spec") or {}).get("schedulerName") == "volcano" else "default-scheduler"
