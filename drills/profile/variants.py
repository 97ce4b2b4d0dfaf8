"""Which variants of a drill a site can run: the reason to skip an Example, or None to run it.

A feature's Examples table lists variants (how a node is lost, how many replicas die, which switch OS
carries the job); a site runs the ones its target supports and its profile allows, and skips the rest
with a reason a reviewer reads in the report — skipped, not failed and not hidden. Each rule here is
pure: what the scenario's step says, what the site has, and the sentence that explains a refusal. A
typo in a feature (an unknown mode) is not a variant to skip: the fault's own plan refuses it.
"""

from __future__ import annotations

import logging
from typing import Iterable

from drills.faults.node import CHAIN_MODES, MODES as NODE_MODES, TWIN_ONLY as TWIN_ONLY_NODE_MODES
from drills.profile.model import TargetProfile

__all__ = ["node_mode_refusal", "kill_refusal", "dialect_refusal", "supported_node_modes"]

log = logging.getLogger(__name__)


def supported_node_modes(profile: TargetProfile, on_twin: bool) -> tuple[str, ...]:
    """The node-loss modes this site runs: the profile's `faults.node_modes` (None: all), less the twin-only
    ones on a real target, and less the GPU fault chain (gpu-unhealthy) on a real target whose profile does not
    say where its DCGM runs and who remediates (`faults.gpu_fault`)."""
    enabled = profile.faults.node_modes
    return tuple(m for m in NODE_MODES if (enabled is None or m in enabled) and (on_twin or m not in TWIN_ONLY_NODE_MODES)
                 and (on_twin or m not in CHAIN_MODES or profile.faults.gpu_fault is not None))


def node_mode_refusal(mode: str, profile: TargetProfile, on_twin: bool) -> str | None:
    """Why this site does not lose a node by `mode`, or None (also None for an unknown mode: the fault refuses it)."""
    if mode not in NODE_MODES or mode in supported_node_modes(profile, on_twin):
        return None
    if mode in CHAIN_MODES and not on_twin and profile.faults.gpu_fault is None and (
            profile.faults.node_modes is None or mode in profile.faults.node_modes):
        return (f"node-loss mode {mode} needs faults.gpu_fault in the profile on a real cluster: the namespace and "
                "labels of its DCGM host engine and exporter pods, and who cordons and drains a node whose GPU is "
                "unhealthy (remediation: site | drill)")
    if mode in TWIN_ONLY_NODE_MODES and not on_twin:
        return (f"node-loss mode {mode} runs only on the twin: a real cluster has no Kubernetes API for it "
                "(use a site hook)")
    enabled = ", ".join(profile.faults.node_modes or ()) or "none"
    return f"node-loss mode {mode} is not enabled for this site (faults.node_modes: {enabled})"


def kill_refusal(killed: int, desired: int, profile: TargetProfile) -> str | None:
    """Why this site does not kill `killed` of `desired` serving replicas at once, or None."""
    limit = profile.faults.inference.max_kill
    if limit is None or killed <= limit:
        return None
    outage = ": a full outage of the endpoint" if killed >= desired else ""
    return (f"killing {killed} of {desired} replicas{outage} is beyond this site's faults.inference.max_kill "
            f"({limit})")


def dialect_refusal(dialect: str, have: Iterable[str]) -> str | None:
    """Why a fabric whose switches run the OSes `have` (names or aliases) has no `dialect` leaf to drill, or None."""
    from drills.faults.switch.dialect import load_switch_dialect

    names = {load_switch_dialect(name).name for name in have}
    if load_switch_dialect(dialect).name in names:
        return None
    return f"no {dialect} switch in the inventory (this fabric runs: {', '.join(sorted(names)) or 'none'}): nothing to drill"
