"""Stop conditions (DESIGN §6, drills/core/stop.py): a guard over the steady state that trips during the
fault reverts every fault at once and records the verdict `aborted` with the guard's reading. One guard trips
on a threshold the drill's own fault crosses (a cordon counted as unschedulable); one on a real defect
(`stale-endpoints`: the users' error rate while a replica should absorb the kill)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
import requests

from tests.e2e.drill_helpers import drills, node, records, schedulable, without_readings, write_profile

pytestmark = pytest.mark.slow

BUILTIN = Path(__file__).resolve().parents[2] / "drills" / "profile" / "twin.yaml"
LOST = "gpu-train-01"


def _profile(tmp_path: Path, conditions: str) -> str:
    text = BUILTIN.read_text().replace("  dry_run: false", f"  dry_run: false\n  stop_conditions: {conditions}")
    return write_profile(tmp_path / "site.yaml", text)


def test_unschedulable_beyond_the_guard_aborts_and_reverts(twin_factory, tmp_path):
    """No node may be unschedulable here: the cordon trips the guard, the node is uncordoned at once."""
    twin = twin_factory(scale=60.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--profile",
                  _profile(tmp_path, "[{metric: unschedulable_nodes, above: 0}]"), "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "abort")
    assert done.returncode == 1, done.stdout + done.stderr
    (rec,) = records(tmp_path / "r" / "abort")
    assert rec["verdict"] == "aborted" and rec["category"] == "aborted", rec["reason"]
    assert rec["reason"].startswith("aborted: stop condition unschedulable_nodes > 0 tripped (read 1 at ")
    assert rec["details"]["stop_condition"]["metric"] == "unschedulable_nodes"
    reverts = without_readings(rec["details"]["reverts"])  # the checkpoint store's reader pod, if it was up before the trip, goes too
    assert {"kind": "node", "target": LOST, "ok": True, "error": None} in reverts, reverts
    assert all(r["ok"] for r in reverts) and {r["kind"] for r in reverts} <= {"node", "store-reader"}, reverts
    assert schedulable(node(twin, LOST))
    # at once, in cluster time (the twin's audit of the node's patches: the cordon, then the uncordon) — a drill
    # that runs its course keeps the node cordoned for many minutes; the journal entry itself closes only after
    # the revert's settle period and read-back (fixtures/guard.py)
    audit = [json.loads(line) for line in (Path(twin.state_dir) / "audit.jsonl").read_text().splitlines()]
    patches = [a["twinTime"] for a in audit if a["resource"] == "nodes" and a["name"] == LOST
               and a["verb"] == "patch" and not a["subresource"] and a["code"] == 200]
    assert len(patches) >= 2, patches
    reverted_after_s = patches[1] - patches[0]
    assert reverted_after_s < 120.0, reverted_after_s


def test_a_guard_that_holds_changes_nothing(twin_factory, tmp_path):
    """The same drill under a guard it never reaches passes as before (the guard is not a verdict)."""
    twin = twin_factory(scale=120.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--profile",
                  _profile(tmp_path, "[{metric: not_ready_nodes, above: 3}]"), "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "holds")
    (rec,) = records(tmp_path / "r" / "holds")
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
    assert "stop_condition" not in rec["details"]


def test_a_guard_breached_before_the_fault_injects_nothing(twin_factory, tmp_path):
    """Issue 32: a node someone else cordoned leaves the platform outside the guard before the drill's fault: the
    fault is not injected (no journal entry for it), the verdict is aborted and says why; the other node is not ours."""
    twin = twin_factory(scale=120.0)
    requests.patch(f"{twin.url}/api/v1/nodes/gpu-infer-01", json={"spec": {"unschedulable": True}},
                   headers={"Content-Type": "application/merge-patch+json"}, timeout=5).raise_for_status()
    done = drills("run", "-m", "training", "-k", "cordon", "--profile",
                  _profile(tmp_path, "[{metric: unschedulable_nodes, above: 0}]"), "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "before")
    assert done.returncode == 1, done.stdout + done.stderr
    (rec,) = records(tmp_path / "r" / "before")
    assert rec["verdict"] == "aborted" and rec["category"] == "aborted", rec["reason"]
    assert rec["reason"].startswith("aborted: stop condition unschedulable_nodes > 0 was already breached before the "
                                    "fault (read 1 at "), rec["reason"]
    journal = [json.loads(line) for line in (tmp_path / "r" / "before" / "journal.jsonl").read_text().splitlines()] \
        if (tmp_path / "r" / "before" / "journal.jsonl").exists() else []
    assert not [e for e in journal if e["op"] == "open" and e["kind"] == "node"]  # the fault was never journaled
    assert schedulable(node(twin, LOST)) and not schedulable(node(twin, "gpu-infer-01"))


SERVING_GUARD = "[{metric: inference_error_rate, above: 0.2, for_s: 10s}]"


@pytest.fixture(scope="module", params=["stale-endpoints", "healthy"])
def serving_guarded(request, tmp_path_factory):
    """The inference drill (1 of 2 replicas killed under load) with a guard on the users' error rate, on a
    twin with the `stale-endpoints` defect (the gateway keeps routing to the killed replica for 45 s: about
    half the requests fail) and on a healthy one. Scale 10: the 45 s of stale routing are 4.5 s of wall time,
    many polls of the guard (every 0.2 s wall), so the trip does not hang on one poll under load. The healthy
    twin runs at the default scale (60): fewer polls per 10 s window make a false trip likelier, not rarer."""
    tmp = tmp_path_factory.mktemp("serving")
    defect = [] if request.param == "healthy" else ["--defect", request.param, "--scale", "10"]
    done = drills("run", "-m", "inference", "-k", "loses and not all", *defect, "--profile",
                  _profile(tmp, SERVING_GUARD), "--no-html", "--reports", str(tmp / "r"), "--run-id", "guarded",
                  timeout=400)
    return request.param, done, tmp / "r" / "guarded"


def test_serving_errors_from_a_real_defect_abort_the_drill(serving_guarded):
    """No synthetic threshold: the defect's errors trip the guard while the fault should be absorbed; the
    run stops waiting for recovery, reverts at once (the load stops, the kill has nothing to undo) and
    records `aborted` with the reading; the healthy twin under the same guard passes."""
    case, done, run_dir = serving_guarded
    (rec,) = records(run_dir)
    if case == "healthy":
        assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
        assert "stop_condition" not in rec["details"]
        return
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "aborted" and rec["category"] == "aborted", rec["reason"]
    reading = rec["details"]["stop_condition"]
    assert reading["metric"] == "inference_error_rate" and reading["value"] > 0.2, reading
    assert rec["reason"].startswith("aborted: stop condition inference_error_rate > 0.2 for 10s tripped (read ")
    assert {r["kind"] for r in rec["details"]["reverts"]} == {"pods", "load"}
    assert all(r["ok"] for r in rec["details"]["reverts"]), rec["details"]["reverts"]
    injected = _ts(rec["phases"]["injected"])
    assert _ts(reading["at"]) - injected < 45.0, (reading, rec["phases"])  # while the stale routing still hurt users
    assert "recovered" not in rec["phases"] or rec["phases"]["recovered"] is None  # it stopped waiting
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert {e["id"] for e in journal if e["op"] == "open"} == {e["id"] for e in journal if e["op"] == "close"}


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
