# WARNING: takes a GPU node out of service: cordons it and evicts its pods, taints it NoExecute, marks its
# GPUs unhealthy or stops its kubelet. Workloads on that node are disrupted. `revert` puts it back.
"""GPU-node faults as an inject/revert pair (chaostoolkit's cordon_node/uncordon_node, krkn's node scenarios).

The fault contract (drills/faults/__init__.py): `plan(target, profile, node=, mode=)` validates (the
node exists, the mode is known and possible on this target) and says what the journal must keep;
`inject(target, plan)` makes the change and returns a frozen `NodeFaultRecord` of exactly what it
changed; `revert(target, undo, record)` undoes exactly that and is idempotent: uncordon only if we
cordoned, remove only our taint, heal the GPUs / restart the kubelet we broke. `verify(target, undo, record)`
reads the node back (drills/faults/readback.py): schedulable again if it was before the fault, none of our
taint, its GPUs healthy and allocatable again (gpu-unhealthy), Ready again (kubelet-stop).

Modes:
- `cordon-drain`: cordon, then evict every non-DaemonSet pod through the Eviction API; a PDB's 429 is
  retried (on the next PDB/pod change) until `eviction_timeout_s` cluster seconds, then InjectionFailed.
- `taint-noexecute`: add the taint `gpu-drills.io/node-loss=drill:NoExecute`; the taint manager evicts.
- `gpu-unhealthy` is not a node fault: it is the GPU fault chain (fault kind `gpu-xid`, DCGM field injection in
  the node's DCGM pod, then the platform's own marking and remediation: drills/faults/gpu_xid.py,
  drills/measure/gpu_chain.py), the same on the twin and on a real cluster; `plan` refuses it here. `revert`
  still heals a journal entry of the twin's older GPU endpoint (`"gpu": true`).
- `kubelet-stop` (twin only): `POST /twin/v1/nodes/{name}/kubelet` `{"action": "stop"}`: heartbeats stop,
  the node goes NotReady and the node lifecycle controller evicts after tolerationSeconds.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from drills.core.errors import InjectionFailed, RevertFailed
from drills.core.kube import Cluster, EventMerger, obj_get
from drills.core.watch import retry_at
from drills.faults import Plan, Reach
from drills.faults.node_taints import read_node, update_taints
from drills.faults.readback import Observation, Reading, read

__all__ = ["KIND", "MODES", "TWIN_ONLY", "CHAIN_MODES", "TAINT_KEY", "NodeFaultSpec", "NodeFaultRecord", "plan", "inject", "revert", "verify",
           "revert_spec", "check_node"]

log = logging.getLogger(__name__)

MODES = ("cordon-drain", "taint-noexecute", "gpu-unhealthy", "kubelet-stop")
TWIN_ONLY = ("kubelet-stop",)
CHAIN_MODES = ("gpu-unhealthy",)  # modes that are not a node fault but a chain of faults (see the docstring)
TAINT_KEY = "gpu-drills.io/node-loss"
KIND = "node"
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class NodeFaultSpec:
    """What to do: which node, how; `eviction_timeout_s` bounds a drain (cluster seconds)."""

    node: str
    mode: str = "cordon-drain"
    eviction_timeout_s: float = 300.0


@dataclass(frozen=True)
class NodeFaultRecord:
    """Exactly what `inject` changed; JSON-serialisable (`to_dict`) for the journal and the report."""

    node: str
    mode: str
    injected_at: str  # cluster time, ISO
    cordoned: bool = False  # we set spec.unschedulable (it was schedulable before)
    taint: dict | None = None  # the taint we added
    gpu_unhealthy: bool = False
    kubelet_stopped: bool = False
    evicted: tuple[str, ...] = field(default=())  # namespace/name of pods evicted
    twin_at: str | None = None  # the twin's own time of a twin-endpoint fault (its answer's `at`)
    # `injected_at` is the middle of the first change's request: the server applied it within half this window
    # (cluster seconds, one request's latency × the clock's scale) plus our clock copy's bound, either way
    stamp_window_s: float | None = None
    clock_error_s: float | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "evicted": list(self.evicted)}


def check_node(cluster: Cluster, spec: NodeFaultSpec) -> dict:
    """Validate before any change: a known mode, a node that exists; returns the node (raw JSON)."""
    from kubernetes.client.exceptions import ApiException

    if spec.mode not in MODES:
        raise InjectionFailed(f"unknown node fault mode {spec.mode!r} (modes: {', '.join(MODES)}); nothing injected")
    if spec.mode in CHAIN_MODES:
        raise InjectionFailed(f"node fault mode {spec.mode} is the GPU fault chain (fault kind gpu-xid: DCGM field "
                              "injection, then the platform's marking and remediation); nothing injected")
    if spec.mode in TWIN_ONLY and not cluster.is_twin:
        raise InjectionFailed(f"node fault mode {spec.mode} has no Kubernetes API on a real cluster; use cordon-drain "
                              "or taint-noexecute (or a site hook); nothing injected")
    try:
        return read_node(cluster, spec.node)
    except ApiException as err:
        if err.status == 404:
            raise InjectionFailed(f"node {spec.node} not found in {cluster.name}; name an existing node "
                                  "(kubectl get nodes); nothing injected") from None
        raise InjectionFailed(f"cannot read node {spec.node}: {err.status} {err.reason}; nothing injected") from None


def revert_spec(cluster: Cluster, spec: NodeFaultSpec, node: dict) -> dict:
    """What the journal keeps so `revert_entry` can undo the fault alone, even after a crash mid-inject."""
    return {"node": spec.node, "mode": spec.mode,
            "uncordon": spec.mode == "cordon-drain" and not obj_get(node, "spec", "unschedulable", default=False),
            "taint": _taint() if spec.mode == "taint-noexecute" else None,
            "gpu": spec.mode == "gpu-unhealthy", "kubelet": spec.mode == "kubelet-stop",
            # how the node was found: a node that was schedulable must be schedulable again (whoever cordons it after)
            "schedulable": not obj_get(node, "spec", "unschedulable", default=False),
            "taints_before": sorted(_taint_ids(node))}


DOING = {"cordon-drain": "cordon and drain", "taint-noexecute": "taint NoExecute", "gpu-unhealthy": "mark the GPUs unhealthy on",
         "kubelet-stop": "stop the kubelet of"}


def plan(target, profile, *, node: str, mode: str) -> Plan:
    """Read-only: the node exists and the mode works on this target; what to undo, what it reaches."""
    cluster = target.cluster
    spec = NodeFaultSpec(node=node, mode=mode, eviction_timeout_s=profile.faults.eviction_timeout_s)
    current = check_node(cluster, spec)
    labels = obj_get(current, "metadata", "labels", default=None) or {}
    return Plan(KIND, node, f"{DOING[mode]} node {node} on {cluster.name}", revert_spec(cluster, spec, current),
                Reach(nodes=((node, labels),)), spec=spec)


def inject(target, plan: Plan) -> NodeFaultRecord:
    """Make the planned change; returns exactly what changed. Raises InjectionFailed."""
    cluster, spec, undo = target.cluster, plan.spec, plan.undo
    evicted: tuple[str, ...] = ()
    twin_at = None
    before = cluster.clock.timestamp()
    after = None  # the fault's first change is stamped at the middle of its request (± half its latency)
    try:
        if spec.mode == "cordon-drain":
            if undo["uncordon"]:
                before, after = cluster.around(lambda: cluster.core.patch_node(
                    spec.node, {"spec": {"unschedulable": True}}, _content_type=MERGE))
            else:
                after = cluster.clock.timestamp()
            evicted = _drain(cluster, spec)
        elif spec.mode == "taint-noexecute":
            before, after = _add_taint(cluster, spec.node, read_node(cluster, spec.node)) or (before, None)
        elif spec.mode == "kubelet-stop":
            twin_at = _twin_post(cluster, f"/twin/v1/nodes/{spec.node}/kubelet", {"action": "stop"}).get("at")
        after = after if after is not None else cluster.clock.timestamp()
    except InjectionFailed:
        raise
    except Exception as err:  # the fault may be half in place: the guard reverts it from the undo spec
        raise InjectionFailed(f"could not inject {spec.mode} on node {spec.node}: {_reason(err)}") from err
    injected_at = datetime.fromtimestamp((before + after) / 2, timezone.utc)
    record = NodeFaultRecord(node=spec.node, mode=spec.mode, injected_at=cluster.clock.iso(injected_at),
                             cordoned=undo["uncordon"], taint=undo["taint"], gpu_unhealthy=undo["gpu"],
                             kubelet_stopped=undo["kubelet"], evicted=evicted, twin_at=twin_at,
                             stamp_window_s=round(after - before, 3),
                             clock_error_s=round(float(getattr(cluster.clock, "error_s", 0.0) or 0.0), 3))
    log.info("injected %s on node %s (%d pods evicted)", spec.mode, spec.node, len(evicted))
    return record


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Undo exactly what the undo spec says; safe to call again (and on a fault only half injected)."""
    _undo(target.cluster, undo["node"], uncordon=bool(undo.get("uncordon")), taint=undo.get("taint"),
          gpu=bool(undo.get("gpu")), kubelet=bool(undo.get("kubelet")))
    return "reverted"


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read the node back: what the fault changed is as it was before (see the module docstring)."""
    name = undo["node"]
    return read(KIND, name, lambda: _read_back(target.cluster, undo))


def _read_back(cluster: Cluster, undo: dict) -> tuple[list[Observation], tuple[str, ...]]:
    from kubernetes.client.exceptions import ApiException

    name = undo["node"]
    try:
        node = read_node(cluster, name)
    except ApiException as err:
        if err.status == 404:  # gone: nothing of ours can be in place on it
            return [Observation(f"node {name}", "not found", f"GET nodes/{name}: 404")], ()
        raise
    source = f"nodes/{name} @ resourceVersion {obj_get(node, 'metadata', 'resourceVersion')}"
    seen: list[Observation] = []
    if undo.get("uncordon") or undo.get("schedulable"):
        cordoned = bool(obj_get(node, "spec", "unschedulable", default=False))
        seen.append(Observation(f"node {name}", f"spec.unschedulable={str(cordoned).lower()}", source, not cordoned))
    taint = undo.get("taint")
    if taint:
        ours = [t for t in obj_get(node, "spec", "taints", default=None) or []
                if t.get("key") == taint["key"] and t.get("effect") == taint["effect"]]
        seen.append(Observation(f"node {name}", f"taint {taint['key']}:{taint['effect']} "
                                f"{'present' if ours else 'absent'}", source, not ours))
    if "taints_before" in undo:  # a taint the node did not have before the fault (ours, or one it caused) is the fault
        added = sorted(_taint_ids(node) - set(undo["taints_before"]))
        seen.append(Observation(f"node {name}", f"taints added since the fault: {', '.join(added) or 'none'}", source,
                                not added))
    if undo.get("gpu"):
        healthy = (_condition(node, "GPUHealthy") or {}).get("status")
        capacity = obj_get(node, "status", "capacity", "nvidia.com/gpu")
        allocatable = obj_get(node, "status", "allocatable", "nvidia.com/gpu")
        seen.append(Observation(f"node {name}", f"GPUHealthy={healthy or 'absent'}, nvidia.com/gpu allocatable "
                                f"{allocatable} of {capacity}", source,
                                healthy != "False" and str(allocatable) == str(capacity)))
    if undo.get("kubelet"):
        ready = (_condition(node, "Ready") or {}).get("status")
        seen.append(Observation(f"node {name}", f"Ready={ready or 'absent'}", source, ready == "True"))
    return seen, ()


def _taint_ids(node: dict) -> set[str]:
    return {f"{t.get('key')}:{t.get('effect')}" for t in obj_get(node, "spec", "taints", default=None) or []}


def _condition(node: dict, kind: str) -> dict | None:
    return next((c for c in obj_get(node, "status", "conditions", default=None) or [] if c.get("type") == kind), None)


def _undo(cluster: Cluster, node: str, *, uncordon: bool, taint: dict | None, gpu: bool, kubelet: bool) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        if gpu:
            _twin_post(cluster, f"/twin/v1/nodes/{node}/gpu", {"state": "healthy"})
        if kubelet:
            _twin_post(cluster, f"/twin/v1/nodes/{node}/kubelet", {"action": "start"})
        if taint:
            update_taints(cluster, node, lambda taints: [t for t in taints if not (
                t.get("key") == taint["key"] and t.get("effect") == taint["effect"])])
        current = read_node(cluster, node)
        if uncordon and obj_get(current, "spec", "unschedulable", default=False):
            cluster.core.patch_node(node, {"spec": {"unschedulable": None}}, _content_type=MERGE)
    except ApiException as err:
        if err.status == 404:
            log.warning("node %s is gone: nothing to revert", node)
            return
        raise RevertFailed(f"could not revert node {node}: {err.status} {err.reason}; run `drills revert` "
                           "again once the API answers") from None
    except RevertFailed:
        raise
    except Exception as err:
        raise RevertFailed(f"could not revert node {node}: {_reason(err)}; run `drills revert` again") from None
    log.info("reverted node %s", node)


def _drain(cluster: Cluster, spec: NodeFaultSpec) -> tuple[str, ...]:
    """Evict every pod on the node except DaemonSet and mirror pods; retry 429 (PDB) until the timeout."""
    from kubernetes.client.exceptions import ApiException

    deadline = cluster.clock.timestamp() + spec.eviction_timeout_s
    pods = [p for p in _pods_on(cluster, spec.node) if not _daemon_or_mirror(p)]
    evicted: list[str] = []
    pending = list(pods)
    with EventMerger(cluster.clock) as changes:
        watching = False
        while pending:
            blocked = []
            for pod in pending:
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
                try:
                    cluster.core.create_namespaced_pod_eviction(name, ns, body)
                    evicted.append(f"{ns}/{name}")
                except ApiException as err:
                    if err.status == 404:
                        continue  # already gone
                    if err.status == 429:
                        blocked.append(pod)
                        continue
                    raise
            pending = blocked
            if not pending:
                break
            if cluster.clock.timestamp() >= deadline:
                names = ", ".join(p["metadata"]["name"] for p in pending)
                raise InjectionFailed(f"drain of node {spec.node} timed out after {spec.eviction_timeout_s:.0f}s: "
                                      f"a PodDisruptionBudget blocks evicting {names}")
            if not watching:  # wake up when a budget or a pod changes, not on a timer
                ns = pending[0]["metadata"]["namespace"]
                changes.watch("pdb", cluster.policy.list_namespaced_pod_disruption_budget, ns)
                watching = True
            for event in changes.events(retry_at(cluster.clock, deadline)):
                if event is not None and event.type == "MODIFIED":
                    break
    return tuple(evicted)


def _pods_on(cluster: Cluster, node: str) -> list[dict]:
    import json

    resp = cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
    return [p for p in json.loads(resp.data).get("items", [])
            if obj_get(p, "status", "phase") not in ("Succeeded", "Failed")]


def _daemon_or_mirror(pod: dict) -> bool:
    owners = obj_get(pod, "metadata", "ownerReferences", default=None) or []
    annotations = obj_get(pod, "metadata", "annotations", default=None) or {}
    return any(o.get("kind") == "DaemonSet" for o in owners) or "kubernetes.io/config.mirror" in annotations


def _taint() -> dict:
    return {"key": TAINT_KEY, "value": "drill", "effect": "NoExecute"}


def _add_taint(cluster: Cluster, name: str, node: dict) -> tuple[float, float] | None:
    """The taint added; the cluster-clock times around the write that added it (None: it was there already)."""
    def add(taints: list[dict]) -> list[dict]:
        if any(t.get("key") == TAINT_KEY and t.get("effect") == "NoExecute" for t in taints):
            return taints
        return taints + [_taint()]

    return update_taints(cluster, name, add, node)


def _twin_post(cluster: Cluster, path: str, body: dict) -> dict:
    import requests

    if not cluster.is_twin:
        raise InjectionFailed(f"{path} exists only on the twin")
    resp = requests.post(cluster.twin_url + path, json=body, timeout=10,
                         headers={"User-Agent": cluster.api.user_agent})
    if resp.status_code >= 300:
        raise InjectionFailed(f"the twin refused {path}: {resp.status_code} {resp.text[:200]}")
    try:
        return resp.json()
    except ValueError:
        return {}


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    if status is not None:
        return f"{status} {getattr(err, 'reason', '')}".strip()
    return str(err) or type(err).__name__
