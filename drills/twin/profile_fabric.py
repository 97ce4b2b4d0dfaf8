"""The fabric part of a twin profile: leaf/spine switches, their CLI dialects, cabling and how
traffic behaves when an uplink drops (reroute after convergence, reduced throughput, PFC).

A profile may list each leaf's uplinks; when it does not, `uplinks_per_leaf` cables leaf j's last
ports round-robin to the spines. Nodes of a pool attached to a leaf take its first ports, so
`Fabric.wire` leaves every switch with a concrete interface list, uplinks and downlinks, the shape
`drills.twin.fabric.topology.SwitchSpec.from_obj` reads.
"""

from __future__ import annotations

import functools
import logging
import math
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, field_validator, model_validator

from drills.core import datafiles
from drills.twin.profile_types import Duration, Fraction, Named, Strict

__all__ = ["Uplink", "Switch", "Fabric", "known_dialects", "port_name"]

log = logging.getLogger(__name__)

_DIALECT_DIR = Path(__file__).parent / "fabric" / "dialects"
# Fallback when the dialect files are absent: port naming per vendor, n counted from 1.
_PORTS = {"sonic": ("Ethernet{lane}", 8), "nxos": ("Ethernet1/{n}", 1), "eos": ("Ethernet{n}/1", 1), "onyx": ("Eth1/{n}", 1),
          "nvue": ("swp{n}", 1), "cumulus": ("swp{n}", 1)}


@functools.cache
def _dialect_files() -> dict[str, dict]:
    out = {}
    for path in sorted(_DIALECT_DIR.glob("*.yaml")) if _DIALECT_DIR.is_dir() else ():
        try:
            data = datafiles.load_file(path) or {}
        except yaml.YAMLError:
            continue  # the fabric's own loader reports a broken dialect file
        out[str(data.get("name", path.stem))] = data
    return out


def known_dialects() -> list[str]:
    """Dialects the twin's switches speak: the fabric's dialect files, else the built-in table."""
    return sorted(_dialect_files()) or sorted(_PORTS)


def port_name(dialect: str, n: int) -> str:
    """The name of front port `n` (from 1) as the dialect spells it (SONiC counts lanes)."""
    data = _dialect_files().get(dialect)
    fmt, lanes = (data.get("port_name"), int(data.get("lanes_per_port", 1))) if data else _PORTS.get(dialect, ("Ethernet{n}", 1))
    return str(fmt).format(n=n, lane=(n - 1) * lanes)


class Uplink(Strict):
    """A leaf → spine cable: `iface` on the leaf, `peer_iface` on spine `peer`."""

    iface: str
    peer: str
    peer_iface: str


class Switch(Strict):
    name: str
    role: Literal["leaf", "spine"] = "leaf"
    dialect: str = "sonic"
    ports: int = Field(default=32, ge=1)  # grown when cabling needs more
    interfaces: list[str] = []
    uplinks: list[Uplink] = []
    downlinks: dict[str, str] = {}  # node name → leaf interface
    # the rails this leaf carries in a rail-optimised fabric (NIC i of every node of the scalable unit on the leaf
    # of rail i); empty: the leaf carries its nodes' single cable, as before rails
    rails: list[int] = []
    nics: dict[str, str] = {}  # "node/NIC" → leaf interface, for nodes cabled per NIC (filled by Fabric.wire)

    @field_validator("dialect")
    @classmethod
    def _known(cls, value: str) -> str:
        known = known_dialects()
        if value not in known:
            raise ValueError(f"unknown switch dialect {value!r}; use one of {', '.join(known)}")
        return value


class PortFaults(Strict):
    """How the switches' ports misbehave (the fabric defects; healthy: all off)."""

    oper_stays_up: bool = False  # `shutdown` accepted, admin down, but the link stays oper up
    cli_rejects_shutdown: bool = False  # the CLI refuses `shutdown` with the OS's own error text
    answer_after: Duration = 0.0  # a line that changed a port is answered this long after the change
    apply_after: Duration = 0.0  # a line that changes a port is acted on this long after it arrives, then answered
    idle_uplinks: int = Field(default=0, ge=0)  # each leaf's first N uplinks are up but outside ECMP: no traffic
    lossy_nodes: list[str] = []  # the leaf ports facing these nodes run without PFC and ECN (a missed RoCE config)
    reshut_after: Duration | None = None  # an uplink brought up over SSH is shut again this long after (reshut.py)
    reshut_end: Literal["near", "far"] = "near"  # ... on the switch that brought it up, or on the cable's far end
    isolated_leaves: list[str] = []  # these leaves' uplinks are down from the start: cut off from the spines
    # leaf → indexes of its uplinks that are admin down when the twin starts (shut for maintenance and never
    # brought back): the fabric is degraded before any drill (defect uplink-down-before-drill)
    down_at_start: dict[str, list[int]] = {}
    # these nodes' cables are moved (each to the next one's leaf port; one alone to a free port): their labels and
    # leaf-port annotations still name the planned ports, LLDP tells where they are (defect miscabled-node)
    miscabled: list[str] = []
    lldp_off: bool = False  # the switches run no LLDP (defect lldp-disabled)
    rail_swapped: list[str] = []  # these nodes' NIC 3 and NIC 4 cables are swapped (defect rail-swapped)
    uncabled: dict[str, list[str]] = {}  # node → its NICs with no cable in any leaf (defect nic-uncabled)
    stale_peers: bool = False  # the switch inventory names each uplink's far end wrongly (defect stale-uplink-peers)


class Fabric(Strict):
    """Switches and the traffic model the training workload follows when links change."""

    switches: Named(Switch) = {}
    uplinks_per_leaf: int = Field(default=2, ge=0)
    convergence_delay: Duration = 15.0  # rerouting around a dead uplink (ECMP/BGP withdraw)
    rebalance_after: Duration = 120.0  # until traffic is spread over what is left
    degraded_throughput_factor: Fraction = 0.6  # after convergence, before rebalance
    rebalanced_throughput_factor: Fraction = 0.95
    pfc: bool = True  # lossless RoCE; without it NCCL re-inits on NET/Socket after a fabric event
    # defect late-socket-fallback: after the job recovered from a fabric event, NCCL re-inits on NET/Socket
    # this long later (a RoCE path that came back half-configured); None: it stays on RDMA
    socket_fallback_after_recovery: Duration | None = None
    ecn: bool = True
    mtu: int = Field(default=9100, ge=1280)
    port_faults: PortFaults = PortFaults()

    @property
    def leaves(self) -> list[str]:
        return [n for n, s in self.switches.items() if s.role == "leaf"]

    @property
    def spines(self) -> list[str]:
        return [n for n, s in self.switches.items() if s.role == "spine"]

    @model_validator(mode="after")
    def _spines_for_uplinks(self) -> "Fabric":
        if self.leaves and not self.spines and self.uplinks_per_leaf:
            raise ValueError("fabric has leaves but no spine; add a switch with role: spine or set uplinks_per_leaf: 0")
        return self

    def downlink_ports(self) -> dict[str, str]:
        return {node: iface for s in self.switches.values() for node, iface in s.downlinks.items()}

    def rail_leaf(self, home: str, rail: int) -> str | None:
        """The leaf NIC `rail` of a node homed on `home` is cabled to: `home` when it carries that rail, else the
        leaf that does (rail-optimised); None when `home` declares no rails (one cable per node)."""
        if not self.switches[home].rails:
            return None
        if rail in self.switches[home].rails:
            return home
        return next((n for n in self.leaves if rail in self.switches[n].rails), None)

    def wire(self, nodes_per_leaf: dict[str, list[str]], nics_of: dict[str, list[str]] | None = None) -> None:
        """Give every switch concrete interfaces, uplinks (unless listed) and node downlinks. A node homed on a
        leaf that declares `rails` is cabled per NIC (`nics_of`: node → its RDMA NICs, NIC i on rail i): each NIC
        on its rail's leaf, the node's own leaf port (`downlinks`) being its first NIC's there."""
        leaves, spines = self.leaves, self.spines
        per_spine = math.ceil(self.uplinks_per_leaf / len(spines)) if spines else 0
        spine_ports = len(leaves) * per_spine
        cables: dict[str, list[tuple[str, str | None]]] = {n: [] for n in leaves}  # leaf → (node, NIC) in port order
        for leaf_name in leaves:
            for node in nodes_per_leaf.get(leaf_name, []):
                nics = (nics_of or {}).get(node) or []
                if not self.switches[leaf_name].rails or not nics:
                    cables[leaf_name].append((node, None))
                    continue
                for i, nic in enumerate(nics):
                    cables[self.rail_leaf(leaf_name, i) or leaf_name].append((node, nic))
        for j, leaf_name in enumerate(leaves):
            leaf = self.switches[leaf_name]
            here = cables[leaf_name]
            n_up = len(leaf.uplinks) or self.uplinks_per_leaf
            size = max(leaf.ports, len(here) + n_up)
            leaf.nics = {f"{node}/{nic}": port_name(leaf.dialect, i + 1) for i, (node, nic) in enumerate(here) if nic}
            leaf.downlinks = {}
            for i, (node, _nic) in enumerate(here):
                if node in nodes_per_leaf.get(leaf_name, []):
                    leaf.downlinks.setdefault(node, port_name(leaf.dialect, i + 1))
            if not leaf.uplinks:
                leaf.uplinks = [
                    Uplink(iface=port_name(leaf.dialect, size - n_up + k + 1), peer=spines[k % len(spines)],
                           peer_iface=port_name(self.switches[spines[k % len(spines)]].dialect,
                                                j * per_spine + k // len(spines) + 1))
                    for k in range(n_up)
                ]
            if not leaf.interfaces:
                leaf.interfaces = [port_name(leaf.dialect, n) for n in range(1, size + 1)]
        for name in spines:
            spine = self.switches[name]
            if not spine.interfaces:
                spine.interfaces = [port_name(spine.dialect, n) for n in range(1, max(spine.ports, spine_ports) + 1)]
