"""The inference pod-kill drill end to end with its load as Kubernetes pods (`load_generator.mode: pods`): the
real `drills run` creates a locust master Job, a worker Job of 2 pods and their Service on the twin, which runs
their containers as local processes (drills/twin/workloads/locust_pods.py); the drill's figures come from the
worker pods' logs, and the run leaves no pod, Job, Service or process behind, its journal closed.

| construction                                   | verdict | what proves the pods path                          |
|------------------------------------------------|---------|----------------------------------------------------|
| healthy twin, 1 of 2 replicas killed           | pass    | requests = the sum of both worker pods' buckets      |
| error-200, all replicas killed                 | fail    | the 200-with-an-error answers, classified in the pods |

Two runs on purpose (each costs about 10 s of CPU); twins of our own (`--twin-state`), so that what is left on
them after the run can be listed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from drills.core.kube import connect_twin
from drills.load.pods import LABELS
from tests.e2e.drill_helpers import audit_file, drill_mutations, drills, records, twin_locust_processes_left, write_profile

pytestmark = [pytest.mark.slow, pytest.mark.inference]

REPO = Path(__file__).resolve().parents[2]
NS = "ai-platform"
ONE, ALL = "loses and not all", "all"
WORKERS = 2


def _profile(tmp_path: Path) -> str:
    """The built-in twin target with the load from 2 locust worker pods (the twin's nodes all carry the GPU taint)."""
    target = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
    target["workloads"]["inference"]["load_generator"] = {
        "mode": "pods", "workers": WORKERS, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    return write_profile(tmp_path / "pods-load.yaml", yaml.safe_dump(target))


def _run(twin, tmp_path: Path, run_id: str, keyword: str) -> tuple:
    done = drills("run", "-m", "inference", "-k", keyword, "--profile", _profile(tmp_path), "--twin-state",
                  str(twin.state_dir), "--no-html", "--reports", str(tmp_path), "--run-id", run_id)
    recs = records(tmp_path / run_id)
    assert len(recs) == 1, done.stdout + done.stderr
    return done, recs[0], tmp_path / run_id


def _bucket_totals(load_dir: Path) -> dict[str, tuple[int, int]]:
    """Per worker pod: (requests, failures) its log's bucket lines hold."""
    totals = {}
    for path in sorted(load_dir.glob("buckets-w*.jsonl")):
        lines = [b for b in map(json.loads, filter(str.strip, path.read_text().splitlines())) if "t" in b]  # not watermarks
        totals[path.stem] = (sum(b["ok"] + b["fail"] for b in lines), sum(b["fail"] for b in lines))
    return totals


def _assert_pods_load_and_nothing_left(twin, run_dir: Path, rec: dict) -> Path:
    """The load ran as our pods (journaled, created through the API), and nothing of it outlives the run."""
    entries = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    (opened,) = [e for e in entries if e["op"] == "open" and e["kind"] == "load"]
    (injected,) = [e for e in entries if e["op"] == "injected" and e["id"] == opened["id"]]
    name = opened["revert"]["pods"]["name"]
    assert opened["revert"]["pods"] == {"namespace": NS, "name": name}
    assert injected["record"]["processes"] == [] and sorted(injected["record"]["pod_names"]) == ["master", "w0", "w1"]
    created = sorted(r["resource"] for r in drill_mutations(audit_file(twin.state_dir))
                     if r["verb"] == "create" and r["resource"] in ("jobs", "services"))
    assert created == ["jobs", "jobs", "services"], created  # the master Job, the worker Job, their Service
    # the journal closed: every entry it opened (the run lock, the killed pods, the load) has its close
    closes = {e["id"]: e["outcome"] for e in entries if e["op"] == "close"}
    assert {e["id"] for e in entries if e["op"] == "open"} == set(closes)
    assert closes[opened["id"]] == "stopped"
    # nothing left on the cluster nor on the machine
    from kubernetes import client

    conn = connect_twin(twin.kubeconfig, twin.url)
    try:
        sel = ",".join(f"{k}={v}" for k, v in LABELS.items())
        left = {"pods": conn.core.list_namespaced_pod(NS, label_selector=sel).items,
                "jobs": client.BatchV1Api(conn.api).list_namespaced_job(NS, label_selector=sel).items,
                "services": conn.core.list_namespaced_service(NS, label_selector=sel).items}
    finally:
        conn.close()
    assert {k: [o.metadata.name for o in v] for k, v in left.items()} == {"pods": [], "jobs": [], "services": []}
    assert not twin_locust_processes_left(twin)
    return run_dir / "load" / "1"


def test_healthy_twin_passes_with_the_load_from_worker_pods(twin_factory, tmp_path):
    twin = twin_factory(scale=60)
    done, rec, run_dir = _run(twin, tmp_path, "pods-healthy", ONE)
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"] + done.stdout + done.stderr
    load_dir = _assert_pods_load_and_nothing_left(twin, run_dir, rec)
    # the drill's figures are the sum of what each worker pod sent, read back from its log
    per_pod = _bucket_totals(load_dir)
    assert sorted(per_pod) == ["buckets-w0", "buckets-w1"] and all(n > 0 for n, _ in per_pod.values()), per_pod
    locust = rec["details"]["locust"]
    assert locust["requests"] == sum(n for n, _ in per_pod.values()) > 100
    assert locust["failures"] == sum(f for _, f in per_pod.values()) == 0
    assert rec["details"]["load"]["requests"] == locust["requests"] and rec["details"]["load"]["budget_error_rate"] == 0
    # the master's summary (its log): cumulative — each endpoint's row adds up to the Aggregated one. It lags the
    # workers' buckets by their last report (every 3 s; on the twin the report printed at quit can be cut off).
    summary = json.loads((load_dir / "locust.json").read_text())
    assert 0 < sum(e["num_requests"] for e in summary) <= locust["requests"], summary
    with (load_dir / "locust_stats.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    total = next(int(r["Request Count"]) for r in rows if r["Name"] == "Aggregated")
    assert sum(int(r["Request Count"]) for r in rows if r["Name"] != "Aggregated") == total == \
        sum(e["num_requests"] for e in summary)


def test_error_200_outage_fails_from_the_failures_the_worker_pods_saw(twin_factory, tmp_path):
    """Every replica killed behind a gateway that answers its errors with 200 + an error payload: the worker pods
    classify those answers, their logs carry them, and the drill fails naming them."""
    twin = twin_factory(defects=["error-200"], scale=60)
    done, rec, run_dir = _run(twin, tmp_path, "pods-error-200", ALL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach" and rec["defects"] == ["error-200"]
    n = rec["details"]["load"]["failure_kinds"]["error_200"]
    assert n > 0 and f"{n} requests returned HTTP 200 with an error payload" in rec["reason"], rec["reason"]
    load_dir = _assert_pods_load_and_nothing_left(twin, run_dir, rec)
    per_pod = _bucket_totals(load_dir)
    assert rec["details"]["locust"]["failures"] == sum(f for _, f in per_pod.values()) >= n
    assert all(f > 0 for _, f in per_pod.values()), per_pod  # both worker pods saw the outage
