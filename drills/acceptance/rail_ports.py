"""The switch-port check per NIC: every leaf's LLDP read once, each node's NICs placed (drills/acceptance/port_nics.py),
then each placed NIC's port judged like any node-facing port (drills/acceptance/switch.py `read_port`).

Used for the nodes whose rdma check read their NICs (ibstat's RoCE port GUIDs) in this run; the others keep the
annotated-port check. Read-only: two short sessions per leaf (LLDP, then the ports found on it).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.acceptance.judge import CheckResult, not_run
from drills.acceptance.port_nics import NicPlace, place
from drills.core.errors import CheckFailed, DrillError
from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.lldp import LldpTable, LldpUnavailable, read_lldp, same_port
from drills.faults.switch.session import SwitchSession
from drills.profile.acceptance import Thresholds

__all__ = ["check_nic_ports", "CHECK"]

log = logging.getLogger(__name__)

CHECK = "switch-port"


def check_nic_ports(profile, inventory, nodes: dict[str, tuple[str | None, dict[str, str]]], t: Thresholds,
                    raw: dict | None = None, annotated: dict[str, tuple[str | None, str | None]] | None = None
                    ) -> list[CheckResult]:
    """One result per node of `nodes` (node → (its leaf label, NIC → MAC)): every NIC on its rail's leaf, alone
    on its port, and each such port healthy. `annotated` (node → (leaf, port) its annotation names), when given,
    must be one of its NICs' ports: a stale or copied annotation is `wrong_port` here as in the annotated check."""
    homes = {home for home, _ in nodes.values()}
    # the leaves a NIC may be on: each rail's, and the nodes' own (spines and other pods' leaves are not asked)
    leaves = [c for c in inventory if (c.role or "leaf") != "spine" and (c.rails or c.name in homes)]
    rails = {c.name: list(c.rails) for c in leaves}
    tables: dict[str, LldpTable] = {}
    try:
        for cfg in leaves:
            with _session(cfg, profile.switches) as s:
                tables[cfg.name] = read_lldp(s)
    except LldpUnavailable as err:
        return [not_run(n, CHECK, f"{n}'s NICs: LLDP not available ({err}): which port each NIC is cabled to is not "
                                  "confirmed by the fabric") for n in sorted(nodes)]
    except DrillError as err:
        return [not_run(n, CHECK, f"{n}'s NICs: the leaves' LLDP is unreadable ({err})") for n in sorted(nodes)]
    lldp_text = "".join(f"{t_.switch}# {t_.command}\n{t_.output.rstrip()}\n" for t_ in tables.values())
    placed = {n: place(n, home, macs, tables, rails) for n, (home, macs) in sorted(nodes.items())}
    for n, places in placed.items():
        leaf, port = (annotated or {}).get(n, (None, None))
        if leaf and port and not any(p.failure for p in places) and not any(
                p.leaf == leaf and same_port(p.port or "", port) for p in places):
            first = places[0]
            placed[n] = [NicPlace(first.nic, first.mac, first.rail, first.leaf, first.port, "wrong_port",
                                  f"the annotation names {leaf} {port}, but LLDP shows none of {n}'s NICs there "
                                  f"({', '.join(f'{p.nic} on {p.leaf} {p.port}' for p in places)}): the node is "
                                  "cabled to other ports than its annotation says"), *places[1:]]
    out: list[CheckResult] = []
    todo: dict[str, list[tuple[str, NicPlace]]] = {}
    for node, places in placed.items():
        bad = [p for p in places if p.failure]
        if bad:
            more = f" (and {len(bad) - 1} more NIC{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
            out.append(CheckResult(node, CHECK, False, f"{bad[0].why}{more}; LLDP read on {', '.join(sorted(tables))}",
                                   {"nics": [p.to_dict() for p in places]}, {"rails": rails}, bad[0].failure,
                                   evidence={"lldp_source": "; ".join(t_.source for t_ in tables.values())}))
            if raw is not None:
                raw[(node, CHECK, None)] = lldp_text
            continue
        for p in places:
            todo.setdefault(p.leaf or "", []).append((node, p))
    judged: dict[str, list[tuple[NicPlace, CheckResult, str]]] = {}
    by_name = {c.name: c for c in leaves}
    for leaf, items in sorted(todo.items()):
        from drills.acceptance.switch import read_port

        try:
            with _session(by_name[leaf], profile.switches) as s:
                views = [v for v in s.dialect.port if t.roce or not v.roce]
                cache: dict = {}
                for node, p in items:
                    r, text = read_port(s, node, p.port or "", views, t, cache)
                    judged.setdefault(node, []).append((p, r, text))
        except DrillError as err:
            for node, p in items:
                judged.setdefault(node, []).append((p, not_run(node, CHECK, f"{leaf} {p.port} ({p.nic}): {err}"), ""))
    for node, rows in sorted(judged.items()):
        rows.sort(key=lambda x: x[0].rail)
        measured = {"nics": [{**p.to_dict(), "go": r.go, **r.measured} for p, r, _ in rows]}
        evidence = {"lldp_source": "; ".join(t_.source for t_ in tables.values())}
        if raw is not None:
            raw[(node, CHECK, None)] = lldp_text + "\n".join(text for _, _, text in rows)
        bad = [(p, r) for p, r, _ in rows if not r.go]
        if bad:
            p, r = bad[0]
            out.append(replace(r, reason=f"{p.nic} (rail {p.rail}): {r.reason}" + (
                f" (and {len(bad) - 1} more NIC port{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""),
                measured=measured, evidence=evidence))
            continue
        first = rows[0][1]
        ports = ", ".join(f"{p.nic} {p.leaf} {p.port}" for p, _, _ in rows)
        out.append(replace(first, reason=f"{len(rows)} NICs, each alone on a port of its rail's leaf by LLDP ({ports}); "
                           f"each port {first.reason.split(': ', 1)[-1]}", measured=measured, evidence=evidence))
    return sorted(out, key=lambda r: r.node)


def _session(cfg, sw_cfg) -> SwitchSession:
    return SwitchSession(cfg, accept_unknown_host_keys=sw_cfg.accept_unknown_host_keys, error=CheckFailed,
                         connect_timeout=sw_cfg.connect_timeout_s, command_timeout=sw_cfg.command_timeout_s,
                         dialect=load_switch_dialect(cfg.dialect))
