"""Which uplink to drop: the switch inventory (profile, or the twin's) and the leaf carrying the job.

The leaf of a node comes from a node label (`faults.leaf_label`, on the twin
`network.gpu-drills.io/leaf`); the profile may name the switch (`faults.switch`) and the uplink
(`faults.uplink`) instead. Read-only: nothing here touches a switch.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from drills.profile.model import SwitchConfig, TargetProfile
from drills.core.errors import CheckFailed, InvalidProfile
from drills.faults.switch.dialect import load_switch_dialect

__all__ = ["switch_inventory", "leaf_uplink", "node_labels", "speaks"]

log = logging.getLogger(__name__)


def switch_inventory(profile: TargetProfile, twin_info: dict | None = None) -> list[SwitchConfig]:
    """The profile's switches; on the twin, when the profile lists none, the twin's own inventory."""
    if profile.switches.devices:
        return list(profile.switches.devices)
    entries = (twin_info or {}).get("switches") or []
    if not entries:
        raise InvalidProfile("no switch inventory: set switches.inventory (or switches.devices) in the profile")
    try:
        return [SwitchConfig.model_validate(entry) for entry in entries]
    except ValidationError as err:
        first = err.errors()[0]
        raise InvalidProfile(f"twin switch inventory: {first['msg'].removeprefix('Value error, ')}") from None


def leaf_uplink(profile: TargetProfile, inventory: list[SwitchConfig], node_labels: dict[str, dict[str, str]],
                dialect: str | None = None, pick=None) -> tuple[SwitchConfig, str]:
    """(switch, uplink) for the drill: the named ones, else the first uplink of the leaf of a node running
    the job (of `dialect` when given). `node_labels` maps each job node to its labels. `pick(["leaf:iface", …])`
    chooses among every uplink of those leaves (drills.core.picks: at random with `--random`) when the profile
    names no uplink."""
    faults = profile.faults
    by_name = {s.name: s for s in inventory}
    if faults.switch:
        if faults.switch not in by_name:
            raise InvalidProfile(f"faults.switch {faults.switch} is not in the switch inventory "
                                 f"(known: {', '.join(sorted(by_name)) or 'none'})")
        candidates = [by_name[faults.switch]]
    else:
        leaves = _job_leaves(node_labels, faults.leaf_label)
        unknown = [leaf for leaf in leaves if leaf not in by_name]
        if unknown:
            raise CheckFailed(f"precondition not met: the job's leaf {', '.join(unknown)} is not in the switch "
                              "inventory; add it to switches.inventory")
        candidates = [by_name[leaf] for leaf in leaves]
    if dialect is not None:
        speaking = [s for s in candidates if speaks(s, dialect)]
        if not speaking:
            have = ", ".join(f"{s.name} ({s.dialect})" for s in candidates)
            raise CheckFailed(f"precondition not met: no leaf carrying the job speaks {dialect} (the job's leaves: "
                              f"{have}); drop this example or pick a job that runs through a {dialect} leaf")
        candidates = speaking
    if pick is not None and not faults.uplink and all(s.uplinks for s in candidates):
        chosen = pick([f"{s.name}:{u}" for s in candidates for u in s.uplinks])
        name, _, interface = chosen.partition(":")
        return by_name[name], interface
    switch = candidates[0]
    if faults.uplink:
        if switch.uplinks and faults.uplink not in switch.uplinks:
            raise InvalidProfile(f"faults.uplink {faults.uplink} is not an uplink of {switch.name} in the inventory "
                                 f"(uplinks: {', '.join(switch.uplinks)})")
        return switch, faults.uplink
    if not switch.uplinks:
        raise InvalidProfile(f"switch {switch.name} lists no uplinks in the inventory; add its uplink interfaces")
    return switch, switch.uplinks[0]


def speaks(switch: SwitchConfig, dialect: str) -> bool:
    """Whether the switch's OS is `dialect`, by name or alias (an inventory's `nvue` is `cumulus`)."""
    return load_switch_dialect(switch.dialect).name == load_switch_dialect(dialect).name


def node_labels(cluster, nodes: list[str]) -> dict[str, dict[str, str]]:
    """Each node's labels (one read per node)."""
    return {node: dict(cluster.core.read_node(node).metadata.labels or {}) for node in nodes}


def _job_leaves(node_labels: dict[str, dict[str, str]], label: str) -> list[str]:
    """The job's leaves in node order; CheckFailed naming the nodes without the label."""
    unlabelled = sorted(n for n, labels in node_labels.items() if not (labels or {}).get(label))
    if unlabelled:
        raise CheckFailed(f"precondition not met: node {', '.join(unlabelled)} has no {label} label, so its leaf "
                          "switch is unknown; label the nodes or set faults.switch in the profile")
    return list(dict.fromkeys(node_labels[n][label] for n in sorted(node_labels)))
