"""A wait for real work (pods and processes stopping) is never shorter on the wall than its floor."""

from drills.core.clock import STOP_WALL_FLOOR_S, DilatedClock, WallClock


def test_a_fast_clock_gets_the_wall_floor_and_a_real_cluster_its_cluster_seconds():
    fast = DilatedClock(scale=600.0)
    now = fast.timestamp()
    ahead = fast.deadline(300.0, STOP_WALL_FLOOR_S) - now
    assert STOP_WALL_FLOOR_S * 600.0 <= ahead < STOP_WALL_FLOOR_S * 600.0 + 60.0  # 30 s of wall, not 0.5 s
    wall = WallClock()
    ahead = wall.deadline(300.0, STOP_WALL_FLOOR_S) - wall.timestamp()
    assert 299.0 < ahead <= 300.0  # a real cluster: the cluster seconds asked for, unchanged


def test_without_a_floor_it_is_the_cluster_seconds():
    fast = DilatedClock(scale=600.0)
    assert 299.0 < fast.deadline(300.0) - fast.timestamp() <= 300.0 + 60.0
