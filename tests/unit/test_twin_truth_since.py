"""A truth record made at the instant a caller read the clock is `since` that reading: the twin's clock holds while
the twin works, so what a request caused is stamped at the very time read before it (the no-restart-policy test
lost its fault record to the millisecond rounding of `at`)."""

from __future__ import annotations

from drills.core.clock import DilatedClock
from drills.twin.workloads.truth import Truth


def test_a_record_at_the_instant_read_is_since_it_and_one_before_is_not():
    truth = Truth(DilatedClock(scale=1.0))
    read = 1_796_477_030.402482  # `at` shows 1796477030.402: earlier than the reading
    truth.record("training", "ai-platform/job", "checkpoint_saved", at=read - 0.0002)
    truth.record("training", "ai-platform/job", "fault", at=read)
    assert [r["kind"] for r in truth.records(subject="ai-platform/job", since=read)] == ["fault"]
    assert truth.records(kind="fault", since=read)[0]["at"] == 1_796_477_030.402
