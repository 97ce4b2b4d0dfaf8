"""Random targets end to end (issue 35): `drills run --random` records the seed and the replica it picked, and
`drills run --replay RUN` on a fresh twin hits the same place again (the choice function's spread over the twin's
inventory is tests/unit/test_picks.py). One scenario with a choice to make (1 of 2 replicas), twice."""

from __future__ import annotations

import pytest

from tests.e2e.drill_helpers import drills, records

pytestmark = pytest.mark.slow

FEATURE = "features/inference/pod_kill.feature"


def test_random_then_replay_hit_the_same_targets(tmp_path):
    common = (FEATURE, "-m", "kill_one", "--scale", "600", "--no-html", "--reports", str(tmp_path))
    first = drills("run", *common, "--run-id", "night", "--random", "31")
    (rec,) = records(tmp_path / "night")
    picked = rec["details"]["random"]
    assert picked["seed"] == 31 and picked["replayed_from"] is None, first.stdout + first.stderr
    (slot,) = picked["choices"]["replica"]
    node = slot.split("/")[0]
    kill = _kill(rec)
    assert kill["nodes"] == [node]  # the pod killed is the one in the slot picked
    assert "targets picked at random (seed 31): `drills run --replay night`" in first.stdout
    assert (tmp_path / "night" / "summary.md").read_text().count(slot) == 1  # the report says what was picked

    again = drills("run", *common, "--run-id", "again", "--replay", "night")
    (rep,) = records(tmp_path / "again")
    assert rep["details"]["random"] == {**picked, "replayed_from": "night"}, again.stdout + again.stderr
    assert _kill(rep)["nodes"] == [node] and _kill(rep)["pods"] != kill["pods"]  # the same place, a new twin's pod
    assert rec["verdict"] == rep["verdict"] == "pass"


def _kill(rec: dict) -> dict:
    return next(f for f in rec["details"]["faults"] if f["kind"] == "pods")
