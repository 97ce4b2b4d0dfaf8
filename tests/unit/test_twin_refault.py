"""The twin's re-faulters, the defects that undo a drill's revert: a port shut again after `no shutdown`
(drills/twin/fabric/reshut.py) and a node-health agent's notion of a lost node (controllers/healthagent.py)."""

from __future__ import annotations

import time

from drills.core.clock import DilatedClock
from drills.twin.controllers.healthagent import lost
from drills.twin.fabric import Fabric
from drills.twin.fabric.reshut import PortReshut
from tests.unit.test_fabric_topology import SPECS

SSH = "ssh:sonic"


def _settle(fabric: Fabric, wall_s: float = 0.3) -> None:
    time.sleep(wall_s)  # the reshut's timer: 20 twin seconds at 600x are 33 ms


def test_an_uplink_brought_up_over_ssh_is_shut_again_on_the_chosen_end():
    for end, victim in (("near", ("leaf1", "Ethernet8")), ("far", ("spine1", "Ethernet1/1"))):
        fabric = Fabric(SPECS, clock=DilatedClock(scale=600.0))
        reshut = PortReshut(fabric, 20.0, end)
        try:
            fabric.set_admin("leaf1", "Ethernet8", False, source=SSH)
            fabric.set_admin("leaf1", "Ethernet8", True, source=SSH)
            assert fabric.iface_state("leaf1", "Ethernet8").oper  # the revert took, for now
            _settle(fabric)
            assert not fabric.iface_state(*victim).admin, end
            assert not fabric.iface_state("leaf1", "Ethernet8").oper  # either end down: the cable is down
        finally:
            reshut.stop()


def test_a_port_never_shut_over_ssh_is_left_alone_and_a_port_is_reshut_once():
    fabric = Fabric(SPECS, clock=DilatedClock(scale=600.0))
    reshut = PortReshut(fabric, 20.0)
    try:
        fabric.set_admin("leaf1", "Ethernet16", False, source="test")  # not over SSH: not the drill's
        fabric.set_admin("leaf1", "Ethernet16", True, source=SSH)
        fabric.set_admin("leaf1", "Ethernet8", False, source=SSH)
        fabric.set_admin("leaf1", "Ethernet8", True, source=SSH)
        _settle(fabric)
        fabric.set_admin("leaf1", "Ethernet8", True, source=SSH)  # brought up again: it stays up now
        _settle(fabric)
        assert fabric.iface_state("leaf1", "Ethernet16").admin and fabric.iface_state("leaf1", "Ethernet8").admin
    finally:
        reshut.stop()


def test_a_node_is_lost_when_cordoned_tainted_noexecute_gpu_unhealthy_or_not_ready():
    ready = {"type": "Ready", "status": "True"}
    healthy = {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, "status": {"conditions": [ready]}}
    assert not lost(healthy)
    assert lost({**healthy, "spec": {"unschedulable": True}})
    assert lost({**healthy, "spec": {"taints": [{"key": "gpu-drills.io/node-loss", "effect": "NoExecute"}]}})
    assert lost({"status": {"conditions": [ready, {"type": "GPUHealthy", "status": "False"}]}})
    assert lost({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
