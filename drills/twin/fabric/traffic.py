"""Interface counters: the traffic jobs put on the fabric, as a switch's `show interface` counts it.

A job tells the fabric how many bytes per second each of its leaves exchanges with the other leaves
(`carry`); a leaf spreads that over the uplinks of its ECMP group that are oper up (idle uplinks and
down links carry nothing), and the spine end of each cable sees the same. Counters integrate those
rates over the fabric's clock, piecewise: every link change and every new load first settles the
counters at the old rates, so a port counts exactly until the moment it went down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from drills.twin.fabric.topology import FabricEvent

__all__ = ["PortCounters", "Traffic", "PACKET_BYTES"]

log = logging.getLogger(__name__)

PACKET_BYTES = 4096  # RoCE v2 at MTU 4096: NCCL's bulk traffic is full-size packets


@dataclass(frozen=True)
class PortCounters:
    """One port as `show interface` reports it: totals since boot and the current rates."""

    in_packets: int
    out_packets: int
    in_bytes: int
    out_bytes: int
    in_bps: float  # bits per second
    out_bps: float
    in_pps: float  # packets per second
    out_pps: float


class Traffic:
    """Counters of every port of one fabric; thread-safe under the fabric's own lock."""

    def __init__(self, fabric) -> None:
        self.fabric = fabric
        self._loads: dict[str, dict[str, float]] = {}  # owner → leaf → bytes/s crossing its uplinks
        self._bytes: dict[tuple[str, str], float] = {}  # (switch, iface) → bytes each way since boot
        self._rate: dict[tuple[str, str], float] = {}  # bytes/s each way, as of the last settle
        self._at = fabric.now()
        fabric.on_change(self._on_event)

    def carry(self, owner: str, loads: dict[str, float]) -> None:
        """`owner` (a job) now puts loads[leaf] bytes/s across each leaf's uplinks ({} when it stops)."""
        loads = {leaf: rate for leaf, rate in loads.items() if rate > 0}
        with self.fabric.lock():
            if self._loads.get(owner, {}) == loads:
                return
            self._settle(self.fabric.now())
            if loads:
                self._loads[owner] = loads
            else:
                self._loads.pop(owner, None)
            self._rerate()

    def counters(self, switch: str, iface: str) -> PortCounters:
        with self.fabric.lock():
            self._settle(self.fabric.now())
            total, rate = self._bytes.get((switch, iface), 0.0), self._rate.get((switch, iface), 0.0)
        packets = int(total // PACKET_BYTES)
        return PortCounters(packets, packets, int(total), int(total), rate * 8, rate * 8, rate / PACKET_BYTES,
                            rate / PACKET_BYTES)

    # -- helpers -----------------------------------------------------------------------------------
    def _on_event(self, event: FabricEvent) -> None:
        """A link changed (called under the fabric's lock, after the change): settle up to its moment at
        the old rates, then spread the loads over what is up now."""
        self._settle(event.at)
        self._rerate()

    def _settle(self, now: float) -> None:
        dt = max(0.0, now - self._at)
        for port, rate in self._rate.items():
            self._bytes[port] = self._bytes.get(port, 0.0) + rate * dt
        self._at = max(self._at, now)

    def _rerate(self) -> None:
        fabric, rates = self.fabric, {}
        per_leaf: dict[str, float] = {}
        for loads in self._loads.values():
            for leaf, rate in loads.items():
                per_leaf[leaf] = per_leaf.get(leaf, 0.0) + rate
        for leaf, rate in per_leaf.items():
            if leaf not in fabric.leaves():
                continue
            up = [i for i in fabric.active_uplinks(leaf) if fabric.iface_state(leaf, i).oper]
            for iface in up:
                share = rate / len(up)
                rates[(leaf, iface)] = rates.get((leaf, iface), 0.0) + share
                peer = fabric.iface_state(leaf, iface).peer
                if peer is not None:
                    rates[peer] = rates.get(peer, 0.0) + share
        self._rate = rates
