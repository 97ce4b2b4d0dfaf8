"""The noisy neighbour's evidence of effect (issue 30, class 3): "no serving replica evicted" counts only once the
burst contested the serving replicas' GPUs — a replica disrupted, a burst pod on a serving node, or a burst pod the
scheduler could not place. A burst that fits in the free GPUs is inconclusive and names where each job went."""

from __future__ import annotations

from drills.measure.neighbour import BurstJob, Disruption, NeighbourOutcome
from drills.verdicts.neighbour import judge_burst_effect

SERVING = ("gpu-infer-01", "gpu-infer-02")
NO_GPU = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."


def _outcome(jobs, disrupted=()) -> NeighbourOutcome:
    return NeighbourOutcome(desired=2, before={"r-0": "u0", "r-1": "u1"}, disrupted=tuple(disrupted), min_available=2,
                            jobs=tuple(jobs), queue="training", serving_nodes=SERVING)


def test_a_burst_that_fits_in_the_free_gpus_is_inconclusive_naming_where_it_ran():
    verdict = judge_burst_effect(_outcome([BurstJob("burst-0", "Running", ("gpu-train-05",)),
                                           BurstJob("burst-1", "Running", ("gpu-train-06",))]))
    assert verdict.inconclusive and not verdict.passed and verdict.name == "fault effect"
    assert "never contested the serving replicas' GPUs" in verdict.reason
    assert "burst-0 Running on gpu-train-05" in verdict.reason and "gpu-infer-01, gpu-infer-02" in verdict.reason


def test_a_burst_that_never_reached_the_scheduler_is_inconclusive():
    verdict = judge_burst_effect(_outcome([BurstJob("burst-0", "Pending", ())]))
    assert verdict.inconclusive and "burst-0 Pending on no node" in verdict.reason
    assert judge_burst_effect(_outcome([])).inconclusive


def test_a_burst_pod_left_without_gpus_contested_them():
    verdict = judge_burst_effect(_outcome([BurstJob("burst-0", "Running", ("gpu-train-03",)),
                                           BurstJob("burst-1", "Pending", (), {"burst-1-worker-0": NO_GPU})]))
    assert verdict.passed and not verdict.inconclusive
    assert "1 burst pod(s) found no free GPUs" in verdict.reason and NO_GPU in verdict.reason


def test_a_burst_pod_on_a_serving_node_or_a_disrupted_replica_contested_them():
    assert judge_burst_effect(_outcome([BurstJob("burst-0", "Running", ("gpu-infer-02",))])).passed
    gone = Disruption("r-0", "u0", "PreemptionByScheduler", "", 3.0)
    verdict = judge_burst_effect(_outcome([BurstJob("burst-0", "Running", ("gpu-train-05",))], [gone]))
    assert verdict.passed and "1 serving replica(s) disrupted" in verdict.reason


def test_a_burst_pod_left_without_gpus_proves_nothing_when_no_serving_node_could_take_it():
    """Red team, wave 8: the serving nodes were cordoned during the drill, so the scheduler never weighed them; burst
    pods left without GPUs ("2 node(s) were unschedulable, 6 Insufficient nvidia.com/gpu") were read as contesting the
    serving GPUs: PASS for a platform with no defence left. A waiting pod counts only while a serving node was a
    candidate; with one open it still does."""
    waiting = BurstJob("burst-1", "Pending", (), {"burst-1-worker-0": "0/8 nodes are available: 2 node(s) were "
                                                                       "unschedulable, 6 Insufficient nvidia.com/gpu."})
    closed = _outcome([waiting])
    closed.closed.update({n: "cordoned (spec.unschedulable)" for n in SERVING})
    verdict = judge_burst_effect(closed)
    assert verdict.inconclusive and "every serving node was out of its reach" in verdict.reason
    assert "gpu-infer-01 cordoned (spec.unschedulable)" in verdict.reason
    one_open = _outcome([waiting])
    one_open.closed["gpu-infer-01"] = "cordoned (spec.unschedulable)"
    assert judge_burst_effect(one_open).passed
