"""The twin's LLDP: each switch port's neighbour as the cables really run, not as labels or inventories say.

`neighbours(specs, downlinks)` is the fabric's truth: both ends of every leaf↔spine cable, and each node on
the leaf port its NIC is really cabled to (`downlinks`, after a `miscabled` defect moved cables); on rail
leaves each of its NICs on its own port (`nics`, after rail-swapped / nic-uncabled moved or pulled cables). A switch
answers its dialect's LLDP command (`show_lldp` action) from it: a row per port that is admin and oper up
and has a neighbour (LLDP frames only cross a live link), or the dialect's `lldp_disabled` answer when LLDP
is off (defect lldp-disabled). A node sends what lldpd on a server sends: its host name as System Name, its
NIC's MAC as Port ID, the NIC's name as Port Description.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["Peer", "neighbours", "netdev", "recable", "rows", "miscable", "NODE_NIC"]

log = logging.getLogger(__name__)

NODE_NIC = "ens1f0np0"  # the node's first RoCE port as the kernel names a ConnectX port


@dataclass(frozen=True)
class Peer:
    """The far end of one port's cable, as its LLDP frames describe it."""

    system: str
    port_id: str
    port_descr: str
    caps: str  # enabled capabilities: BR for a switch, none shown for a server


def neighbours(specs: Iterable[Any], downlinks: dict[str, dict[str, str]],
               nics: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, Peer]]:
    """switch → its port → the peer at the cable's far end (uplinks both ways; nodes on their leaf ports). `nics`
    (leaf → "node/NIC" → port) are the rail cables: each port shows its NIC's own MAC (the one the node's ibstat
    encodes in the port's GUID) and netdev name."""
    from drills.twin.workloads.accept_tools import nic_mac

    out: dict[str, dict[str, Peer]] = {}
    for s in specs:
        for u in s.uplinks:
            out.setdefault(s.name, {})[u.iface] = Peer(u.peer, u.peer_iface, u.peer_iface, "BR")
            out.setdefault(u.peer, {})[u.peer_iface] = Peer(s.name, u.iface, u.iface, "BR")
    for leaf, cabled in downlinks.items():
        for node, iface in cabled.items():
            out.setdefault(leaf, {})[iface] = Peer(node, _mac(node), NODE_NIC, "")
    for leaf, cabled in (nics or {}).items():
        for key, iface in cabled.items():
            node, nic = key.split("/", 1)
            out.setdefault(leaf, {})[iface] = Peer(node, nic_mac(node, nic), netdev(nic), "")
    return out


def netdev(nic: str) -> str:
    """The kernel's name of RDMA device `nic`'s port (mlx5_3 → ens4f0np0: one single-port ConnectX per slot)."""
    n = int("".join(c for c in nic if c.isdigit()) or 0)
    return f"ens{n + 1}f0np0"


def recable(nics: dict[str, dict[str, str]], moved: dict[str, dict[str, str]], swapped: Iterable[str],
            uncabled: dict[str, list[str]], nics_of: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """The rail cables after the defects: a node's first cable moved with its downlink (`moved`: leaf → old port →
    new port, defect miscabled-node), NIC 3 and NIC 4 of each `swapped` node trading ports (rail-swapped), the
    `uncabled` NICs gone from every leaf (nic-uncabled)."""
    out = {leaf: {k: moved.get(leaf, {}).get(p, p) for k, p in cabled.items()} for leaf, cabled in nics.items()}
    where = {k: leaf for leaf, cabled in out.items() for k in cabled}
    for node in swapped:
        names = nics_of.get(node) or []
        if len(names) < 5:
            continue
        a, b = f"{node}/{names[3]}", f"{node}/{names[4]}"
        if a in where and b in where:
            la, lb = where[a], where[b]
            pa, pb = out[la].pop(a), out[lb].pop(b)
            out[lb][a], out[la][b] = pb, pa
    for node, gone in uncabled.items():
        for nic in gone:
            for cabled in out.values():
                cabled.pop(f"{node}/{nic}", None)
    return out


def miscable(downlinks: dict[str, str], nodes: list[str], free: Iterable[str] = ()) -> dict[str, str]:
    """The downlinks with the cables of `nodes` moved (defect miscabled-node): each takes the next one's port
    in turn; a single node takes the leaf's first free port. Labels and annotations keep the planned ports."""
    moved = [n for n in nodes if n in downlinks]
    out = dict(downlinks)
    if len(moved) == 1:
        spare = next((p for p in free if p not in downlinks.values()), None)
        if spare is not None:
            out[moved[0]] = spare
    elif len(moved) > 1:
        ports = [downlinks[n] for n in moved]
        for k, node in enumerate(moved):
            out[node] = ports[(k + 1) % len(moved)]
    return out


def rows(cli: Any, detail: str) -> list[str]:
    """One rendered `detail` row per live port with a neighbour, in the switch's port order."""
    table = cli.neighbours or {}
    out = []
    for iface in cli.fabric.interfaces(cli.switch):
        peer = table.get(iface)
        st = cli.fabric.iface_state(cli.switch, iface)
        if peer is None or not (st.admin and st.oper):
            continue
        ctx = cli.context(iface)
        ctx.update(remote_system=peer.system, remote_port=peer.port_id, remote_descr=peer.port_descr,
                   remote_caps=peer.caps or "", remote_chassis=_mac(peer.system), port_digits=re.sub(r"^[A-Za-z]+\s*", "", iface))
        out.append(cli.dialect.details[detail].format(**ctx).rstrip())
    return out


def _mac(node: str) -> str:
    """A stable, locally administered MAC for a node's NIC (what lldpd sends as its Port ID)."""
    digest = hashlib.sha256(node.encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))
