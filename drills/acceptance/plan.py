"""What one acceptance run will do, decided before anything changes: the nodes (names or a label
selector), each node's expectation (the product catalogue, by its labels or the profile), the reference
node for NCCL pairs and whether it is fit to be one, the checks, and the safety decision — allowlist, the
run's node cap, and a refusal to take a node that already runs workloads (it is not a new node).

A reference proves a new node's network path only if it is itself known good: Ready, schedulable, not
under the gate taint nor marked no-go by an earlier acceptance, outside the batch, and — when the plan
tests the spine (`acceptance.pair_across_leaves`) — under another leaf. An unfit reference makes every
pair test `not_run` (no-go), naming why."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from drills.acceptance import freshness
from drills.acceptance.catalogue import Expectation, expectation_for
from drills.core.errors import InvalidProfile, UnsafeTarget
from drills.core.kube import obj_get
from drills.faults.accept_gate import IDENTITY_ANNOTATION
from drills.faults.accept_gate import VERDICT_ANNOTATION as ACCEPTANCE_ANNOTATION
from drills.profile.acceptance import GATE_TAINT_KEY
from drills.profile.safety import check_namespace_allowed, check_node_allowed

__all__ = ["AcceptPlan", "make_plan", "node_capacity", "unfit_reference", "reference_now", "workload_pods"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcceptPlan:
    nodes: tuple[str, ...]
    reference: str | None
    checks: tuple[str, ...]
    capacity: dict[str, int]  # node → nvidia.com/gpu
    rails: dict[str, tuple[str, ...]]  # node → its RDMA devices (annotation); (): every adapter ibstat lists
    ports: dict[str, tuple[str | None, str | None]]  # node → (leaf switch, leaf port)
    ips: dict[str, str]
    expect: dict[str, Expectation] = field(default_factory=dict)  # node (and the reference) → its expectation
    reference_problem: str | None = None  # why the reference cannot prove a pair's path (None: fit)
    leaves: dict[str, str | None] = field(default_factory=dict)
    known: dict[str, dict] = field(default_factory=dict)  # accepted nodes outside the batch → recorded identities
    state: dict[str, dict] = field(default_factory=dict)  # node → what its evidence depends on, as planned (freshness)
    port_shared: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → other nodes naming its leaf port
    machine_shared: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # node → {field: others}

    def describe(self, namespace: str, gate: bool, healthy: dict[str, str] | None = None) -> list[str]:
        lines = [f"nodes: {', '.join(self.nodes)}", f"checks: {', '.join(self.checks)}",
                 f"NCCL pairs with known-good node: {self.reference or 'none'}"
                 + (f" — UNFIT: {self.reference_problem}" if self.reference_problem else ""),
                 f"Jobs in namespace {namespace}: {len(self.nodes) * len([c for c in self.checks if c != 'switch-port'])}"]
        for node in self.nodes:
            e = self.expect.get(node)
            if e is not None:
                lines.append(f"{node} expected as {e.server or e.gpu or 'nothing catalogued'} "
                             f"({', '.join(e.selected_by) or 'no label matched'})")
        for node in self.nodes:  # an ailing node runs no Job (drills/acceptance/checks.py): say so before the run
            ailing = freshness.unhealthy(self.state[node], healthy) if healthy is not None and node in self.state else []
            if ailing:
                lines.append(f"{node} NOT HEALTHY ({'; '.join(ailing)}): its checks will not run; it will be a no-go")
        if gate:
            lines.append("gate: taint every node gpu-drills.io/unaccepted:NoSchedule; untaint the nodes that pass")
        return lines


def make_plan(cluster, profile, selection: str) -> AcceptPlan:
    """Resolve `selection` (comma-separated names, or a label selector with `=`) and check it is safe."""
    cfg = profile.acceptance
    all_nodes = {n["metadata"]["name"]: n for n in _list(cluster.core.list_node(_preload_content=False))}
    if "=" in selection or selection.startswith("!"):
        chosen = [n for n in _list(cluster.core.list_node(label_selector=selection, _preload_content=False))]
        names = sorted(n["metadata"]["name"] for n in chosen)
        if not names:
            raise InvalidProfile(f"--nodes {selection}: no node has these labels (kubectl get nodes -l '{selection}')")
    else:
        names = [n.strip() for n in selection.split(",") if n.strip()]
        missing = [n for n in names if n not in all_nodes]
        if not names or missing:
            raise InvalidProfile(f"--nodes: no node named {', '.join(missing) or '(empty)'}; name existing nodes "
                                 "(kubectl get nodes) or give a label selector like gpu-drills.io/role=new")
    if len(names) > cfg.max_nodes:
        raise UnsafeTarget(f"{len(names)} nodes selected; acceptance.max_nodes allows {cfg.max_nodes} per run")
    check_namespace_allowed(profile, cfg.namespace)
    for name in names:
        check_node_allowed(profile, name, obj_get(all_nodes[name], "metadata", "labels", default=None) or {})
    busy = workload_pods(cluster, names)
    if busy:
        node, pods = next(iter(busy.items()))
        raise UnsafeTarget(f"node {node} already runs {len(pods)} workload pod(s) ({', '.join(pods[:3])}): it is not "
                           "a new node; acceptance takes only empty nodes (drain it first)")
    leaf_label = profile.faults.leaf_label
    leaves = {n: _labels(o).get(leaf_label) for n, o in all_nodes.items()}
    batch_leaves = {leaves[n] for n in names}
    reference = cfg.reference_node or _pick_reference(all_nodes, names, batch_leaves if cfg.pair_across_leaves else set(),
                                                      leaves, cfg.healthy_conditions)
    if reference is not None and reference not in all_nodes:
        raise InvalidProfile(f"acceptance.reference_node {reference} is not a node of this cluster")
    if reference in names:
        raise InvalidProfile(f"the reference node {reference} is one of the nodes under test; pick a known-good one")
    problem = None
    if reference is not None:
        problem = unfit_reference(all_nodes[reference], cfg.healthy_conditions)
        if problem is None and cfg.pair_across_leaves:
            problem = _across(reference, leaves.get(reference), batch_leaves, leaf_label)
    expect = {n: expectation_for(n, _labels(all_nodes[n]), cfg) for n in [*names, *([reference] if reference else [])]}
    return AcceptPlan(
        nodes=tuple(names), reference=reference, checks=tuple(cfg.checks),
        capacity={n: int(obj_get(all_nodes[n], "status", "capacity", default={}).get("nvidia.com/gpu", 0) or 0)
                  for n in names},
        rails={n: _rails(all_nodes[n]) for n in names},
        ports={n: ((obj_get(all_nodes[n], "metadata", "labels", default=None) or {}).get(leaf_label),
                   (obj_get(all_nodes[n], "metadata", "annotations", default=None) or {}).get(cfg.leaf_port_annotation))
               for n in names},
        ips={n: _ip(all_nodes[n]) for n in [*names, *([reference] if reference else [])]},
        expect=expect, reference_problem=problem, known=_known_identities(all_nodes, names),
        state={n: freshness.state(all_nodes[n], profile) for n in names},
        port_shared=_shared_ports(all_nodes, names, leaf_label, cfg.leaf_port_annotation),
        machine_shared=_shared_machines(all_nodes, names), leaves={n: leaves.get(n) for n in [*names, *([reference] if reference else [])]})


def reference_now(cluster, plan: AcceptPlan, leaf_label: str, across_leaves: bool,
                  healthy: dict[str, str]) -> str | None:
    """Why the reference cannot prove a path *now* (None: it still can), read just before the pair tests: fit
    at plan time is not fit an hour of DCGM and burn-in later (cordoned, tainted, NotReady, moved)."""
    from kubernetes.client.exceptions import ApiException

    if plan.reference is None or plan.reference_problem:
        return plan.reference_problem
    try:
        node = json.loads(cluster.core.read_node(plan.reference, _preload_content=False).data)
    except ApiException as err:
        return f"{plan.reference} could not be read again ({err.status} {err.reason})"
    problem = unfit_reference(node, healthy)
    if problem is None and across_leaves:
        problem = _across(plan.reference, _labels(node).get(leaf_label), {plan.leaves.get(n) for n in plan.nodes},
                          leaf_label, now=True)
    return problem


def _across(reference: str, leaf: str | None, batch_leaves: set, leaf_label: str, now: bool = False) -> str | None:
    """Why a pair with `reference` would not be known to cross the spine (None: it would): the reference under a new
    node's leaf, or a leaf not known on either side — unknown is not another leaf (red team, wave 8: a reference with
    no leaf label was taken as under another leaf, and a pair inside a leaf cut off from the spines got GO)."""
    if not leaf:
        return (f"{reference} has no {leaf_label} label: whether the pair crosses the spine cannot be told "
                "(acceptance.pair_across_leaves)")
    if None in batch_leaves or "" in batch_leaves:
        return (f"a node under test has no {leaf_label} label: whether the pair with {reference} crosses the spine "
                "cannot be told (acceptance.pair_across_leaves)")
    if leaf in batch_leaves:
        return (f"{reference} is {'now ' if now else ''}under {leaf}, the new nodes' leaf: the pair would never cross "
                "the spine (acceptance.pair_across_leaves)")
    return None


def unfit_reference(node: dict, healthy: dict[str, str]) -> str | None:
    """Why `node` is not a known-good partner (None: it is): NotReady, under pressure or any condition at other
    than its healthy status (`healthy`, freshness.unhealthy), cordoned, under the gate taint, or marked no-go by
    an earlier acceptance."""
    name = node["metadata"]["name"]
    ready = next((c.get("status") for c in obj_get(node, "status", "conditions", default=None) or []
                  if c.get("type") == "Ready"), None)
    if ready != "True":
        return f"{name} is not Ready"
    ailing = freshness.unhealthy(freshness.conditions(node), healthy)
    if ailing:  # a partner the kubelet reports ailing measures its own trouble, not the new node's path
        return f"{name} is not healthy ({'; '.join(ailing)})"
    if obj_get(node, "spec", "unschedulable", default=False):
        return f"{name} is cordoned"
    if any(t.get("key") == GATE_TAINT_KEY for t in obj_get(node, "spec", "taints", default=None) or []):
        return f"{name} still carries {GATE_TAINT_KEY}: it has not been accepted"
    verdict = (obj_get(node, "metadata", "annotations", default=None) or {}).get(ACCEPTANCE_ANNOTATION)
    if verdict is not None and verdict != "go":
        return f"{name} was judged {verdict} by an earlier acceptance"
    return None


def node_capacity(node: dict) -> int:
    return int(obj_get(node, "status", "capacity", default={}).get("nvidia.com/gpu", 0) or 0)


def _list(resp) -> list[dict]:
    return json.loads(resp.data).get("items", [])


def workload_pods(cluster, names: list[str]) -> dict[str, list[str]]:
    """node → its pods that are neither DaemonSet pods, this tool's acceptance Jobs, nor finished."""
    out: dict[str, list[str]] = {}
    for name in names:
        resp = cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}", _preload_content=False)
        for pod in _list(resp):
            owners = obj_get(pod, "metadata", "ownerReferences", default=None) or []
            labels = obj_get(pod, "metadata", "labels", default=None) or {}
            if any(o.get("kind") == "DaemonSet" for o in owners) or "gpu-drills.io/accept-run" in labels:
                continue
            if obj_get(pod, "status", "phase") in ("Succeeded", "Failed"):
                continue
            out.setdefault(name, []).append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return out


def _pick_reference(all_nodes: dict, names: list[str], avoid_leaves: set, leaves: dict,
                    healthy: dict[str, str]) -> str | None:
    """A fit GPU node outside the batch (unfit_reference), under another leaf than the batch when asked."""
    for name, node in sorted(all_nodes.items()):
        if name in names or _labels(node).get("nvidia.com/gpu.present") != "true":
            continue
        if unfit_reference(node, healthy) is None and leaves.get(name) not in avoid_leaves - {None}:
            return name
    return None


def _known_identities(all_nodes: dict, names: list[str]) -> dict[str, dict]:
    """The GPU UUIDs and NIC GUIDs earlier acceptances recorded on the nodes outside this batch."""
    out = {}
    for name, node in all_nodes.items():
        text = (obj_get(node, "metadata", "annotations", default=None) or {}).get(IDENTITY_ANNOTATION)
        if name in names or not text:
            continue
        try:
            out[name] = json.loads(text)
        except ValueError:
            log.warning("node %s: unreadable %s annotation; its identities are not compared", name, IDENTITY_ANNOTATION)
    return out


def _shared_ports(all_nodes: dict, names: list[str], leaf_label: str, annotation: str) -> dict[str, tuple[str, ...]]:
    """Each planned node whose (leaf, port) another node of the cluster names too → those nodes: the labels
    and annotations are the nodes' own words, and two nodes cannot face one port."""
    def port(node: dict) -> tuple[str | None, str | None]:
        return _labels(node).get(leaf_label), (obj_get(node, "metadata", "annotations", default=None) or {}).get(annotation)

    ports = {n: port(o) for n, o in all_nodes.items()}
    return {n: tuple(sorted(m for m, p in ports.items() if m != n and p == ports[n])) for n in names
            if all(ports[n]) and any(m != n and p == ports[n] for m, p in ports.items())}


def _shared_machines(all_nodes: dict, names: list[str]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Each planned node whose machine identity (the kubelet's `status.nodeInfo.systemUUID` from DMI, `machineID`
    from /etc/machine-id) another Node object reports too → {field: those nodes}: two Node objects, one machine
    (a re-registered host, a cloned image)."""
    def ident(node: dict, key: str) -> str | None:
        return (obj_get(node, "status", "nodeInfo", default=None) or {}).get(key) or None

    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for n in names:
        for key in ("systemUUID", "machineID"):
            mine = ident(all_nodes[n], key)
            others = tuple(sorted(m for m, o in all_nodes.items() if m != n and mine and ident(o, key) == mine))
            if others:
                out.setdefault(n, {})[key] = others
    return out


def _labels(node: dict) -> dict:
    return obj_get(node, "metadata", "labels", default=None) or {}


def _rails(node: dict) -> tuple[str, ...]:
    """The node's RDMA devices as its annotation names them; none named: the Job tests every adapter ibstat
    lists (never a guessed list, which would leave NICs untested)."""
    text = (obj_get(node, "metadata", "annotations", default=None) or {}).get("gpu-drills.io/rdma-devices")
    return tuple(text.split(",")) if text else ()


def _ip(node: dict) -> str:
    for addr in obj_get(node, "status", "addresses", default=None) or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address", "")
    return ""
