"""What one acceptance run will do, decided before anything changes: the nodes (names or a label
selector), the reference node for NCCL pairs, the checks, and the safety decision — allowlist, the run's
node cap, and a refusal to take a node that already runs workloads (it is not a new node)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from drills.core.errors import InvalidProfile, UnsafeTarget
from drills.core.kube import obj_get
from drills.profile.safety import check_namespace_allowed, check_node_allowed

__all__ = ["AcceptPlan", "make_plan", "node_capacity"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcceptPlan:
    nodes: tuple[str, ...]
    reference: str | None
    checks: tuple[str, ...]
    capacity: dict[str, int]  # node → nvidia.com/gpu
    rails: dict[str, tuple[str, ...]]  # node → its RDMA devices (twin: the pool's; real: the profile's)
    ports: dict[str, tuple[str | None, str | None]]  # node → (leaf switch, leaf port)
    ips: dict[str, str]

    def describe(self, namespace: str, gate: bool) -> list[str]:
        lines = [f"nodes: {', '.join(self.nodes)}", f"checks: {', '.join(self.checks)}",
                 f"NCCL pairs with known-good node: {self.reference or 'none'}",
                 f"Jobs in namespace {namespace}: {len(self.nodes) * len([c for c in self.checks if c != 'switch-port'])}"]
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
    busy = _workload_pods(cluster, names)
    if busy:
        node, pods = next(iter(busy.items()))
        raise UnsafeTarget(f"node {node} already runs {len(pods)} workload pod(s) ({', '.join(pods[:3])}): it is not "
                           "a new node; acceptance takes only empty nodes (drain it first)")
    reference = cfg.reference_node or _pick_reference(all_nodes, names)
    if reference is not None and reference not in all_nodes:
        raise InvalidProfile(f"acceptance.reference_node {reference} is not a node of this cluster")
    if reference in names:
        raise InvalidProfile(f"the reference node {reference} is one of the nodes under test; pick a known-good one")
    leaf_label = profile.faults.leaf_label
    return AcceptPlan(
        nodes=tuple(names), reference=reference, checks=tuple(cfg.checks),
        capacity={n: int(obj_get(all_nodes[n], "status", "capacity", default={}).get("nvidia.com/gpu", 0) or 0)
                  for n in names},
        rails={n: _rails(all_nodes[n]) for n in names},
        ports={n: ((obj_get(all_nodes[n], "metadata", "labels", default=None) or {}).get(leaf_label),
                   (obj_get(all_nodes[n], "metadata", "annotations", default=None) or {}).get(cfg.leaf_port_annotation))
               for n in names},
        ips={n: _ip(all_nodes[n]) for n in [*names, *([reference] if reference else [])]})


def node_capacity(node: dict) -> int:
    return int(obj_get(node, "status", "capacity", default={}).get("nvidia.com/gpu", 0) or 0)


def _list(resp) -> list[dict]:
    return json.loads(resp.data).get("items", [])


def _workload_pods(cluster, names: list[str]) -> dict[str, list[str]]:
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


def _pick_reference(all_nodes: dict, names: list[str]) -> str | None:
    """A Ready GPU node outside the batch, without the gate taint."""
    for name, node in sorted(all_nodes.items()):
        labels = obj_get(node, "metadata", "labels", default=None) or {}
        taints = obj_get(node, "spec", "taints", default=None) or []
        if name in names or labels.get("nvidia.com/gpu.present") != "true":
            continue
        if any(t.get("key") == "gpu-drills.io/unaccepted" for t in taints):
            continue
        return name
    return None


def _rails(node: dict) -> tuple[str, ...]:
    text = (obj_get(node, "metadata", "annotations", default=None) or {}).get("gpu-drills.io/rdma-devices")
    return tuple(text.split(",")) if text else ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")


def _ip(node: dict) -> str:
    for addr in obj_get(node, "status", "addresses", default=None) or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address", "")
    return ""
