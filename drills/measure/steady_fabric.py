"""The fabric facet of the steady state (drills/measure/steady.py): every uplink of the training job's leaves admin and
oper up, the leaves and their uplinks read from the switches' own LLDP where it says. Read-only, over SSH."""

from __future__ import annotations

import logging

from drills.measure.steady import SteadyContext, job_pods
from drills.verdicts.steady import Reading, unobserved, uplink_reading

__all__ = ["uplinks"]

log = logging.getLogger(__name__)


def uplinks(ctx: SteadyContext) -> list[Reading]:
    """Every uplink of the job's leaves, admin and oper up. Which leaves carry the job and which of their ports are
    uplinks are read from the fabric itself where it says (red team, wave 8: a relabelled node, an inventory listing
    one uplink of two, both passed with an uplink down): each switch's LLDP table — the leaf a job node is seen on, the
    ports whose neighbour is another switch of the inventory — joined with the inventory's `uplinks`; the node's leaf
    label only for a node no switch's LLDP shows (servers without lldpd), said so in the reading's source."""
    from drills.faults.switch.target import node_labels, switch_inventory
    from drills.faults.switch.uplink import show_state

    profile, workload = ctx.profile, ctx.profile.workloads.training
    try:
        inventory = {s.name: s for s in switch_inventory(profile, ctx.twin_info)}
        nodes = sorted({p["spec"].get("nodeName") for p in job_pods(ctx.cluster, workload) if p["spec"].get("nodeName")})
        labels = node_labels(ctx.cluster, nodes)
    except Exception as err:  # noqa: BLE001
        return [unobserved("uplinks of the job's leaves", "every uplink admin and oper up", str(err).splitlines()[0])]
    sw = profile.switches
    tables = _lldp_tables(inventory.values(), profile.faults.switch_transport, sw)
    label = profile.faults.leaf_label
    leaves: dict[str, str] = {}  # leaf → how it was found to carry the job
    for node in nodes:
        seen = [name for name, table in tables.items() if table is not None and table.facing(node)]
        for name in seen:
            leaves.setdefault(name, f"LLDP of {name} shows {node}")
        if not seen and labels[node].get(label):
            leaves.setdefault(labels[node][label], f"{node}'s {label} label (no switch's LLDP shows {node})")
    if not leaves:
        return [unobserved("uplinks of the job's leaves", "every uplink admin and oper up",
                           f"nodes {', '.join(nodes) or '(none)'}: on no switch's LLDP and no {label} label")]
    out: list[Reading] = []
    for leaf, how in leaves.items():
        cfg = inventory.get(leaf)
        table = tables.get(leaf)
        fabric = [] if table is None else [n.local for n in table.neighbours
                                           if any(_is_switch(n.system, other) for other in inventory.values()
                                                  if other.name != leaf)]
        uplinks = list(dict.fromkeys([*(cfg.uplinks if cfg is not None else []), *fabric]))
        if cfg is None or not uplinks:
            out.append(unobserved(f"uplinks of {leaf}", "every uplink admin and oper up",
                                  f"{how}; switch inventory: {leaf} {'missing' if cfg is None else 'lists no uplinks'}"
                                  f"{'' if table is None else ' and its LLDP shows no other switch'}"))
            continue
        for iface in uplinks:
            listed = "" if iface in cfg.uplinks else " (an uplink by LLDP, not in the inventory's list)"
            source = f"switch {leaf} ({cfg.dialect}) over SSH: interface state of {iface}{listed}; {how}"
            try:
                state = show_state(cfg, iface, profile.faults.switch_transport,
                                   accept_unknown_host_keys=sw.accept_unknown_host_keys,
                                   connect_timeout=sw.connect_timeout_s, command_timeout=sw.command_timeout_s)
            except Exception as err:  # noqa: BLE001
                out.append(uplink_reading(leaf, iface, None, None, f"{source}: {str(err).splitlines()[0]}"))
                continue
            out.append(uplink_reading(leaf, iface, state.admin_up, state.oper_up, source))
    return out


def _lldp_tables(switches, transport: str, sw) -> dict:
    """Each switch's LLDP table read over SSH now (None where it cannot be read: LLDP off, no session)."""
    from drills.core.errors import CheckFailed
    from drills.faults.switch.lldp import read_lldp
    from drills.faults.switch.session import SwitchSession

    tables = {}
    for cfg in switches:
        try:
            with SwitchSession(cfg, transport, error=CheckFailed, accept_unknown_host_keys=sw.accept_unknown_host_keys,
                               connect_timeout=sw.connect_timeout_s, command_timeout=sw.command_timeout_s) as session:
                tables[cfg.name] = read_lldp(session)
        except Exception as err:  # noqa: BLE001 — a switch without LLDP: its uplinks come from the inventory alone
            log.info("LLDP of %s not read: %s", cfg.name, str(err).splitlines()[0] if str(err) else err)
            tables[cfg.name] = None
    return tables


def _is_switch(system: str, cfg) -> bool:
    from drills.faults.switch.lldp import same_host

    return same_host(system, cfg.name) or bool(getattr(cfg, "host", "")) and same_host(system, cfg.host)
