"""Network drill steps: the job trains steadily, a leaf uplink is shut, NCCL and throughput are judged."""

from __future__ import annotations

import logging

import pytest
from pytest_bdd import given, parsers, then, when

from drills.checks.nccl import judge_job_health, judge_throughput, judge_transport
from drills.injectors.uplink_target import leaf_uplink, node_labels
from drills.steps.common import duration_s, expect
from drills.timeline import judge_recovery

__all__ = ["PRECONDITION_WAIT_S"]

log = logging.getLogger(__name__)

PRECONDITION_WAIT_S = 600.0  # cluster seconds the job may take to be running with a throughput baseline


@given(parsers.parse("the training job runs on at least {count:d} nodes with a steady throughput"),
       target_fixture="fabric_baseline")
def job_steady(count: int, nccl_monitor, drill):
    base = nccl_monitor.fabric_baseline(count, PRECONDITION_WAIT_S, on_wait=drill.waiting)
    drill.note(job=f"{base.training.namespace}/{base.training.job}", nodes_before=base.nodes,
               baseline_throughput=base.throughput and round(base.throughput, 2), throughput_unit=base.unit)
    return base


@when("one uplink of the leaf carrying the job is shut over SSH", target_fixture="dropped_uplink")
def drop_uplink(fabric_baseline, switches, switch_fault, cluster, target_profile):
    return _drop(fabric_baseline, switches, switch_fault, cluster, target_profile, None,
                 target_profile.faults.switch_transport)


@when(parsers.parse("one uplink of the {dialect} leaf carrying the job is shut over an SSH {transport} session"),
      target_fixture="dropped_uplink")
def drop_uplink_of(dialect: str, transport: str, fabric_baseline, switches, switch_fault, cluster, target_profile):
    return _drop(fabric_baseline, switches, switch_fault, cluster, target_profile, dialect, transport)


@then("NCCL keeps RDMA and never falls back to sockets")
def keeps_rdma(uplink_recovery, drill):
    expect(drill.judge(judge_transport(uplink_recovery)))


@then("the job reroutes around the failed uplink or restarts from its latest checkpoint")
def reroutes_or_restarts(uplink_recovery, drill):
    expect(drill.judge(judge_job_health(uplink_recovery)))


@then(parsers.parse("throughput is back to at least {percent:d} % of its baseline"))
def throughput_back(percent: int, uplink_recovery, drill):
    expect(drill.judge(judge_throughput(uplink_recovery, percent / 100)))


@then(parsers.parse("throughput recovers within {limit}"))
def throughput_recovers_within(limit: str, uplink_recovery, drill):
    ratio = uplink_recovery.ratio
    expect(drill.judge(judge_recovery(uplink_recovery.timeline, duration_s(limit), subject="training throughput",
                                      verb=f"get back to {ratio:.0%} of its baseline")))


def _drop(base, switches, switch_fault, cluster, profile, dialect: str | None, transport: str):
    from fixtures.injectors import DryRun

    switch, interface = leaf_uplink(profile, switches, node_labels(cluster, base.nodes), dialect)
    try:
        return switch_fault(switch, interface, transport)
    except DryRun as plan:
        pytest.skip(str(plan))
