# WARNING: kills pods of a serving workload: deletes them with grace 0, evicts them through the Eviction API,
# or (twin) makes their container exit. Clients of the endpoint see errors until replacements are Ready.
"""Pod kills as an inject/revert pair (chaostoolkit-kubernetes `terminate_pods`, krkn pod scenarios).

`select_pods` picks the running, non-terminating pods matching a label selector (by count or percent,
oldest name first so a run is repeatable); `inject` kills them and returns a frozen `PodKillRecord`
(names, UIDs, nodes, the cluster time of the first kill). There is nothing to undo: the ReplicaSet
replaces a deleted or evicted pod, the kubelet restarts an exited container; `revert` only logs and
the journal entry still closes, so a run's journal says the fault is over.

Modes:
- `delete`: `DELETE pod` with `gracePeriodSeconds: 0` (force kill, like `kubectl delete --grace-period=0 --force`).
- `evict`: the Eviction API (policy/v1), which honours PodDisruptionBudgets: a 429 is a refusal,
  reported as one InjectionFailed line naming the pod and the budget (what was already evicted is listed).
  With `budget_wait_s` (a drill of a voluntary disruption: a drain, a node-pool upgrade) a refused
  eviction is retried, like `kubectl drain` does, whenever a budget changes, until that many cluster
  seconds passed: the budget paces the evictions instead of refusing them.
- `kill-container` (twin only): `POST /twin/v1/namespaces/{ns}/pods/{name}/exit` `{"code": 137}`; the
  kubelet restarts the container (same pod and UID, restartCount + 1) and it loads its model again.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field

from drills.core.errors import InjectionFailed
from drills.core.kube import Cluster, EventMerger, obj_get
from drills.core.watch import retry_at
from drills.faults import NOTHING_TO_UNDO, Plan, Reach
from drills.faults.readback import Reading, nothing_to_undo

__all__ = ["MODES", "KIND", "PodKillSpec", "PodKillRecord", "select_pods", "kill_count", "plan", "inject", "revert",
           "revert_spec", "drained", "verify"]

log = logging.getLogger(__name__)

MODES = ("delete", "evict", "kill-container")
KIND = "pods"
EXIT_CODE = 137  # SIGKILL, what an OOM kill or `kill -9` of the server looks like


@dataclass(frozen=True)
class PodKillSpec:
    """Which pods (namespace + label selector, then `count` or `percent` of them) and how to kill them."""

    namespace: str
    selector: str
    mode: str = "delete"
    count: int | None = None
    percent: float | None = None  # of the matching running pods, rounded up
    budget_wait_s: float = 0.0  # evict: how long a refusal by a PodDisruptionBudget is retried (0: refuse at once)


@dataclass(frozen=True)
class PodKillRecord:
    """Exactly what `inject` did; JSON-serialisable (`to_dict`) for the journal and the report."""

    namespace: str
    selector: str
    mode: str
    injected_at: str  # cluster time, ISO with milliseconds: the middle of the first kill request
    pods: tuple[str, ...]
    uids: tuple[str, ...]
    nodes: tuple[str, ...]
    running_before: int
    restart_counts: tuple[int, ...] = field(default=())  # kill-container: restartCount before the kill
    # the middle of the last kill request: a kill of every replica is complete only then (its kills are one after
    # another; a replica not yet killed still serves in between — at 600x under load, for several cluster seconds)
    completed_at: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "pods": list(self.pods), "uids": list(self.uids), "nodes": list(self.nodes),
                "restart_counts": list(self.restart_counts)}


def drained(node_record, namespace: str, selector: str, pods: dict[str, str]) -> PodKillRecord:
    """The workload's pods a node drain evicted, as a kill record (mode `evict`), so the serving drill judges
    a drain like any kill. `node_record` is the node fault's (drills.faults.node), stamped at the cordon;
    `pods` the workload's Ready pods before the drain (name → uid)."""
    mine = [name for ns, name in (p.split("/", 1) for p in node_record.evicted) if ns == namespace and name in pods]
    return PodKillRecord(namespace=namespace, selector=selector, mode="evict", injected_at=node_record.injected_at,
                         pods=tuple(mine), uids=tuple(pods[n] for n in mine), nodes=(node_record.node,) * len(mine),
                         running_before=len(pods))


def kill_count(running: int, count: int | None, percent: float | None) -> int:
    """How many of `running` pods to kill: `count` (capped at running) or `percent` rounded up."""
    if percent is not None:
        return min(running, math.ceil(running * percent / 100.0 - 1e-9))
    return min(running, count if count is not None else 1)


def select_pods(cluster: Cluster, spec: PodKillSpec, pick=None) -> tuple[list[dict], int]:
    """(the pods to kill, how many were running); raises InjectionFailed before any change. `pick(slots, n)`
    chooses which n (drills.core.picks: at random with `--random`); without it, the first n by name. A slot is
    where a replica runs, "<node>/<i>" (its i-th pod there by name): a pod's own name is random and dies with
    it, so a replayed run can only hit the same place again, never the same pod."""
    if spec.mode not in MODES:
        raise InjectionFailed(f"unknown pod kill mode {spec.mode!r} (modes: {', '.join(MODES)}); nothing injected")
    if spec.mode == "kill-container" and not cluster.is_twin:
        raise InjectionFailed("pod kill mode kill-container has no Kubernetes API on a real cluster; use delete or "
                              "evict; nothing injected")
    try:
        resp = cluster.core.list_namespaced_pod(spec.namespace, label_selector=spec.selector, _preload_content=False)
    except Exception as err:  # noqa: BLE001 — one line for the user, nothing was changed
        raise InjectionFailed(f"cannot list pods {spec.selector} in {spec.namespace}: {_reason(err)}; "
                              "nothing injected") from None
    pods = [p for p in json.loads(resp.data).get("items", [])
            if obj_get(p, "status", "phase") == "Running" and not obj_get(p, "metadata", "deletionTimestamp")]
    pods.sort(key=lambda p: p["metadata"]["name"])
    if not pods:
        raise InjectionFailed(f"no running pod matches {spec.selector} in namespace {spec.namespace}; check "
                              "workloads.inference.label_selector; nothing injected")
    n = kill_count(len(pods), spec.count, spec.percent)
    if pick is None:
        return pods[:n], len(pods)
    slots = _slots(pods)
    chosen = set(pick(list(slots.values()), n))
    return [p for p in pods if slots[p["metadata"]["name"]] in chosen], len(pods)


def revert_spec(cluster: Cluster, spec: PodKillSpec, pods: list[dict]) -> dict:
    """What the journal keeps: nothing needs undoing, but the entry says what was killed and where."""
    return {"namespace": spec.namespace, "selector": spec.selector, "mode": spec.mode,
            "pods": [p["metadata"]["name"] for p in pods], "undo": "nothing"}


def plan(target, profile, *, count: int | None = None, percent: float | None = None, mode: str | None = None,
         paced: bool = False, pick=None) -> Plan:
    """Read-only: which running pods of the profile's inference workload to kill, and how. `paced`: evict,
    waiting for the disruption budget up to `faults.eviction_timeout_s` (a drain's pace). `pick`: see select_pods."""
    cluster, workload = target.cluster, profile.workloads.inference
    spec = PodKillSpec(namespace=workload.namespace, selector=workload.label_selector,
                       mode="evict" if paced else (mode or profile.faults.pod_kill_mode), count=count, percent=percent,
                       budget_wait_s=profile.faults.eviction_timeout_s if paced else 0.0)
    pods, running = select_pods(cluster, spec, pick)
    names = ", ".join(p["metadata"]["name"] for p in pods)
    return Plan(KIND, f"{spec.namespace}/{spec.selector}",
                f"{spec.mode} {len(pods)} of {running} pods ({names}) on {cluster.name}",
                revert_spec(cluster, spec, pods), Reach(namespaces=(spec.namespace,), pods=len(pods)),
                spec=(spec, pods, running),
                about=tuple({"namespace": spec.namespace, "deployment": d} for d in owning_deployments(pods)))


def owning_deployments(pods: list[dict]) -> list[str]:
    """The Deployments the pods belong to, read from their own metadata: a ReplicaSet owner named
    `<deployment>-<pod-template-hash>` (how the Deployment controller names its ReplicaSets)."""
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        hash_ = (meta.get("labels") or {}).get("pod-template-hash")
        for owner in meta.get("ownerReferences") or []:
            name = owner.get("name") or ""
            if owner.get("kind") == "ReplicaSet" and hash_ and name.endswith("-" + hash_):
                found.append(name[: -len(hash_) - 1])
    return list(dict.fromkeys(found))


def inject(target, plan: Plan) -> PodKillRecord:
    """Kill the planned pods; the record is stamped at the middle of the first kill request that was accepted
    (not of the budget's refusals before it, nor of a pod already gone)."""
    from kubernetes.client.exceptions import ApiException

    cluster = target.cluster
    spec, pods, running = plan.spec

    stamp: float | None = None
    last: float | None = None
    done: list[dict] = []
    with _Budget(cluster, spec) as budget:
        for pod in pods:
            name = pod["metadata"]["name"]
            window: tuple[float, float] | None = None
            try:
                if spec.budget_wait_s:
                    window = budget.evict_paced(name)
                else:
                    window = cluster.around(lambda: _kill(cluster, spec, name))
            except ApiException as err:
                if err.status == 404:
                    log.info("pod %s/%s was already gone", spec.namespace, name)
                elif err.status == 429:
                    raise InjectionFailed(_refused(spec, name, done, err)) from None
                else:
                    raise InjectionFailed(f"could not {spec.mode} pod {spec.namespace}/{name}: {_reason(err)}"
                                          f"{_already(done)}") from None
            except InjectionFailed:
                raise
            except Exception as err:  # noqa: BLE001
                raise InjectionFailed(f"could not {spec.mode} pod {spec.namespace}/{name}: {_reason(err)}"
                                      f"{_already(done)}") from None
            if window is not None:  # a pod already gone was not killed by us
                stamp = sum(window) / 2 if stamp is None else stamp
                last = sum(window) / 2
            done.append(pod)
    restarts = tuple(int(obj_get(p, "status", "containerStatuses", default=[{}])[0].get("restartCount", 0))
                     for p in done) if spec.mode == "kill-container" else ()
    record = PodKillRecord(
        namespace=spec.namespace, selector=spec.selector, mode=spec.mode,
        injected_at=cluster.clock.iso(stamp if stamp is not None else cluster.clock.timestamp()),
        completed_at=cluster.clock.iso(last) if last is not None else "",
        pods=tuple(p["metadata"]["name"] for p in done), uids=tuple(p["metadata"]["uid"] for p in done),
        nodes=tuple(obj_get(p, "spec", "nodeName", default="") for p in done), running_before=running,
        restart_counts=restarts)
    log.info("killed %d of %d pods (%s) by %s", len(done), running, ", ".join(record.pods), spec.mode)
    return record


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Nothing to undo: the controllers replace killed pods. Idempotent by construction."""
    log.info("pods %s were killed by %s: nothing to undo (the controllers replace them)",
             ", ".join((record or undo).get("pods") or []), undo.get("mode"))
    return NOTHING_TO_UNDO


class _Budget:
    """Evictions paced by the PodDisruptionBudgets: a refused eviction is retried whenever a budget of the
    namespace changes (a watch, opened at the first refusal) or `retry_at` says, until `budget_wait_s`
    cluster seconds."""

    def __init__(self, cluster: Cluster, spec: PodKillSpec) -> None:
        self.cluster, self.spec = cluster, spec
        self.deadline = cluster.clock.timestamp() + spec.budget_wait_s
        self.changes: EventMerger | None = None

    def evict_paced(self, name: str) -> tuple[float, float]:
        """Evict `name`, waiting for the budget; the cluster-clock times around the eviction that was accepted
        (the refused ones before it changed nothing)."""
        from kubernetes.client.exceptions import ApiException

        while True:
            try:
                return self.cluster.around(lambda: _kill(self.cluster, self.spec, name))
            except ApiException as err:
                if err.status != 429 or self.cluster.clock.timestamp() >= self.deadline:
                    raise
            if self.changes is None:  # watch first, then retry: a change between the two is not missed
                self.changes = EventMerger(self.cluster.clock)
                self.changes.watch("pdb", self.cluster.policy.list_namespaced_pod_disruption_budget, self.spec.namespace)
                continue
            for event in self.changes.events(retry_at(self.cluster.clock, self.deadline)):
                if event is not None:
                    break

    def __enter__(self) -> "_Budget":
        return self

    def __exit__(self, *exc) -> None:
        if self.changes is not None:
            self.changes.close()


def _kill(cluster: Cluster, spec: PodKillSpec, name: str) -> None:
    ns = spec.namespace
    if spec.mode == "delete":
        cluster.core.delete_namespaced_pod(name, ns, grace_period_seconds=0, _preload_content=False)
    elif spec.mode == "evict":
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns},
                "deleteOptions": {"gracePeriodSeconds": 0}}
        cluster.core.create_namespaced_pod_eviction(name, ns, body, _preload_content=False)
    else:
        import requests

        resp = requests.post(f"{cluster.twin_url}/twin/v1/namespaces/{ns}/pods/{name}/exit", timeout=10,
                             json={"code": EXIT_CODE, "reason": "Error", "message": "killed by gpu-drills"},
                             headers={"User-Agent": cluster.api.user_agent})
        if resp.status_code >= 300:
            raise InjectionFailed(f"the twin refused to kill the container of {ns}/{name}: {resp.status_code} "
                                  f"{resp.text[:200]}")


def _refused(spec: PodKillSpec, name: str, done: list[dict], err) -> str:
    message = ""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        pass
    if spec.budget_wait_s:
        return (f"eviction of pod {spec.namespace}/{name} still refused (429) after waiting "
                f"{spec.budget_wait_s:.0f}s for its PodDisruptionBudget: {message or 'no disruption allowed'}"
                f"{_already(done)}; the evicted replicas' replacements never made the budget healthy again "
                "(see their FailedScheduling events)")
    return (f"eviction of pod {spec.namespace}/{name} refused (429): "
            f"{message or 'a PodDisruptionBudget allows no more disruptions'}{_already(done)}; "
            "the budget protects the endpoint — kill fewer pods, or use pod_kill_mode delete to drill past it")


def _already(done: list[dict]) -> str:
    return f" (already killed: {', '.join(p['metadata']['name'] for p in done)})" if done else ""


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    if status is not None:
        return f"{status} {getattr(err, 'reason', '')}".strip()
    return str(err) or type(err).__name__


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """A pod kill puts nothing of the drill's in place (its controller replaces the pods; whether they came back
    is the drill's own judged check, not the revert's): the read-back says so."""
    return nothing_to_undo(KIND, f"{undo.get('namespace')}/{undo.get('selector')}",
                           "a pod kill leaves nothing to undo: the ReplicaSet or the kubelet replaces what was killed")


def _slots(pods: list[dict]) -> dict[str, str]:
    """Each pod's slot, "<node>/<i>": the i-th of the pods on its node, in name order (pods come sorted by name)."""
    seen: dict[str, int] = {}
    out = {}
    for pod in pods:
        node = obj_get(pod, "spec", "nodeName", default="") or "unscheduled"
        out[pod["metadata"]["name"]] = f"{node}/{seen.get(node, 0)}"
        seen[node] = seen.get(node, 0) + 1
    return out
