"""A twin that learns late that a worker was told to stop (a starved event loop at 600×: minutes of twin time
between the deletion request and the reconcile) must end the run at the stop. Before, it trained on to the
moment it noticed and saved a checkpoint no log line showed; the new workers resumed from it while the drill,
which had read the stopped workers' logs to their end, knew an older one (CI: resumed 7500, latest 6000)."""

from __future__ import annotations

from drills.core.clock import to_iso
from drills.twin.workloads.training import _stopped_at, advance_to_stop
from drills.twin.workloads.training_job import Output
from tests.unit.jobsim_helpers import T0, running_job


def _running(tmp_path):
    sim, truth, _ = running_job(tmp_path)
    return sim, truth


def _saves_after(truth, t: float) -> list[int]:
    return [r["step"] for r in truth.records() if r["kind"] == "checkpoint_saved" and r["at"] > t]


def test_a_stop_learnt_late_ends_the_run_at_the_stop_with_no_save_after_it(tmp_path):
    sim, truth = _running(tmp_path)
    stopped = sim.progress.t + 5.0
    late = stopped + 30 * 60.0  # more than four checkpoint intervals of this job
    out = Output()
    until = advance_to_stop(sim, late, stopped, out)
    sim.end_run(until, "pod_terminating", out, lost={next(iter(sim.run.pods))})
    assert until == stopped
    assert _saves_after(truth, stopped) == [] and max(t for t, _, _ in out.lines) <= stopped
    fault = [r for r in truth.records() if r["kind"] == "fault"][-1]
    assert fault["at"] == stopped


def test_the_same_late_tick_without_a_stop_trains_on(tmp_path):  # the construction above is not vacuous
    sim, truth = _running(tmp_path)
    start = sim.progress.t
    advance_to_stop(sim, start + 30 * 60.0, None, Output())
    assert _saves_after(truth, start)


def test_a_stop_is_never_placed_before_what_is_already_written(tmp_path):
    sim, _ = _running(tmp_path)
    written = sim.progress.t
    assert advance_to_stop(sim, written + 60, written - 120, Output()) == written


def test_the_stop_is_the_deletion_request_or_the_containers_finish_never_before_it():
    """Stamps carry whole seconds: a request at T0 + 0.7 reads T0; the stop is the end of that second, so a
    fault is never placed before the request (CI: a fault recorded before the test's own DELETE)."""
    deleting = {"metadata": {"deletionTimestamp": to_iso(T0 + 0.7 + 30), "deletionGracePeriodSeconds": 30}}
    assert T0 + 0.7 <= _stopped_at(deleting, default=T0 + 99) == T0 + 1
    finished = {"metadata": {}, "status": {"containerStatuses": [
        {"state": {"terminated": {"exitCode": 1, "finishedAt": to_iso(T0 + 7.2)}}}]}}
    assert _stopped_at(finished, default=T0 + 99) == T0 + 8
    assert _stopped_at({"metadata": {}, "status": {}}, default=T0 + 99) == T0 + 99
