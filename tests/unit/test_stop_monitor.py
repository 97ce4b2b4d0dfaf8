"""StopMonitor.check_once (drills/core/stop.py): a metric above its limit for for_s cluster seconds trips."""

from __future__ import annotations

from datetime import datetime, timezone

from drills.core.stop import MIN_WINDOW_S, NoResults, StopMonitor
from drills.profile.model import StopCondition


class _Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def timestamp(self) -> float:
        return self.t

    def iso(self, at: datetime) -> str:
        return at.astimezone(timezone.utc).isoformat()


def _monitor(values: list, **cond):
    clock = _Clock()
    feed = iter(values)
    monitor = StopMonitor([StopCondition(**cond)], {cond["metric"]: lambda _w: next(feed)}, clock, lambda r: None)
    return monitor, clock


def test_trips_only_after_holding_for_its_duration():
    monitor, clock = _monitor([0.9, 0.9, 0.9], metric="inference_error_rate", above=0.5, for_s=30)
    assert monitor.check_once() is None  # above since t=1000
    clock.t += 20
    assert monitor.check_once() is None  # 20 s < 30 s
    clock.t += 10
    reading = monitor.check_once()
    assert reading is not None and reading.value == 0.9 and reading.above == 0.5
    assert reading.sentence().startswith("aborted: stop condition inference_error_rate > 0.5 for 30s tripped")


def test_a_dip_resets_the_clock_and_unknown_is_no_breach():
    monitor, clock = _monitor([0.9, 0.1, None, 0.9], metric="inference_error_rate", above=0.5, for_s=10)
    for _ in range(3):
        assert monitor.check_once() is None
        clock.t += 10
    assert monitor.check_once() is None  # above again only since now


def test_without_duration_trips_at_once():
    monitor, _ = _monitor([2.0], metric="not_ready_nodes", above=1)
    assert monitor.check_once().metric == "not_ready_nodes"


# issue 32: windows with data coverage — a window without load results is not healthy


def test_a_full_outage_without_results_trips_the_guard():
    """Every window empty (no request completes): it used to reset the guard each poll, so it never tripped."""
    outage = NoResults("no request completed (the endpoint answered none)")
    monitor, clock = _monitor([0.0, outage, outage, outage], metric="inference_error_rate", above=0.5, for_s=20)
    assert monitor.check_once() is None  # healthy before
    for _ in range(2):
        clock.t += 10
        assert monitor.check_once() is None
    clock.t += 10
    reading = monitor.check_once()
    assert reading is not None and reading.value is None and reading.no_results == outage.why
    assert "no results over 20s: no request completed" in reading.sentence()


def test_an_empty_window_between_errors_does_not_reset_the_guard():
    empty = NoResults("no request completed")
    monitor, clock = _monitor([0.9, empty, 0.9], metric="inference_error_rate", above=0.5, for_s=20)
    assert monitor.check_once() is None
    clock.t += 10
    assert monitor.check_once() is None
    clock.t += 10
    assert monitor.check_once().value == 0.9  # above since the first poll: 20 s


def test_a_window_shorter_than_the_sources_flushes_is_widened():
    asked = []

    def reader(window_s):
        asked.append(window_s)
        return 0.0

    reader.min_window_s = 30.0  # two flushes of the load generator at 60×
    clock = _Clock()
    for for_s, expected in ((5, 30.0), (45, 45.0)):
        monitor = StopMonitor([StopCondition(metric="inference_error_rate", above=0.5, for_s=for_s)],
                              {"inference_error_rate": reader}, clock, lambda r: None)
        monitor.check_once()
        assert asked[-1] == expected
    monitor = StopMonitor([StopCondition(metric="not_ready_nodes", above=1)], {"not_ready_nodes": lambda w: asked.append(w)},
                          clock, lambda r: None)
    monitor.check_once()
    assert asked[-1] == MIN_WINDOW_S


def test_a_guard_breached_before_the_fault_is_read_as_such():
    monitor, _ = _monitor([2.0], metric="not_ready_nodes", above=1, for_s=60)
    reading = monitor.breached_now()
    assert reading is not None and reading.before_fault and reading.value == 2.0
    assert reading.sentence().startswith("aborted: stop condition not_ready_nodes > 1 was already breached before the "
                                         "fault (read 2 at ")
    assert "nothing was injected" in reading.sentence()
    quiet, _ = _monitor([NoResults("no request completed"), 0.0], metric="inference_error_rate", above=0.5)
    assert quiet.breached_now() is None and quiet.breached_now() is None
