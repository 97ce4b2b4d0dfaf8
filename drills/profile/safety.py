"""The safety policy (DESIGN §6): what a profile allows drills to touch, and how much of it per run.

Every fault's plan says what it reaches (`drills.faults.Reach`); the fault guard checks it here
before anything changes. An empty allowlist allows nothing: a real target must say what is fair game.
"""

from __future__ import annotations

import fnmatch
import logging

from drills.core.errors import UnsafeTarget
from drills.profile.model import TargetProfile

__all__ = ["check_target", "check_node_allowed", "check_namespace_allowed", "check_switch_allowed",
           "check_blast_radius"]

log = logging.getLogger(__name__)


def check_target(target: str, profile: TargetProfile, twin_state: str | None = None, *,
                 source: str | None = None) -> bool:
    """The one target-safety rule of every command that touches a cluster (run, validate, accept): whether it
    drives a twin. A real target — a kubeconfig context given with --target, or a profile whose cluster.mode
    is kubeconfig or in-cluster — needs a profile file of its own (`source`; None is the built-in twin
    profile, whose allowlist is `*`) that drills a real cluster and lists explicitly the nodes and namespaces
    drills may touch; the context itself must then be in its cluster.allowed_contexts (drills.core.kube.connect,
    before anything connects). Raises UnsafeTarget, one line, before anything starts."""
    if twin_state:
        return True
    if target == "twin" and profile.cluster.mode == "twin":
        return True
    if profile.cluster.mode == "twin":
        which = "the built-in twin profile" if source is None else f"profile {source}"
        raise UnsafeTarget(f"--target {target} is a kubeconfig context, but {which} drills the twin (cluster.mode "
                           f"twin: its allowlist never applies to a real cluster); pass --profile with cluster.mode "
                           f"kubeconfig, an explicit safety.allow and cluster.allowed_contexts, or drop --target")
    allow = profile.safety.allow
    empty = [f"safety.allow.{name}" for name, globs in (("nodes", allow.nodes), ("namespaces", allow.namespaces))
             if not globs]
    if empty:
        raise UnsafeTarget(f"profile {source}: a real cluster needs an explicit allowlist, but {' and '.join(empty)} "
                           f"{'is' if len(empty) == 1 else 'are'} empty; list the nodes and namespaces drills may touch")
    return False


def check_node_allowed(profile: TargetProfile, node_name: str, labels: dict[str, str] | None = None) -> None:
    """Refuse a node outside safety.allow (name globs and required labels). Raises UnsafeTarget."""
    allow = profile.safety.allow
    if not any(fnmatch.fnmatchcase(node_name, glob) for glob in allow.nodes):
        raise UnsafeTarget(f"node {node_name} is not in the profile's allowlist (safety.allow.nodes: "
                           f"{_list(allow.nodes)}); add a matching glob to allow drills on it")
    labels = labels or {}
    for key, glob in allow.node_labels.items():
        if key not in labels or not fnmatch.fnmatchcase(labels[key], glob):
            have = f"has {key}={labels[key]}" if key in labels else f"has no label {key}"
            raise UnsafeTarget(f"node {node_name} {have}, but safety.allow.node_labels requires {key}={glob}; "
                               "refusing to touch it")


def check_namespace_allowed(profile: TargetProfile, namespace: str) -> None:
    """Refuse a namespace outside safety.allow.namespaces. Raises UnsafeTarget."""
    allowed = profile.safety.allow.namespaces
    if not any(fnmatch.fnmatchcase(namespace, glob) for glob in allowed):
        raise UnsafeTarget(f"namespace {namespace} is not in the profile's allowlist (safety.allow.namespaces: "
                           f"{_list(allowed)}); add it to allow drills there")


def check_switch_allowed(profile: TargetProfile, switch: str, interface: str | None = None) -> None:
    """Refuse a switch (and interface) outside safety.allow.switches/interfaces. Raises UnsafeTarget."""
    allow = profile.safety.allow
    if not any(fnmatch.fnmatchcase(switch, glob) for glob in allow.switches):
        raise UnsafeTarget(f"switch {switch} is not in the profile's allowlist (safety.allow.switches: "
                           f"{_list(allow.switches)}); add it to allow drills on it")
    if interface is not None and not any(fnmatch.fnmatchcase(interface, glob) for glob in allow.interfaces):
        raise UnsafeTarget(f"interface {interface} on switch {switch} is not in the profile's allowlist "
                           f"(safety.allow.interfaces: {_list(allow.interfaces)}); add it to allow shutting it")


def check_blast_radius(profile: TargetProfile, *, nodes: int = 0, pods: int = 0, ports: int = 0) -> None:
    """Refuse a run that would touch more nodes, pods or switch ports than safety.blast_radius allows."""
    caps = profile.safety.blast_radius
    for count, cap, what, field in ((nodes, caps.max_nodes, "node", "max_nodes"), (pods, caps.max_pods, "pod", "max_pods"),
                                    (ports, caps.max_ports, "switch port", "max_ports")):
        if count > cap:
            raise UnsafeTarget(f"this run would touch {count} {what}s, over the cap of {cap} "
                               f"(safety.blast_radius.{field}); raise the cap in the profile or target fewer")


def _list(items: list[str]) -> str:
    return ", ".join(items) if items else "empty"
