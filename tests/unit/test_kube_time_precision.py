"""Kubernetes object times are whole seconds, the drill's stamps milliseconds (drills/core/kubetime.py): an event in
the same second as the drill's stamp may be after it. One test per place that compares the two — each fails
with the naive comparison (the object's truncated second read as "before")."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from drills.core.kubetime import may_be_after, not_before, surely_before
from drills.measure.job_health import job_health
from drills.measure.job_state import JobState
from drills.measure.stability import stability_window
from drills.verdicts.steady import restart_reading
from drills.verdicts.timeline import Timeline

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
FAULT = T0 + timedelta(milliseconds=700)  # the injection, stamped to the millisecond


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")  # metav1.Time: RFC 3339, whole seconds


def _pod(name: str, uid: str, node: str, scheduled: datetime, **status) -> dict:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": "1", **status.pop("meta", {})},
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(scheduled)}], **status}}


def test_the_rule_takes_an_event_in_the_stamps_second_as_possibly_after_it():
    second = T0  # 12:00:00Z, the moment somewhere in [12:00:00, 12:00:01)
    assert may_be_after(second, FAULT) and not surely_before(second, FAULT)
    assert surely_before(second, T0 + timedelta(seconds=1)) and not may_be_after(second, T0 + timedelta(seconds=1))
    assert not may_be_after(T0 + timedelta(milliseconds=200), FAULT)  # a time with a fraction is exact
    assert not_before(second, FAULT) == FAULT


def test_a_replacement_scheduled_in_the_faults_second_is_rescheduled():
    state = JobState()
    state.take_pod(_pod("w-0", "old", "gpu-train-01", T0 - timedelta(hours=1)), False, lambda: T0)
    state.take_pod(_pod("w-0", "new", "gpu-train-02", FAULT + timedelta(milliseconds=200)), False, lambda: T0)
    timeline = state.timeline(FAULT, {"old"}, 1)
    assert timeline.rescheduled == FAULT  # scheduled at 12:00:00.9, read 12:00:00: after the fault, shown at it


def test_the_step_at_the_loss_counts_a_line_logged_within_the_losss_second():
    state = JobState()
    gone = _pod("w-0", "old", "gpu-train-01", T0 - timedelta(hours=1),
                meta={"deletionTimestamp": _iso(T0 + timedelta(seconds=30)), "deletionGracePeriodSeconds": 30})
    state.take_pod(gone, False, lambda: T0)
    # the eviction at 12:00:00 (deletionTimestamp − grace, whole seconds); the job logged step 6110 at .400: the
    # eviction may have come after it, and the step at the loss is never taken lower than the job may have reached
    state.steps = [("old", T0 - timedelta(seconds=2), 6099, None), ("old", T0 - timedelta(seconds=1), 6100, None),
                   ("old", T0 + timedelta(milliseconds=400), 6110, None)]
    assert state.step_at_loss(FAULT, {"old"}, {"old"}) == 6110


def test_a_new_worker_stopped_in_the_recoverys_second_is_a_restart_in_the_window():
    state = JobState()
    recovered = T0 + timedelta(seconds=60, milliseconds=600)
    stop = _pod("w-0", "new", "gpu-train-02", T0, meta={"deletionTimestamp": _iso(T0 + timedelta(seconds=60)),
                                                        "deletionGracePeriodSeconds": 0})
    state.take_pod(stop, False, lambda: T0)
    state.steps = [("new", recovered, 6001, 100.0)]
    _, signs, _ = stability_window(state, [], Timeline(injected=FAULT, recovered=recovered), set(),
                                   recovered + timedelta(minutes=5))
    assert signs and "workers stopped 1 time(s)" in signs[0], signs


def test_a_container_exit_in_the_resumes_second_is_in_the_health_window():
    state = JobState()
    since = T0 + timedelta(seconds=100, milliseconds=300)  # the resume
    cs = {"name": "trainer", "restartCount": 1, "state": {"running": {}},
          "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                       "finishedAt": _iso(T0 + timedelta(seconds=100))}}}
    state.take_pod(_pod("w-1", "u1", "gpu-train-02", T0, containerStatuses=[cs]), False, lambda: T0)
    h = job_health(state, {}, {"u1"}, FAULT, since, since + timedelta(minutes=5), ())
    assert [e.reason for e in h.exits] == ["OOMKilled"], h.exits


def test_a_restart_in_the_reverts_second_is_after_the_revert():
    revert = T0 + timedelta(seconds=300, milliseconds=500)
    restart = T0 + timedelta(seconds=300)  # lastTransitionTime of the Restarting condition, whole seconds
    r = restart_reading(restart, "the job restarted", "jobs.batch.volcano.sh", revert + timedelta(minutes=2), 1800,
                        since=revert)
    assert r.ok is False, r
    # a restart in the second an earlier drill found the platform nominal again is not excused by it
    r = restart_reading(restart, "the job restarted", "jobs", T0 + timedelta(seconds=400), 1800,
                        verified=T0 + timedelta(seconds=300, milliseconds=200))
    assert r.ok is False, r
    r = restart_reading(restart, "the job restarted", "jobs", T0 + timedelta(seconds=400), 1800,
                        verified=T0 + timedelta(seconds=301))
    assert r.ok is True, r


def test_a_job_that_ended_in_the_recoverys_second_was_not_stable_after_it():
    state = JobState()
    recovered = T0 + timedelta(seconds=60, milliseconds=600)
    state.job = {"status": {"state": {"phase": "Failed"}}}
    state.job_left_running_at = T0 + timedelta(seconds=60)  # Volcano's lastTransitionTime, whole seconds
    stable_for, _, _ = stability_window(state, [], Timeline(injected=FAULT, recovered=recovered), set(),
                                        recovered + timedelta(minutes=5))
    assert stable_for == 0.0  # not five minutes of a job that had already ended
