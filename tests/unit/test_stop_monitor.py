"""StopMonitor.check_once (drills/core/stop.py): a metric above its limit for for_s cluster seconds trips."""

from __future__ import annotations

from datetime import datetime, timezone

from drills.core.stop import StopMonitor
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
