"""Events are named as client-go's recorder names them (`<object>.<UnixNano hex>`), so the API server's key order
lists one object's events in the order they were made — also when the twin's held clock stamps them at one instant."""

from __future__ import annotations

from drills.twin.controllers.events import event_name


def test_events_made_at_one_instant_list_in_the_order_they_were_made():
    at = 3_000_000_000.25  # a held clock: every read the same instant
    names = [event_name("gpu-job", at) for _ in range(3)]
    assert len(set(names)) == 3 and sorted(names) == names
    # client-go: fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())
    stamps = [int(n.removeprefix("gpu-job."), 16) for n in names]
    assert stamps[0] >= int(at * 1e9) and stamps == list(range(stamps[0], stamps[0] + 3))


def test_a_later_instant_sorts_after_an_earlier_one():
    first, later = event_name("gpu-job", 3_000_000_100.0), event_name("gpu-job", 3_000_000_101.0)
    assert first < later
