"""A late tick must not skip the fabric event: on a busy CPU at 600× one reconcile can come minutes of twin
time after an uplink went down. The job must still live through the event (NCCL warnings, and on RoCE
without PFC the fall back to sockets) — a twin that slept through it would hand the drill a false PASS."""

from __future__ import annotations

from drills.twin.workloads.progress import LeafView
from drills.twin.workloads.training_job import Output
from tests.unit.jobsim_helpers import running_job as _sim


def _down_then_one_late_tick(sim, leaves, at: float, late_by: float) -> list[str]:
    leaf = sorted(leaves)[0]
    leaves[leaf] = LeafView(leaf, 3, 4, at)
    out = Output()
    sim.advance(at + late_by, out)
    return [text for _, _, text in out.lines]


def test_a_tick_long_after_the_uplink_went_down_still_lives_through_the_fabric_event(tmp_path):
    sim, truth, leaves = _sim(tmp_path, ["roce-no-pfc"])
    late_by = sim.fabric.convergence_delay + max(sim.fabric.rebalance_after, sim.fabric.convergence_delay) + 60
    lines = _down_then_one_late_tick(sim, leaves, 2000.0, late_by)
    kinds = [r["kind"] for r in truth.records()]
    assert "fabric_fault" in kinds and "rerouted" in kinds, kinds
    assert kinds.index("fabric_fault") < kinds.index("rerouted")
    assert sim.run.transport == "Socket"  # no PFC: the fabric event cost the lossy ranks their RDMA
    assert any("NET/Socket" in line for line in lines), lines[-20:]


def test_with_pfc_the_same_late_tick_keeps_rdma(tmp_path):
    sim, truth, leaves = _sim(tmp_path)
    _down_then_one_late_tick(sim, leaves, 2000.0, 3600.0)
    assert "fabric_fault" in [r["kind"] for r in truth.records()]
    assert sim.run.transport == "IB"
