"""Liveness from the cluster, not the host (issue 32): `drills revert` refuses a run whose run-lock Lease is current,
whatever host it runs on — here a run whose journal says another host wrote it (a forged host identity, as a
reports volume shared with the in-cluster CronJob shows a pod's run) — and reverts it once its Lease has
expired, or with `--force`. A run this host proves ended (SIGKILLed here) is reverted at once:
tests/e2e/test_revert_in_cluster.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from drills.cli import main
from drills.core.journal import Journal, open_entries
from drills.core.kube import connect_twin
from drills.core.lock import ClusterLock

pytestmark = pytest.mark.slow

NAMESPACE = "ai-platform"


def test_a_run_holding_its_lease_on_another_host_is_not_reverted(twin, tmp_path, capsys):
    cluster = connect_twin(twin.kubeconfig, twin.url, state_dir=str(twin.state_dir))
    reports = tmp_path / "reports"
    lock = _held_lock(cluster, reports, "elsewhere", duration_s=600)
    try:
        _forge_host(reports / "elsewhere", "drills-nightly-28f3k")  # the CronJob's pod wrote it

        rc = main(["revert", "--reports", str(reports), "--run", "elsewhere"])
        out, err = capsys.readouterr()
        assert rc == 2, out + err
        (line,) = err.strip().splitlines()
        assert line.startswith("drills: run elsewhere (pid ") and " on drills-nightly-28f3k) still holds its run lock " \
            f"(lease {NAMESPACE}/{_name('elsewhere')}" in line and "pass --force once you know it is gone" in line, line
        assert len(open_entries(reports, "elsewhere")) == 1  # left open
        assert _holder(twin, "elsewhere") == lock.identity  # and the run keeps its Lease

        rc = main(["revert", "--reports", str(reports), "--run", "elsewhere", "--force"])
        out, err = capsys.readouterr()
        assert rc == 0, out + err
        assert f"reverted lock on {NAMESPACE}/{_name('elsewhere')} (run elsewhere)" in out
        assert open_entries(reports, "elsewhere") == [] and _holder(twin, "elsewhere") is None
    finally:
        lock._stop.set()
        cluster.close()


def test_once_its_lease_expired_the_run_is_reverted_without_force(twin, tmp_path, capsys):
    cluster = connect_twin(twin.kubeconfig, twin.url, state_dir=str(twin.state_dir))
    reports = tmp_path / "reports"
    lock = _held_lock(cluster, reports, "stopped", duration_s=10)
    try:
        lock._stop.set()  # the run stopped renewing (its host lost); the Lease runs out in 10 cluster seconds
        lock._thread.join(timeout=10)
        _forge_host(reports / "stopped", "gpu-login-02")
        expires = cluster.clock.timestamp() + 10
        while cluster.clock.timestamp() <= expires + 1:
            time.sleep(0.05)

        rc = main(["revert", "--reports", str(reports), "--run", "stopped"])
        out, err = capsys.readouterr()
        assert rc == 0, out + err
        assert f"reverted lock on {NAMESPACE}/{_name('stopped')} (run stopped)" in out
        assert _holder(twin, "stopped") is None
    finally:
        cluster.close()


def _name(run: str) -> str:
    return f"gpu-drills-run-{run}"  # a Lease of this test's own: other tests drill the same session twin


def _held_lock(cluster, reports: Path, run: str, duration_s: int) -> ClusterLock:
    (reports / run).mkdir(parents=True)
    lock = ClusterLock(cluster, NAMESPACE, run, duration_s=duration_s, journal=Journal.for_run(reports, run),
                       name=_name(run))
    lock.acquire()
    return lock


def _forge_host(run_dir: Path, host: str) -> None:
    """Rewrite who wrote the journal: another host (so this host cannot tell whether that process runs)."""
    path = run_dir / "journal.jsonl"
    ops = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps({**op, **({"host": host} if "host" in op else {})}) + "\n" for op in ops))


def _holder(twin, run: str) -> str | None:
    lease = requests.get(f"{twin.url}/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{_name(run)}",
                         timeout=5).json()
    return lease["spec"].get("holderIdentity")


def test_a_held_lease_is_renewed_by_one_write_and_a_takeover_is_seen_not_overwritten(twin, tmp_path, caplog):
    """A run renews its Lease as client-go's leader election does: the Lease as it last wrote it, one update per
    renewal (a read only after a conflict). When another run took the Lease meanwhile, the update conflicts, the
    read shows the other holder, the run says it lost the lock and stops renewing — the other run's Lease stays."""
    from kubernetes import client

    cluster = connect_twin(twin.kubeconfig, twin.url, state_dir=str(twin.state_dir))
    reports = tmp_path / "reports"
    name = _name("renewing")
    lock = _held_lock(cluster, reports, "renewing", duration_s=30)  # renewed every 10 cluster seconds
    try:
        def renewals() -> list[dict]:
            return [r for r in requests.get(f"{twin.url}/twin/v1/audit", timeout=5).json()
                    if r["resource"] == "leases" and r["name"] == name]

        def updates() -> list[dict]:
            return [r for r in renewals() if r["verb"] == "update" and r["code"] == 200]

        deadline = time.monotonic() + 60  # four renewals, however slowly a busy machine runs the renewing thread
        while len(updates()) < 4:
            assert time.monotonic() < deadline, [(r["verb"], r["code"]) for r in renewals()]
            time.sleep(0.05)
        calls = renewals()
        reads = [r for r in calls if r["verb"] == "get"]
        assert len(reads) <= 2, [(r["verb"], r["code"]) for r in calls]  # the take's read (and none per renewal)

        api = client.CoordinationV1Api(cluster.api)
        for _ in range(50):  # the other run takes it as any writer does: read, write, again after a conflict
            lease = api.read_namespaced_lease(name, NAMESPACE)
            lease.spec.holder_identity = "other-host/4242/20260101T000000Z"
            try:
                api.replace_namespaced_lease(name, NAMESPACE, lease)
                break
            except client.ApiException as err:
                if err.status != 409:
                    raise
        lock._thread.join(timeout=30)
        assert not lock._thread.is_alive(), "the lock kept renewing a Lease another run holds"
        assert _holder(twin, "renewing") == "other-host/4242/20260101T000000Z"
        assert any("lost to other-host/4242/20260101T000000Z" in r.getMessage() for r in caplog.records)
        assert any(r["verb"] == "update" and r["code"] == 409 for r in renewals())
    finally:
        lock._stop.set()
        cluster.close()
