"""The switch fabric as a twin component: one SSH server per switch of the profile, the client's
files in the state dir, and link events handed to the workloads through the hub.

twin.json gains `switches` (the inventory entries: name, host, port, username, key_file,
known_hosts, dialect, role, uplinks), `switch_inventory` (switches.yaml), `known_hosts` and
`switch_key` (the client's private key).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from drills.twin.workloads.hub import hub_for

__all__ = ["FabricComponent"]

log = logging.getLogger(__name__)


class FabricComponent:
    def __init__(self, twin: Any):
        self.twin = twin
        self.handle = None
        self._unsubscribe: Callable[[], None] | None = None

    @staticmethod
    def dialects(profile: Any) -> set[str]:
        """The switch OSes a twin of `profile` runs (its inventory's dialects), known before it starts."""
        return {s.dialect for s in profile.fabric.switches.values()} if profile is not None else set()

    async def start(self, twin: Any) -> dict | None:
        profile = twin.profile
        if profile is None or not profile.fabric.switches:
            return None
        from drills.twin.fabric import start_fabric

        specs = [{**s.model_dump(), "name": name} for name, s in profile.fabric.switches.items()]
        loop = asyncio.get_running_loop()
        # Key generation and binding block briefly; keep the loop free for the API server meanwhile.
        faults = profile.fabric.port_faults
        lossless = profile.fabric.pfc  # RoCE: PFC (and ECN) on every node-facing port, but a defect's
        lossy = {(leaf, iface) for leaf, s in profile.fabric.switches.items()
                 for node, iface in [*s.downlinks.items(), *((k.split("/")[0], p) for k, p in s.nics.items())]
                 if not lossless or node in faults.lossy_nodes}
        self.handle = await loop.run_in_executor(None, lambda: start_fabric(
            specs, twin.state_dir, clock=twin.clock, oper_stays_up=faults.oper_stays_up,
            cli_rejects_shutdown=faults.cli_rejects_shutdown, cli_answer_after_s=faults.answer_after,
            cli_apply_after_s=faults.apply_after,
            idle_uplinks=faults.idle_uplinks, lossy_ports=lossy, reshut_after_s=faults.reshut_after,
            reshut_end=faults.reshut_end, downlinks=_cabled(profile), nics=_rail_cables(profile), lldp_off=faults.lldp_off,
            stale_peers=faults.stale_peers))
        for leaf in faults.isolated_leaves:  # before the hub reads the leaves: they start cut off
            for uplink in profile.fabric.switches[leaf].uplinks:
                self.handle.fabric.set_admin(leaf, uplink.iface, False, source="twin profile: isolated leaf")
        self._unsubscribe = hub_for(twin).attach_fabric(self.handle, loop)
        for leaf, indexes in faults.down_at_start.items():  # a port left down before any drill (a defect)
            if leaf not in self.handle.fabric.switch_names:
                continue  # a leaf of another twin profile's fabric
            ups = self.handle.fabric.spec(leaf).uplinks
            for i in indexes:
                if i < len(ups):
                    self.handle.fabric.set_admin(leaf, ups[i].iface, False, source="left down before the drill")
        h = self.handle
        return {"switches": h.inventory, "switch_inventory": str(h.inventory_file), "known_hosts": str(h.known_hosts),
                "switch_key": str(h.key_file)}

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self.handle is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.handle.stop)
            self.handle = None


def _cabled(profile: Any) -> dict[str, dict[str, str]]:
    """Leaf → node → the port its NIC is really cabled to: the profile's downlinks, after defect miscabled-node."""
    from drills.twin.fabric.lldp import miscable

    moved = profile.fabric.port_faults.miscabled
    return {leaf: miscable(dict(s.downlinks), moved, [p for p in s.interfaces if p not in set(s.nics.values())])
            if moved else dict(s.downlinks) for leaf, s in profile.fabric.switches.items()}  # a free port: no NIC's


def _rail_cables(profile: Any) -> dict[str, dict[str, str]]:
    """Leaf → "node/NIC" → the port that NIC is really cabled to, after the defects (miscabled-node moves a node's
    first cable with its downlink; rail-swapped, nic-uncabled)."""
    from drills.twin.fabric.lldp import recable

    cabled = _cabled(profile)
    moved = {leaf: {p: cabled[leaf][n] for n, p in s.downlinks.items() if cabled[leaf].get(n, p) != p}
             for leaf, s in profile.fabric.switches.items()}
    faults = profile.fabric.port_faults
    return recable({leaf: dict(s.nics) for leaf, s in profile.fabric.switches.items()}, moved, faults.rail_swapped,
                   faults.uncabled, profile.rdma_devices_per_node())
