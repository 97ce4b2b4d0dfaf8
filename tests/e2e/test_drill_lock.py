"""One drill run at a time per cluster (DESIGN §6): a live Lease held by another run refuses the run with one
line and nothing injected; an expired one is taken over; a finished run leaves the Lease free."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest
import requests

from fixtures.twin import api_client_for
from tests.e2e.drill_helpers import DRILL_AGENT, audit_of, drills, node, records, schedulable

pytestmark = pytest.mark.slow

OTHER = "other-host/4242/20260101T000000Z"


def _lease(twin, renewed_ago_s: float, duration_s: int) -> None:
    """Another run's Lease, renewed `renewed_ago_s` twin seconds ago."""
    from kubernetes import client

    now = requests.get(f"{twin.url}/twin/v1/clock", timeout=5).json()["now"]
    stamp = (datetime.fromtimestamp(now, timezone.utc) - timedelta(seconds=renewed_ago_s)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")
    api = api_client_for(twin)
    try:
        client.CoordinationV1Api(api).create_namespaced_lease("ai-platform", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gpu-drills-run", "namespace": "ai-platform"},
            "spec": {"holderIdentity": OTHER, "leaseDurationSeconds": duration_s, "acquireTime": stamp,
                     "renewTime": stamp}})
    finally:
        api.close()


def read_lease(twin) -> dict:
    return requests.get(f"{twin.url}/apis/coordination.k8s.io/v1/namespaces/ai-platform/leases/gpu-drills-run",
                        timeout=5).json()


def _run(twin, tmp_path, run_id: str):
    return drills("run", "-m", "training", "-k", "cordon", "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path), "--run-id", run_id)


def test_a_live_lease_of_another_run_refuses_the_run(twin_factory, tmp_path):
    twin = twin_factory(scale=600.0)
    _lease(twin, renewed_ago_s=0, duration_s=1_000_000)
    done = _run(twin, tmp_path, "refused")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(
        r"drills: another drill run holds the cluster lock \(lease ai-platform/gpu-drills-run held by "
        + re.escape(OTHER) + r" since \d\d:\d\d:\d\dZ, expires in \d+ s\): wait for it, or after a crash run "
        r"`drills revert` which also releases it", lines[0]), lines[0]
    assert [r for r in audit_of(twin) if str(r.get("userAgent", "")).startswith(DRILL_AGENT)] == []
    assert read_lease(twin)["spec"]["holderIdentity"] == OTHER
    assert schedulable(node(twin, "gpu-train-01"))


def test_an_expired_lease_is_taken_over_and_released_after_the_run(twin_factory, tmp_path):
    twin = twin_factory(scale=600.0)
    _lease(twin, renewed_ago_s=3600, duration_s=120)
    done = _run(twin, tmp_path, "takeover")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["verdict"] for r in records(tmp_path / "takeover")] == ["pass"]
    lease = read_lease(twin)
    assert not lease["spec"].get("holderIdentity"), lease  # released
    assert lease["spec"]["leaseTransitions"] == 1  # it was ours in between
    lease_writes = [r for r in audit_of(twin) if r.get("resource") == "leases"
                    and str(r.get("userAgent", "")).startswith(DRILL_AGENT)]
    assert lease_writes and all(r["verb"] == "update" for r in lease_writes)
    ops = [json.loads(line) for line in (tmp_path / "takeover" / "journal.jsonl").read_text().splitlines()]
    lock_ids = {op["id"] for op in ops if op["op"] == "open" and op["kind"] == "lock"}
    assert lock_ids and {op["id"] for op in ops if op["op"] == "close" and op.get("outcome") == "released"} >= lock_ids


# a SIGKILLed run's Lease released by `drills revert`: test_drill_safety.py::test_sigkill_then_drills_revert


def test_a_dry_run_does_not_take_the_lock(twin_factory, tmp_path):
    twin = twin_factory(scale=600.0)
    _lease(twin, renewed_ago_s=0, duration_s=1_000_000)  # even a held lock does not stop a plan
    done = drills("run", "-m", "training", "-k", "cordon", "--dry-run", "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path), "--run-id", "dry")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run: would cordon and drain node gpu-train-01" in done.stdout
    assert [r for r in audit_of(twin) if str(r.get("userAgent", "")).startswith(DRILL_AGENT)] == []
    journal = tmp_path / "dry" / "journal.jsonl"
    assert not journal.exists() or '"kind":"lock"' not in journal.read_text()
