"""Pure parts of the inference pod-kill drill: how many pods a kill takes, the scenario's wording,
and wall-clock load stamps in cluster time."""

from __future__ import annotations

import time

import pytest

from drills.core.clock import DilatedClock
from drills.core.errors import CheckFailed
from drills.measure.serving import to_cluster, to_wall
from drills.faults.pods import kill_count
from fixtures.steps.inference import parse_killed


@pytest.mark.parametrize(("running", "count", "percent", "expected"),
                         [(2, 1, None, 1), (2, 5, None, 2), (2, None, 100, 2), (3, None, 50, 2), (4, None, 25, 1),
                          (2, None, None, 1)])
def test_kill_count(running, count, percent, expected):
    assert kill_count(running, count, percent) == expected


def test_parse_killed():
    assert parse_killed("1 of its 2 replicas", 2) == (1, None)
    assert parse_killed("all its replicas", 2) == (None, 100.0)
    assert parse_killed("50% of its replicas", 4) == (None, 50.0)
    with pytest.raises(CheckFailed, match="expects 2 replicas"):
        parse_killed("1 of its 2 replicas", 3)
    with pytest.raises(ValueError, match="not a replica count"):
        parse_killed("some of them", 2)


def test_wall_stamps_convert_to_dilated_cluster_time():
    clock = DilatedClock.synced(1_000_000.0, scale=60.0)
    wall = time.time() - 0.5  # half a wall second ago is 30 cluster seconds ago
    assert to_cluster(clock, wall) == pytest.approx(clock.timestamp() - 30.0, abs=0.5)
    assert to_wall(clock, to_cluster(clock, wall)) == pytest.approx(wall, abs=0.01)
