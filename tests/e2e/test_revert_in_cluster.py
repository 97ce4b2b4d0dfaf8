"""`drills revert` reconnects as the run connected (DESIGN §6), here in-cluster as a scheduled run does.

A TLS twin stands in for the API server a pod sees (KUBERNETES_SERVICE_HOST/PORT, a service-account
token and CA in files); the drill runs in in-cluster mode, is SIGKILLed with the fault in place, and the
CronJob's own revert command (taken from `drills schedule`'s manifest) undoes it. The same command
refuses a run that is still alive and a cluster other than the one the run drilled, leaving the
journal untouched.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from drills.schedule.cronjob import REPORTS_DIR, ScheduleOptions, render
from tests.e2e.drill_helpers import REPO, node, schedulable, wait_for_injection
from tests.e2e.test_twin_rbac import apply_as_admin, schedule_rbac

pytestmark = [pytest.mark.slow]

SLOW_SCALE = 30.0  # slow enough that the drill is still waiting for recovery when it is killed
LOST = "gpu-train-01"  # the drill cordons the first node of the healthy twin's job
LEASE = "/apis/coordination.k8s.io/v1/namespaces/ai-platform/leases/gpu-drills-run"


@pytest.fixture
def profile(tmp_path) -> Path:
    """The built-in twin profile with `cluster.mode: in-cluster` (the only mode `drills schedule` accepts)."""
    text = (REPO / "drills" / "profile" / "twin.yaml").read_text()
    path = tmp_path / "in-cluster.yaml"
    path.write_text(text.replace("  mode: twin ", "  mode: in-cluster "))
    return path


def test_sigkilled_in_cluster_run_is_reverted_by_the_cronjobs_command(twin_factory, profile, tmp_path):
    twin = twin_factory(scale=SLOW_SCALE, tls=True)
    apply_as_admin(twin, schedule_rbac(profile))  # what a cluster admin installs from `drills schedule`
    reports = tmp_path / "reports"
    run = _drill(profile, reports, in_cluster(twin))
    try:
        wait_for_injection(reports / "ic", run)
        assert not schedulable(node(twin, LOST))
        (lock,) = [op for op in _journal(reports) if op["op"] == "open" and op["kind"] == "lock"]
        assert lock["connection"]["mode"] == "in-cluster"
        assert lock["connection"]["url"] == twin.info["tls"]["url"]
        assert lock["connection"]["uid"] == _kube_system_uid(twin)
        assert lock["pid"] == run.pid and lock["pid_start"]

        live = cronjob_revert(profile, reports, in_cluster(twin))
        assert live.returncode == 2, live.stdout + live.stderr
        assert live.stderr.splitlines() == [f"drills: run ic (pid {run.pid} on {lock['host']}) is still running: it "
                                             "reverts its own faults; stop it first"]
        assert not schedulable(node(twin, LOST)) and _lease_holder(twin)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and anything it started: nothing reverts
        run.communicate(timeout=30)
    assert not schedulable(node(twin, LOST))

    done = cronjob_revert(profile, reports, in_cluster(twin))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reverted node on {LOST} (run ic)" in done.stdout
    assert "reverted lock on ai-platform/gpu-drills-run (run ic)" in done.stdout
    assert schedulable(node(twin, LOST))
    assert _lease_holder(twin) is None
    closes = [op for op in _journal(reports) if op["op"] == "close"]
    kinds = sorted(op["id"].rsplit("-", 1)[0] for op in closes)  # the store reader pod, if it was up, goes too
    assert kinds in (["lock", "node"], ["lock", "node", "store-reader"]), closes
    assert {op["outcome"] for op in closes} == {"reverted"}
    again = cronjob_revert(profile, reports, in_cluster(twin))
    assert again.returncode == 0 and "nothing to revert" in again.stdout


def test_revert_refuses_another_cluster_and_leaves_the_entries_open(twin_factory, profile, tmp_path):
    drilled = twin_factory(scale=SLOW_SCALE, tls=True)
    other = twin_factory(scale=SLOW_SCALE, tls=True)
    for twin in (drilled, other):
        apply_as_admin(twin, schedule_rbac(profile))
    reports = tmp_path / "reports"
    run = _drill(profile, reports, in_cluster(drilled))
    try:
        wait_for_injection(reports / "ic", run)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate(timeout=30)
    before = (reports / "ic" / "journal.jsonl").read_bytes()

    refused = cronjob_revert(profile, reports, in_cluster(other))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    was, now = drilled.info["tls"]["url"], other.info["tls"]["url"]
    assert refused.stderr.splitlines() == [
        f"drills: run ic's journal was made on cluster UID {_kube_system_uid(drilled)} at {was}; this connection "
        f"reaches UID {_kube_system_uid(other)} at {now}: refusing to revert; reconnect to the right cluster"]
    assert (reports / "ic" / "journal.jsonl").read_bytes() == before  # open, untouched
    assert not schedulable(node(drilled, LOST))
    assert all(schedulable(n) for n in requests.get(f"{other.url}/api/v1/nodes", timeout=5).json()["items"])

    done = cronjob_revert(profile, reports, in_cluster(drilled))  # the right cluster: the entries revert
    assert done.returncode == 0, done.stdout + done.stderr
    assert schedulable(node(drilled, LOST)) and _lease_holder(drilled) is None


def in_cluster(twin) -> dict:
    """What a pod on that cluster has: the API service's host and port, and its service-account files."""
    tls = twin.info["tls"]
    host, _, port = tls["url"].removeprefix("https://").rpartition(":")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    return dict(env, KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port,
                DRILLS_SERVICEACCOUNT_DIR=tls["serviceaccount_dir"], KUBECONFIG=os.devnull, PYTHONUNBUFFERED="1",
                COLUMNS="160")


def cronjob_revert(profile: Path, reports: Path, env: dict) -> subprocess.CompletedProcess:
    """The CronJob's own first command (`drills schedule`'s manifest), with its reports volume mounted at
    `reports` and `drills` being this checkout's CLI."""
    docs = render(ScheduleOptions(profile=str(profile), image="gpu-drills:test"))
    (cronjob,) = [d for d in docs if d["kind"] == "CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    shell, flag, command = container["args"]
    assert (shell, flag) == ("sh", "-c")
    revert, _, _ = command.partition(" && ")
    argv = shlex.split(revert)
    assert argv[:2] == ["drills", "revert"] and REPORTS_DIR in argv
    argv = [str(reports) if arg == REPORTS_DIR else arg for arg in argv]
    bin_dir = reports.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "drills"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m drills.cli \"$@\"\n")
    shim.chmod(0o755)
    return subprocess.run(["sh", "-c", shlex.join(argv)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(env, PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"))


def _drill(profile: Path, reports: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "drills.cli", "run", "-m", "training", "-k", "cordon", "--profile",
                             str(profile), "--no-html", "--reports", str(reports), "--run-id", "ic"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _journal(reports: Path) -> list[dict]:
    return [json.loads(line) for line in (reports / "ic" / "journal.jsonl").read_text().splitlines() if line.strip()]


def _kube_system_uid(twin) -> str:
    return requests.get(f"{twin.url}/api/v1/namespaces/kube-system", timeout=5).json()["metadata"]["uid"]


def _lease_holder(twin) -> str | None:
    return requests.get(f"{twin.url}{LEASE}", timeout=5).json()["spec"].get("holderIdentity")
