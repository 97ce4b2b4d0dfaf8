"""`drills validate`, what the site's profile asks of its target — before any cluster is read.

- Fault modes the target cannot run are refused up front (✗): a pod kill mode with no Kubernetes API on a
  real cluster, no node-loss mode left to drill, clients mode without fio servers. Node-loss modes the
  site lists but its target cannot run are a warning: those Examples will be skipped, naming why
  (drills/profile/variants.py), and the run can still go green.
- Wildcard allowlists on a real target are a warning: `*` makes every node, switch or interface fair game,
  and the blast-radius caps are then the only limit.
- The uplink drill finds the leaf of the job's nodes by a node label (`faults.leaf_label`): `leaf_check`
  reads it on the job's nodes (✗ when a node has none or names a switch the inventory lacks; a warning when
  every node sits under one leaf, where no uplink carries the job's traffic and the drill is inconclusive).
"""

from __future__ import annotations

import logging
from typing import Iterable

from drills.profile.model import TargetProfile
from drills.profile.variants import supported_node_modes
from drills.validate.preflight import Check

__all__ = ["site_checks", "leaf_check"]

log = logging.getLogger(__name__)

_WILDCARD_FIELDS = ("nodes", "switches", "interfaces")


def site_checks(profile: TargetProfile, drills: Iterable[str], on_twin: bool) -> list[Check]:
    """The profile's fault modes against the target, and its allowlists' scope (a real target's)."""
    drills = set(drills)
    out = [_modes(profile, drills, on_twin)]
    if not on_twin:
        out.append(_wildcards(profile))
    return [c for c in out if c is not None]


def leaf_check(cluster, profile: TargetProfile, nodes: list[str], inventory: list | None) -> Check:
    """The job's nodes carry `faults.leaf_label`, naming leaves of the switch inventory (read only)."""
    label = profile.faults.leaf_label
    if profile.faults.switch:
        return Check("leaf labels", True, f"faults.switch names the leaf ({profile.faults.switch}): no label needed")
    leaves: dict[str, str | None] = {}
    for name in nodes:
        try:
            leaves[name] = (cluster.core.read_node(name).metadata.labels or {}).get(label)
        except Exception as err:  # noqa: BLE001 — an unreadable node cannot be judged
            return Check("leaf labels", False, f"cannot read node {name} ({type(err).__name__}); grant get on nodes")
    missing = sorted(n for n, leaf in leaves.items() if not leaf)
    if missing:
        return Check("leaf labels", False, f"{', '.join(missing)} carry no {label} label: label each GPU node with "
                     f"its leaf switch (kubectl label node {missing[0]} {label}=LEAF), or set faults.leaf_label to the "
                     "label the site uses, or name the leaf in faults.switch")
    known = {s.name for s in inventory or []}
    unknown = sorted({leaf for leaf in leaves.values() if known and leaf not in known})
    if unknown:
        return Check("leaf labels", False, f"{label} names {', '.join(unknown)}, not in the switch inventory "
                     f"({', '.join(sorted(known))}): add it to switches.inventory or fix the label")
    if len(set(leaves.values())) < 2:
        return Check("leaf labels", False, f"the job's nodes all sit under {next(iter(leaves.values()))}: its NCCL "
                     "traffic crosses no leaf uplink, so the uplink drill would be inconclusive; place the job "
                     "across leaves", warn=True)
    pairs = ", ".join(f"{n}→{leaf}" for n, leaf in sorted(leaves.items()))
    return Check("leaf labels", True, f"{label}: {pairs}")


# -- helpers -----------------------------------------------------------------------------------
def _modes(profile: TargetProfile, drills: set[str], on_twin: bool) -> Check | None:
    faults, problems, skipped = profile.faults, [], []
    if "gpu-node-loss" in drills:
        runs = supported_node_modes(profile, on_twin)
        if not runs:
            problems.append(f"no node-loss mode this target runs (faults.node_modes: "
                            f"{', '.join(faults.node_modes or ()) or 'none'}; a real cluster runs cordon-drain and "
                            "taint-noexecute)")
        skipped += [m for m in (faults.node_modes or ()) if m not in runs]
    if "inference-pod-kill" in drills and faults.pod_kill_mode == "kill-container" and not on_twin:
        problems.append("faults.pod_kill_mode kill-container has no Kubernetes API on a real cluster: use delete or "
                        "evict")
    sat = profile.storage.saturation
    if "storage-saturation" in drills and sat.mode == "clients" and not sat.clients:
        problems.append("storage.saturation.mode is clients but storage.saturation.clients lists no fio server")
    if "storage-saturation" in drills and sat.mode == "job" and sat.per_node and not sat.node_selector:
        skipped.append("per_node without node_selector (one fio pod on every schedulable node)")
    if problems:
        return Check("fault modes", False, "; ".join(problems))
    if skipped:
        return Check("fault modes", False, f"{', '.join(skipped)}: not run on this target — those Examples are "
                     "skipped, naming why", warn=True)
    return Check("fault modes", True, "every mode the profile selects runs on this target")


def _wildcards(profile: TargetProfile) -> Check:
    allow = profile.safety.allow
    wild = [f"safety.allow.{field}" for field in _WILDCARD_FIELDS
            if any(glob.strip("*?") == "" for glob in getattr(allow, field))]
    if wild:
        return Check("allowlist scope", False, f"{', '.join(wild)} match everything: list the GPU nodes, leaf "
                     "switches and uplinks drills may touch (the blast-radius caps are otherwise the only limit)",
                     warn=True)
    return Check("allowlist scope", True, "no allowlist matches everything")
