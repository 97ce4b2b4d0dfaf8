"""Which leaf port faces a new node, as the fabric says (LLDP), against what the node's annotation says.

The annotation (`acceptance.leaf_port_annotation`) is what provisioning wrote down; a mis-cabled node, a
moved cable or a stale annotation makes the port check judge a port that does not face the node. So the
port is judged only once the leaf's LLDP table shows the node on it (the second key, DESIGN §5b). The leaf
shows the node on another port → `wrong_port`, naming both ports; the annotated port faces another host and
the node is nowhere → `wrong_port`, naming that host; LLDP unavailable, or neither port nor node seen →
`not_run`, saying so (unknown is not healthy; the annotation alone is never evidence).
"""

from __future__ import annotations

import logging

from drills.acceptance.judge import CheckResult, not_run
from drills.faults.switch.lldp import LldpTable

__all__ = ["CHECK", "claim", "evidence"]

log = logging.getLogger(__name__)

CHECK = "switch-port"


def claim(node: str, leaf: str, iface: str, table: LldpTable | None, why: str = "") -> CheckResult | None:
    """None when LLDP on `leaf` shows `node` on the annotated `iface`; else the no-go that says what it shows."""
    where = f"{leaf} {iface} (annotated for {node})"
    if table is None:
        return not_run(node, CHECK, f"{where}: LLDP not available ({why}): the port facing {node} is not confirmed "
                                    "by the fabric, and the annotation alone is not evidence")
    here, seen = table.on(iface), table.facing(node)
    if any(n in seen for n in here):
        return None
    rows = {"annotated": iface, "lldp_on_annotated": [n.to_dict() for n in here],
            "lldp_facing_node": [n.to_dict() for n in seen]}
    if seen:
        ports = ", ".join(n.local for n in seen)
        return CheckResult(node, CHECK, False, f"the annotation names {leaf} {iface}, but LLDP on {leaf} shows {node} "
                           f"on {ports} ({iface} faces {table.describe(iface)}; {table.source}): the node is cabled "
                           "to another port than its annotation says", rows, {}, "wrong_port",
                           evidence=evidence(table))
    if here:
        return CheckResult(node, CHECK, False, f"{where} faces {table.describe(iface)} by LLDP, and {leaf} does not see "
                           f"{node} on any port ({table.source}): the annotated port faces another host",
                           rows, {}, "wrong_port", evidence=evidence(table))
    return not_run(node, CHECK, f"LLDP on {leaf} shows no neighbour on {iface} and does not see {node} on any port "
                                f"({table.source}): the port facing {node} is not confirmed")


def evidence(table: LldpTable, iface: str | None = None) -> dict:
    """What the record keeps of the LLDP read: where it was read and (for a confirmed port) its row."""
    out: dict = {"lldp_source": table.source}
    if iface is not None:
        out["lldp"] = [n.to_dict() for n in table.on(iface)]
    return out
