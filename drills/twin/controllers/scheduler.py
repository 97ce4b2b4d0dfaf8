"""The twin's scheduler, for both `default-scheduler` and `volcano` pods: filters (unschedulable,
taints/tolerations, nodeSelector/affinity, GPU/CPU/memory/pods vs allocatable minus bound pods),
a score (GPU pods bin-pack, others spread), binding through `pods/binding`, gang scheduling for
pods of a Volcano PodGroup (`scheduling.k8s.io/group-name`: bound only when `minMember` fit at
once), and preemption (schedpreempt.py: a pending pod evicts lower-priority pods unless its priority class says
`preemptionPolicy: Never` — the `no-preemption` defect; a Volcano pod takes lower-priority pods of its own
queue, and pods of another queue only when that queue is reclaimable: schedfit.may_preempt; never a pod whose
PodDisruptionBudget allows no more disruptions, as Volcano's pdb plugin).

Failures write what kube-scheduler writes: a `PodScheduled=False/Unschedulable` condition and a
`FailedScheduling` Warning event ("0/6 nodes are available: 2 Insufficient nvidia.com/gpu, …").
One scheduling cycle places every pending pod in priority order against one snapshot; cycles run
on pod/node/PodGroup changes that matter (not heartbeats) and every RETRY_S twin seconds while
pods are pending.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from typing import Hashable

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import EXPECTED_ERRORS, Controller
from drills.twin.controllers.client import ApiError, key_of
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import GROUP_ANNOTATION, condition, is_terminal
from drills.twin.controllers.schedfit import (
    AllocatableCache, NodeState, Snapshot, failure_message, place, pod_requests_cached, preemption_message,
)
from drills.twin.controllers.schedpreempt import Preemption
from drills.twin.controllers.schedqueue import WaitQueue

__all__ = ["Scheduler", "SCHEDULER_NAMES", "RETRY_S"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")
PRIORITY_CLASSES = by_kind("scheduling.k8s.io/v1", "PriorityClass")
POD_GROUPS = by_kind("scheduling.volcano.sh/v1beta1", "PodGroup")
QUEUES = by_kind("scheduling.volcano.sh/v1beta1", "Queue")
PDBS = by_kind("policy/v1", "PodDisruptionBudget")
SCHEDULER_NAMES = ("default-scheduler", "volcano")
RETRY_S = 60.0  # twin seconds between retries of unschedulable pods (and between repeated events)
_CYCLE = "cycle"
HOSTNAME_KEY = "kubernetes.io/hostname"
_BIND_CONCURRENCY = 64


class Scheduler(Preemption, Controller):
    name = "scheduler"

    def setup(self) -> None:
        inf = self.ctx.informers
        self.pods, self.nodes = inf.informer(PODS), inf.informer(NODES)
        self.classes, self.groups = inf.informer(PRIORITY_CLASSES), inf.informer(POD_GROUPS)
        self.queues, self.pdbs = inf.informer(QUEUES), inf.informer(PDBS)
        self._waiting = WaitQueue()  # pods waiting for a node, in scheduling order
        self._in_flight: dict[tuple, asyncio.Task] = {}  # binds under way (kube-scheduler binds asynchronously)
        self._bind_slots = asyncio.Semaphore(_BIND_CONCURRENCY)
        self._bound: dict[tuple, tuple[str, dict, str]] = {}  # pod key -> (node, requests, owner uid)
        self._siblings: Counter = Counter()  # (owner uid, node) -> bound pods of that owner there
        self._used: dict[str, dict[str, float]] = defaultdict(dict)
        self._on_node: dict[str, set] = defaultdict(set)
        self._node_sig: dict[str, tuple] = {}
        self._allocatable = AllocatableCache()
        self._last_event: dict[tuple, tuple[str, float]] = {}
        self._victims: dict[tuple, str] = {}  # pods this scheduler preempted (key → uid), until they are gone
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node_event)
        self.groups.add_handler(lambda *_: self._kick())
        self.classes.add_handler(lambda *_: self._waiting.reorder(self._order))  # priorities may have changed

    async def reconcile(self, key: Hashable) -> None:
        if not self._waiting:
            return
        states = Snapshot(lambda name: self.nodes.get("", name), lambda: [k[1] for k in self.nodes.cache],
                          self._used, self._allocatable)
        for unit in self._units():
            if unit[0] is None:
                await self._schedule_one(unit[1][0], states)
            else:
                await self._schedule_gang(unit[0], unit[1], states)
        if self._waiting:
            self.enqueue_after(_CYCLE, RETRY_S)

    # -- informer handlers ----------------------------------------------------------------------
    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        key = key_of(pod)
        spec = pod.get("spec") or {}
        if etype == "DELETED" or is_terminal(pod):
            self._waiting.pop(key, None)
            self._last_event.pop(key, None)
            if self._unaccount(key) and self._waiting:
                self._kick()
            return
        if spec.get("nodeName"):
            self._waiting.pop(key, None)
            self._account(key, spec["nodeName"], pod_requests_cached(pod), _owner(pod))
        elif (spec.get("schedulerName") or "default-scheduler") in SCHEDULER_NAMES \
                and not pod["metadata"].get("deletionTimestamp"):
            if self._waiting.put(key, pod, self._order):
                self._kick()

    def _on_node_event(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._node_sig.pop(name, None)
            self._allocatable.forget(name)
            self._kick()
            return
        spec, status = node.get("spec") or {}, node.get("status") or {}
        ready = condition(node, "Ready") or {}
        sig = (bool(spec.get("unschedulable")), repr(spec.get("taints")), repr(status.get("allocatable")),
               repr(node["metadata"].get("labels")), ready.get("status"))
        if self._node_sig.get(name) != sig:
            self._node_sig[name] = sig
            if self._waiting:
                self._kick()

    def _kick(self) -> None:
        timings = getattr(self.ctx.profile, "timings", None)
        self.enqueue_after(_CYCLE, getattr(timings, "scheduling_delay", 0.5))

    def _account(self, key: tuple, node: str, req: dict[str, float], owner: str) -> None:
        if key in self._bound:
            if self._bound[key][0] == node:
                return
            self._unaccount(key)
        self._bound[key] = (node, req, owner)
        self._on_node[node].add(key)
        if owner:
            self._siblings[(owner, node)] += 1
        used = self._used[node]
        for res, qty in req.items():
            used[res] = used.get(res, 0.0) + qty

    def _unaccount(self, key: tuple) -> bool:
        entry = self._bound.pop(key, None)
        if entry is None:
            return False
        node, req, owner = entry
        self._on_node[node].discard(key)
        if owner:
            self._siblings[(owner, node)] -= 1
        used = self._used[node]
        for res, qty in req.items():
            used[res] = used.get(res, 0.0) - qty
        return True

    # -- one pod --------------------------------------------------------------------------------
    async def stop(self) -> None:
        for task in list(self._in_flight.values()):
            task.cancel()
        await super().stop()

    async def _schedule_one(self, pod: dict, states: Snapshot) -> None:
        req = pod_requests_cached(pod)
        best, reasons = place(pod, req, states, self._spread(pod), self._anti_affinity(pod))
        if best is not None:
            best.add(req)  # this cycle counts it there at once; the binding goes on in the background
            key = key_of(pod)
            # kube-scheduler's AssumePod: the next cycles count it on its node too (resources, the soft spread of
            # its owner's replicas, anti-affinity) before the informer shows the binding; two replicas placed in
            # one cycle, or in the next one while the first bind is in flight, went to one node
            self._account(key, best.name, req, _owner(pod))
            self._in_flight[key] = asyncio.create_task(self._bind_in_background(key, pod, best.name))
            self._waiting.hold(key)
            return
        message = failure_message(len(states), reasons)
        prio, policy = self._priority(pod)
        if policy == "Never":
            message += " " + preemption_message(len(states), 0, 0, never=True)
        else:
            plan, helpful, not_helpful = self._plan_preemption(pod, req, prio, states)
            if plan is not None:
                await self._preempt(pod, *plan)
                return
            message += " " + preemption_message(len(states), helpful, not_helpful)
        await self._unschedulable(pod, message)

    # -- gangs ----------------------------------------------------------------------------------
    async def _schedule_gang(self, group: tuple[str, str], pods: list[dict], states: Snapshot) -> None:
        pg = self.groups.get(*group)
        if pg is None:
            return  # Volcano binds nothing before the PodGroup exists; its creation kicks a cycle
        min_member = int((pg.get("spec") or {}).get("minMember") or 1)
        running = sum(1 for key, _ in self._bound.items()
                      if key[0] == group[0] and _group_of(self.pods.get(*key)) == group[1])
        need = max(0, min_member - running)
        pending = sorted(pods, key=lambda p: p["metadata"]["name"])
        head = f"pod group is not ready, {len(pending)} Pending, {min_member} minAvailable"
        trial: dict[str, NodeState] = {}
        placed: list[tuple[dict, str]] = []
        first_reasons: Counter | None = None
        for pod in pending:
            req = pod_requests_cached(pod)
            best, reasons = place(pod, req, {**states, **trial}, self._spread(pod))
            if best is None:
                first_reasons = first_reasons or reasons
                continue
            copy = trial.get(best.name) or NodeState(best.name, best.node, best.allocatable, dict(best.used))
            copy.add(req)
            trial[best.name] = copy
            placed.append((pod, best.name))
        if len(pending) < need and first_reasons is None:
            for pod in pending:  # every member so far fits: the rest of the gang is still being created
                await self._unschedulable(pod, f"{head}; Pending: {len(pending)} Schedulable, "
                                               f"waiting for {need - len(pending)} more task(s)")
            return
        if placed and len(placed) >= need:
            for pod, node in placed:
                if await self._bind(pod, node):
                    states[node].add(pod_requests_cached(pod))
            return
        if not placed and need == 1 and len(pending) == 1:  # a one-pod job: Volcano's preempt/reclaim act for it
            prio, policy = self._priority(pending[0])
            plan = None if policy == "Never" else \
                self._plan_preemption(pending[0], pod_requests_cached(pending[0]), prio, states)[0]
            if plan is not None:
                await self._preempt(pending[0], *plan)
                return
        unsched = len(pending) - len(placed)
        origin = failure_message(len(states), first_reasons or Counter())
        message = (f"{unsched}/{len(pending)} tasks in gang unschedulable: {head}; Pending: {unsched} "
                   f"Unschedulable, {len(placed)} Schedulable. Origin reason is {origin}")
        for pod in pending:
            await self._unschedulable(pod, message)

    # -- writes ---------------------------------------------------------------------------------
    async def _bind_in_background(self, key: tuple, pod: dict, node: str) -> None:
        hold = self.ctx.hold(f"scheduler bind of {key}")  # the clock waits for binds in flight too
        try:
            async with self._bind_slots:
                if not await self._bind(pod, node):
                    self._forget_assumed(key, node)
        except asyncio.CancelledError:
            raise
        except EXPECTED_ERRORS as err:
            log.debug("scheduler: binding %s/%s to %s failed: %s; retrying", *key, node, err)
            self._forget_assumed(key, node)
            self._kick()
        except Exception as err:  # noqa: BLE001 — a bug: reported loudly, as in a reconcile
            self.ctx.health.report(f"controller {self.name}", key, err)
        finally:
            self.ctx.release(hold)
            self._in_flight.pop(key, None)
            self._waiting.release(key)

    async def _bind(self, pod: dict, node: str) -> bool:
        ns, name = key_of(pod)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            await self.ctx.client.post(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
        except ApiError as err:
            if err.status in (404, 409):
                self._waiting.pop((ns, name), None)
                return False
            raise
        self._waiting.pop((ns, name), None)
        self._last_event.pop((ns, name), None)
        self._account((ns, name), node, pod_requests_cached(pod), _owner(pod))
        await record_event(self.ctx.client, pod, "Scheduled", f"Successfully assigned {ns}/{name} to {node}",
                           component=_component(pod), clock=self.ctx.clock)
        return True

    def _forget_assumed(self, key: tuple, node: str) -> None:
        """A bind that did not happen: the pod no longer counts on the node it was assumed on (unless the
        informer already shows it bound there, or elsewhere: then that accounting stands)."""
        pod = self.pods.get(*key)
        if (self._bound.get(key) or (None,))[0] == node and not ((pod or {}).get("spec") or {}).get("nodeName"):
            self._unaccount(key)

    async def _unschedulable(self, pod: dict, message: str) -> None:
        key, now = key_of(pod), self.ctx.clock.timestamp()
        last = self._last_event.get(key)
        if last is not None and last[0] == message and now - last[1] < RETRY_S:
            return
        self._last_event[key] = (message, now)
        cond = condition(pod, "PodScheduled") or {}
        if cond.get("status") != "False" or cond.get("message") != message:
            since = cond.get("lastTransitionTime") if cond.get("status") == "False" else None
            await self.ctx.client.patch(PODS, key[0], key[1], {"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastProbeTime": None, "lastTransitionTime": since or to_iso(now)}]}}, sub="status", kind="strategic")
        await record_event(self.ctx.client, pod, "FailedScheduling", message, type="Warning",
                           component=_component(pod), clock=self.ctx.clock)

    # -- helpers --------------------------------------------------------------------------------
    def _units(self) -> list[tuple[tuple[str, str] | None, list[dict]]]:
        """Pending pods as scheduling units (one pod, or one gang), highest priority first, then oldest."""
        gangs: dict[tuple[str, str], list[dict]] = {}
        units: list[tuple[tuple[str, str] | None, list[dict]]] = []
        for key, pod in self._waiting.ordered():  # a gang goes where its first member is
            if key in self._in_flight:
                continue
            group = _group_of(pod) if (pod.get("spec") or {}).get("schedulerName") == "volcano" else None
            if not group:
                units.append((None, [pod]))
            elif (key[0], group) in gangs:
                gangs[(key[0], group)].append(pod)
            else:
                gangs[(key[0], group)] = members = [pod]
                units.append(((key[0], group), members))
        return units

    def _spread(self, pod: dict):
        """Penalty per replica of the same owner already on a node (default topology spread, soft)."""
        owner = _owner(pod)
        if not owner:
            return None
        return lambda node: self._siblings.get((owner, node), 0)

    def _anti_affinity(self, pod: dict):
        """Required pod anti-affinity per node (topologyKey kubernetes.io/hostname, matchLabels): whether a pod
        it repels is already bound to a node — the filter kube-scheduler's InterPodAffinity applies."""
        terms = [t for t in (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(
                 "requiredDuringSchedulingIgnoredDuringExecution") or []
                 if t.get("topologyKey") == HOSTNAME_KEY and (t.get("labelSelector") or {}).get("matchLabels")]
        if not terms:
            return None
        ns = pod["metadata"].get("namespace")

        def repels(node: str) -> bool:
            for key in self._on_node.get(node, ()):
                other = self.pods.get(*key) if key[0] == ns else None
                labels = ((other or {}).get("metadata") or {}).get("labels") or {}
                if any(all(labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items()) for t in terms):
                    return True
            return False

        return repels

    def _order(self, pod: dict) -> tuple:
        return (-self._priority(pod)[0], pod["metadata"].get("creationTimestamp", ""), pod["metadata"]["name"])

    def _priority(self, pod: dict) -> tuple[int, str]:
        """(priority value, preemption policy) from the pod, its PriorityClass, or the global default."""
        spec = pod.get("spec") or {}
        pc = self.classes.get("", spec["priorityClassName"]) if spec.get("priorityClassName") else None
        if pc is None and not spec.get("priorityClassName"):
            pc = next((c for c in self.classes.items() if c.get("globalDefault")), None)
        value = spec.get("priority")
        if not isinstance(value, int):
            value = int((pc or {}).get("value") or 0)
        policy = spec.get("preemptionPolicy") or (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority"
        return value, policy


def _owner(pod: dict) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid", "")
    return ""


def _group_of(pod: dict | None) -> str | None:
    if pod is None:
        return None
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)


def _component(pod: dict) -> str:
    return "volcano" if (pod.get("spec") or {}).get("schedulerName") == "volcano" else "default-scheduler"
