"""Every rail NIC of a node on its own leaf port, as the fabric's LLDP says: the per-NIC half of the switch-port check.

A GPU server has one compute NIC per rail (8 on an HGX H100/H200/B200), each cabled to its rail's leaf in a
rail-optimised fabric. The node's annotation names one port; judging that one says nothing of the other seven.
So the NICs come from the node itself — the rdma check's `ibstat` (each RoCE port's GUID is the modified EUI-64 of
its MAC, which lldpd on the server sends as its LLDP Port ID) — and the leaves' LLDP tables say where each MAC is:

- a NIC seen on no leaf port → `missing_nic` (uncabled, a dead link, another cable in its place);
- two NICs of the node on one leaf port → `wrong_port` (a port carries one cable: the table cannot tell them apart);
- NIC i on a leaf that does not carry rail i (the inventory's `rails`; a fabric that declares none: the node's own
  leaf) → `wrong_port` (swapped rail cables: NCCL's rings cross the spines on every step);
- a NIC's MAC on a port whose LLDP neighbour names another host → `wrong_node` (the node reports another machine's);
- every NIC on its rail's leaf → each such port judged like the annotated one (speed, MTU, PFC/ECN, errors).

An InfiniBand port sends no LLDP (its fabric is the subnet manager's): only Ethernet (RoCE) ports are placed here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from drills.faults.switch.lldp import LldpTable, Neighbour, same_host

__all__ = ["NicPlace", "port_macs", "mac_key", "place", "rail_of"]

log = logging.getLogger(__name__)

_CA = re.compile(r"^CA '(?P<ca>[^']+)'")
_PORT_GUID = re.compile(r"^\s*Port GUID:\s*0x(?P<g>[0-9a-fA-F]{16})\s*$")
_LAYER = re.compile(r"^\s*Link layer:\s*(?P<l>\S+)")


def port_macs(ibstat_text: str) -> dict[str, str]:
    """CA → its RoCE port's MAC, from `ibstat`'s Port GUID (modified EUI-64: bytes 3-4 ff:fe, the
    universal/local bit of byte 0 flipped; tests/data/real/accept/ibstat-roce-one-port-down.txt: Port GUID
    0x5aa2e1fffedae626 ↔ MAC 58:a2:e1:da:e6:26). InfiniBand ports and GUIDs of another shape are left out."""
    out: dict[str, str] = {}
    ca, guid = None, None
    for line in ibstat_text.splitlines():
        if m := _CA.match(line.strip()):
            ca, guid = m["ca"], None
        elif (m := _PORT_GUID.match(line)) and ca is not None:
            guid = m["g"].lower()
        elif (m := _LAYER.match(line)) and ca is not None and guid is not None:
            if m["l"] == "Ethernet" and guid[6:10] == "fffe":
                b = bytes.fromhex(guid)
                out.setdefault(ca, ":".join(f"{x:02x}" for x in (b[0] ^ 0x02, b[1], b[2], b[5], b[6], b[7])))
            guid = None
    return out


def mac_key(text: str) -> str | None:
    """A MAC in any of the switches' spellings (58:a2:e1:da:e6:26, 58a2.e1da.e626, 58-A2-…) as 12 hex digits."""
    digits = re.sub(r"[^0-9a-f]", "", text.lower())
    return digits if len(digits) == 12 and re.fullmatch(r"[0-9a-fA-F:.\-\s]+", text.strip()) else None


def rail_of(nics: list[str]) -> dict[str, int]:
    """NIC → its rail: its position among the node's compute NICs in natural order (mlx5_2 before mlx5_10)."""
    def key(name: str) -> tuple:
        return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
    return {nic: i for i, nic in enumerate(sorted(nics, key=key))}


@dataclass(frozen=True)
class NicPlace:
    """Where one NIC is, and what is wrong with it (`failure` None: on its rail's leaf, alone on its port)."""

    nic: str
    mac: str
    rail: int
    leaf: str | None = None
    port: str | None = None
    failure: str | None = None  # missing_nic | wrong_port | wrong_node
    why: str = ""

    def to_dict(self) -> dict:
        return {"nic": self.nic, "mac": self.mac, "rail": self.rail, "leaf": self.leaf, "port": self.port,
                "failure": self.failure, "why": self.why}


def place(node: str, home: str | None, macs: dict[str, str], tables: dict[str, LldpTable],
          rails: dict[str, list[int]]) -> list[NicPlace]:
    """Each of `node`'s NICs (`macs`: NIC → MAC) placed by the leaves' LLDP `tables` (leaf → table read in this
    run), judged against `rails` (leaf → the rails it carries; none declared anywhere: every NIC on `home`)."""
    seen: dict[str, list[tuple[str, Neighbour]]] = {}  # mac key → (leaf, row) showing it
    for leaf, table in sorted(tables.items()):
        for row in table.neighbours:
            key = mac_key(row.port_id)
            if key is not None:
                seen.setdefault(key, []).append((leaf, row))
    declared = any(rails.values())
    rail = rail_of(list(macs))
    where: dict[str, NicPlace] = {}
    for nic, mac in sorted(macs.items(), key=lambda kv: rail[kv[0]]):
        hits = seen.get(mac_key(mac) or "", [])
        i = rail[nic]
        if not hits:
            read = ", ".join(sorted(tables)) or "no leaf"
            where[nic] = NicPlace(nic, mac, i, failure="missing_nic",
                                  why=f"{nic} (MAC {mac}, rail {i}) is seen by LLDP on no leaf port ({read} read): "
                                      "uncabled, its link dead, or another cable in its place")
            continue
        leaf, row = hits[0]
        p = NicPlace(nic, mac, i, leaf, row.local)
        if not same_host(row.system, node):  # the MAC the node reports is cabled as another host's NIC
            where[nic] = NicPlace(nic, mac, i, leaf, row.local, "wrong_node",
                                  f"{nic} (MAC {mac}) is on {leaf} {row.local}, whose LLDP neighbour names itself "
                                  f"{row.system}, not {node}: the NICs {node} reports are another machine's")
            continue
        ok = (i in rails.get(leaf, [])) if declared else (home is None or leaf == home)
        if not ok:
            carries = (f"a leaf of rail{'s' if len(rails.get(leaf, [])) != 1 else ''} "
                       f"{','.join(map(str, rails.get(leaf, []))) or 'none'}" if declared else f"not {node}'s leaf {home}")
            want = ", ".join(n for n, r in sorted(rails.items()) if i in r) if declared else home
            p = NicPlace(nic, mac, i, leaf, row.local, "wrong_port",
                         f"{nic} (MAC {mac}, rail {i}) is on {leaf} {row.local}, {carries} (rail {i} is {want or 'on no leaf'}): "
                         "its cable is in another rail's leaf")
        where[nic] = p
    by_port: dict[tuple[str, str], list[str]] = {}
    for p in where.values():
        if p.leaf is not None:
            by_port.setdefault((p.leaf, p.port or ""), []).append(p.nic)
    for (leaf, port), nics in by_port.items():
        if len(nics) > 1:
            for nic in nics:
                p = where[nic]
                where[nic] = NicPlace(p.nic, p.mac, p.rail, leaf, port, "wrong_port",
                                      f"{' and '.join(sorted(nics))} of {node} are both seen on {leaf} {port}: one port, "
                                      "one cable — the table cannot tell which NIC the port carries")
    return sorted(where.values(), key=lambda p: p.rail)
