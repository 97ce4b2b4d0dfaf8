"""Training drill steps: the job runs, a node is lost, the job resumes — each step one call and one judgement."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from pytest_bdd import given, parsers, then, when

from drills.checks.checkpoint import TrainingMonitor, judge_left_node, judge_resumed
from drills.steps.common import duration_s, expect
from drills.timeline import judge_max, judge_recovery, lost_steps

__all__ = ["training_monitor", "training_recovery"]

log = logging.getLogger(__name__)

PRECONDITION_WAIT_S = 600.0  # cluster seconds a job may take to be running with a checkpoint
WAIT_MARGIN = 1.2  # wait past the target to measure how far over it a slow recovery is


@pytest.fixture
def training_monitor(drill, cluster, target_profile):
    monitor = TrainingMonitor(cluster, target_profile.workloads.training).start()
    try:
        yield monitor
    finally:
        monitor.close()


@pytest.fixture
def training_recovery(drill, training_monitor, training_baseline, lost_node, target_profile):
    """Measured once, when the first Then step needs it: waits until caught up, ended or past the target."""
    injected = datetime.fromisoformat(lost_node.injected_at.replace("Z", "+00:00"))
    target = drill.target_s or target_profile.slo.training_recovery_s
    recovery = training_monitor.recovery(training_baseline, injected, injected.timestamp() + target * WAIT_MARGIN,
                                         on_phase=drill.mark, on_wait=drill.waiting)
    drill.set_timeline(recovery.timeline)
    drill.note(lost_node=lost_node.node, fault_mode=lost_node.mode, **recovery.details())
    return recovery


@given(parsers.parse("the training job is running on at least {count:d} nodes"), target_fixture="training_baseline")
def job_running(count: int, training_monitor, drill):
    baseline = training_monitor.baseline(count, PRECONDITION_WAIT_S, need_checkpoint=False, on_wait=drill.waiting)
    drill.note(job=f"{baseline.namespace}/{baseline.job}", nodes_before=baseline.nodes)
    return baseline


@given("it has saved a checkpoint", target_fixture="training_baseline")
def has_checkpoint(training_monitor, training_baseline, drill):
    return training_monitor.baseline(len(training_baseline.workers), PRECONDITION_WAIT_S, need_checkpoint=True,
                                     on_wait=drill.waiting)


@when(parsers.parse("one GPU node running the job is lost by {mode}"), target_fixture="lost_node")
def lose_node(mode: str, node_fault, training_baseline, target_profile):
    from fixtures.injectors import DryRun

    node = target_profile.faults.node or training_baseline.nodes[0]
    try:
        return node_fault(node, mode)
    except DryRun as plan:
        pytest.skip(str(plan))


@then("the job leaves the lost node and is rescheduled")
def rescheduled(training_recovery, lost_node, drill):
    expect(drill.judge(judge_left_node(training_recovery, lost_node.node)))


@then("it resumes from its latest checkpoint")
def resumes(training_recovery, drill):
    expect(drill.judge(judge_resumed(training_recovery)))


@then(parsers.parse("no more than {budget:d} steps are lost"))
def steps_lost(budget: int, training_recovery, drill):
    lost = lost_steps(training_recovery.step_at_fault, training_recovery.resumed_step)
    expect(drill.judge(judge_max("lost steps", lost, budget, "steps")))


@then(parsers.parse("training recovers within {limit}"))
def recovers_within(limit: str, training_recovery, drill):
    expect(drill.judge(judge_recovery(training_recovery.timeline, duration_s(limit), subject="training",
                                      verb="resume")))
