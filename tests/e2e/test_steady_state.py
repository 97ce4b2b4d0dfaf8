"""The steady-state hypothesis end to end (issue 30): a platform broken BEFORE the fault gets nothing injected
(inconclusive, precondition_not_met, each reading named with its value, source and expectation); a platform
not back to nominal AFTER the revert fails (not_restored); a flood of a store the job does not write to proves
nothing (inconclusive). Without the hypothesis each of these constructions got PASS (bench/verdicts.yaml, the
README's table); the healthy twin still passes every drill (test_drill_*.py, `make drill`).

One twin carries five "broken before" defects at once — nothing is injected on it, so every drill can be
refused on it in turn — to keep the added wall time small."""

from __future__ import annotations

import json
import time
import shutil
from pathlib import Path

import pytest
import yaml

from bench.verdicts import mismatches, rows
from tests.e2e.drill_helpers import REPO, drills, records

pytestmark = pytest.mark.slow

BROKEN_BEFORE = ["degraded-before-drill", "scaled-down-deployment", "uplink-down-before-drill", "slow-store",
                 "slow-serving-before-drill"]


@pytest.fixture(scope="module")
def broken_before(tmp_path_factory):
    """Every drill run once against one twin that was broken before any fault; (exit code, records by drill)."""
    from drills.twin.launcher import start_twin

    state = tmp_path_factory.mktemp("twin")
    handle = start_twin(str(state), profile="minimal", defects=BROKEN_BEFORE, scale=600.0)
    reports = tmp_path_factory.mktemp("reports")
    try:
        done = drills("run", "-m", "training or inference or network or storage",
                      "-k", "cordon_drain or kill_all or (carrying and not sonic and not nxos) or Saturate",
                      "--twin-state", str(state), "--no-html", "--reports", str(reports), "--run-id", "before")
    finally:
        handle.stop()
    recs = records(reports / "before")
    return done, {r["drill"]: r for r in recs}, reports / "before"


def test_a_platform_broken_before_the_fault_gets_nothing_injected(broken_before):
    done, recs, run_dir = broken_before
    assert set(recs) == {"gpu-node-loss", "inference-pod-kill", "switch-uplink", "storage-saturation"}, \
        done.stdout + done.stderr
    assert done.returncode == 2, done.stdout + done.stderr  # nothing was injected anywhere
    for rec in recs.values():
        assert (rec["verdict"], rec["category"]) == ("inconclusive", "precondition_not_met"), (rec["drill"], rec["reason"])
        assert "injected" not in rec["phases"] and not rec["details"]["faults"], rec["drill"]
        before = rec["details"]["steady_state"]["before"]
        assert before["nominal"] is False and "after" not in rec["details"]["steady_state"]
        for reading in before["readings"]:  # every reading says what it was, where it came from, what was expected
            assert reading["source"] and reading["expected"], reading
    reasons = {d: r["reason"] for d, r in recs.items()}
    for drill in ("gpu-node-loss", "switch-uplink", "storage-saturation"):  # the job at a fifth of its nominal
        throughput = _reading(recs[drill], "training throughput")
        assert throughput["ok"] is False and throughput["value"] < 0.25 * 256, throughput
        assert "training throughput:" in reasons[drill] and "% of nominal)" in reasons[drill]
    assert "pods/log ai-platform/llm-finetune-8b-worker-0" in reasons["gpu-node-loss"]
    assert "inference replicas: 1 Ready and in the endpoints" in reasons["inference-pod-kill"]
    assert "expected 2 replica(s)" in reasons["inference-pod-kill"]
    latency = _reading(recs["inference-pod-kill"], "inference latency")  # already ~4× slower (wave 8)
    assert latency["ok"] is False and latency["value"] >= 1.4, latency
    assert "× nominal" in latency["detail"] and "≤ 1200 ms (3 × nominal 400 ms" in latency["expected"], latency
    assert "uplink leaf-2:Ethernet1/31: admin down, oper down" in reasons["switch-uplink"]
    store = _reading(recs["storage-saturation"], "store bandwidth")
    assert store["ok"] is False and store["value"] < 20, store  # slow-store: ~9 MB/s, nominal ≥ 20
    journal = run_dir / "journal.jsonl"  # not even the load or fio was journaled: the guard refused first
    assert not journal.exists() or '"op":"open"' not in journal.read_text().replace(" ", "")


def test_a_job_that_restarted_just_before_the_drill_gets_nothing_injected(tmp_path):
    """Its workers crashed as the twin started and Volcano restarted it; the drill begins some 15 minutes later."""
    (row,) = [r for r in rows("training") if r.defect == "restarted-before-drill"]
    done = drills("run", *row.args(), "--no-html", "--reports", str(tmp_path), "--run-id", "restarted")
    (rec,) = records(tmp_path / "restarted")
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    restart = _reading(rec, "worker restarts")
    assert restart["ok"] is False and restart["value"] < 1800 and "status.conditions" in restart["source"]
    # the job trains normally again (a reading right after its restart may still lack step lines): only the restart tells
    assert _reading(rec, "training throughput")["ok"] is not False, _reading(rec, "training throughput")


def test_a_job_whose_gpus_sit_idle_gets_nothing_injected(tmp_path):
    """The seed's §5.1: the pods hold their GPUs, Volcano says Running, but CUDA never initialised (the image's CUDA
    is newer than the driver) and the loop runs on the CPU. Both keys name it — nvidia-smi in each worker (0 %, no
    compute process) and torch's warning in its log — before any fault (it FAILed on a missing NCCL line before)."""
    (row,) = [r for r in rows("training") if r.defect == "gpus-unseen"]
    done = drills("run", *row.args(), "--no-html", "--reports", str(tmp_path), "--run-id", "unseen")
    (rec,) = records(tmp_path / "unseen")
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    assert "injected" not in rec["phases"] and not rec["details"]["faults"]
    gpus = [r for r in rec["details"]["steady_state"]["before"]["readings"] if r["facet"].startswith("GPUs in use by")]
    assert {r["facet"] for r in gpus} == {"GPUs in use by llm-finetune-8b-worker-0", "GPUs in use by llm-finetune-8b-worker-1"}
    for reading in gpus:  # the non-text key read in the pod itself, and the log's own line, each named
        assert reading["ok"] is False and reading["value"] == 0, reading
        assert "nvidia-smi --query-compute-apps=pid,used_memory --format=csv" in reading["source"]
        assert reading["source"].startswith(f"pods/exec {reading['facet'].rsplit(' ', 1)[1]} on gpu-train-")
        assert 'CUDA initialization: The NVIDIA driver on your system is too old (found version 12020)."' in reading["detail"]


def test_a_store_with_no_headroom_is_rehearsed_and_fails_under_saturation(tmp_path):
    """The counterpart of slow-store (broken before the fault, refused above): nominal at rest, it breaks only
    under the fault, so the drill runs and fails it."""
    (row,) = [r for r in rows("storage") if r.defect == "store-no-headroom"]
    done = drills("run", *row.args(), "--no-html", "--reports", str(tmp_path), "--run-id", "headroom")
    (rec,) = records(tmp_path / "headroom")
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    assert rec["details"]["steady_state"]["before"]["nominal"] is True and rec["phases"]["injected"]


def test_a_platform_not_restored_after_the_revert_fails(tmp_path):
    """The resumed job passes the drill's 5-minute stability window, then crashes 5½ minutes in: the re-check
    after the revert and the settle period sees the restart."""
    (row,) = [r for r in rows("training") if r.defect == "late-crash-after-resume"]
    done = drills("run", *row.args(), "--no-html", "--reports", str(tmp_path), "--run-id", "late")
    (rec,) = records(tmp_path / "late")
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    assert all(c["verdict"] == "pass" for c in rec["details"]["checks"]), rec["details"]["checks"]  # every check passed
    steady = rec["details"]["steady_state"]
    assert steady["before"]["nominal"] is True and steady["after"]["nominal"] is False
    restart = next(r for r in steady["after"]["readings"] if r["facet"] == "worker restarts")
    assert restart["ok"] is False and "jobs.batch.volcano.sh ai-platform/llm-finetune-8b" in restart["source"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_flood_of_a_store_the_job_does_not_write_to_proves_nothing(tmp_path):
    """Class 3: the profile names a checkpoint store the job does not write to; fio floods it, the job's saves
    are untouched. The store's listing holds none of the job's checkpoints: inconclusive, not a pass."""
    other = tmp_path / "other-store"
    other.mkdir()
    profile = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
    profile["storage"]["checkpoint_store"] = str(other)
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(profile))
    done = drills("run", "-m", "storage", "--profile", str(path), "--scale", "600", "--no-html",
                  "--reports", str(tmp_path), "--run-id", "other")
    (rec,) = records(tmp_path / "other")
    assert (rec["verdict"], rec["category"]) == ("inconclusive", "no_effect"), (rec["reason"], done.stdout)
    target = next(c for c in rec["details"]["checks"] if c["name"] == "fault target")
    assert target["verdict"] == "inconclusive" and f"the flooded store {other} holds no checkpoint" in target["reason"]
    assert json.dumps(rec["details"]["faults"]).count(str(other)) >= 1  # fio did flood it: the fault was real


def _reading(rec: dict, facet: str) -> dict:
    return next(r for r in rec["details"]["steady_state"]["before"]["readings"] if r["facet"] == facet)


def test_a_kill_the_load_cannot_be_tied_to_proves_nothing(tmp_path):
    """Class 3, inference: the site names a replica header the endpoint never sends, so no answer says which pod
    served it; the killed pod cannot be shown to be one the load measured (it got PASS before issue 30)."""
    profile = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
    profile["workloads"]["inference"]["replica_header"] = "x-served-by"
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(profile))
    done = drills("run", "-m", "inference", "-k", "kill_one", "--profile", str(path), "--no-html",
                  "--reports", str(tmp_path), "--run-id", "header")
    (rec,) = records(tmp_path / "header")
    assert (rec["verdict"], rec["category"]) == ("inconclusive", "no_effect"), (rec["reason"], done.stdout)
    assert "named no replica" in rec["reason"] and rec["details"]["served_before_kill"] == {}


def test_a_checkpoint_interval_the_run_did_not_observe_is_not_taken_from_the_profile(tmp_path):
    """Class 4, a value assumed: the job checkpoints every 20 000 steps and its log shows one save before the
    fault; the site profile declares 1500. The interval was not observed in this run, so "lost steps" cannot be
    judged on the profile's word (it PASSed on 1500 before issue 30): inconclusive, naming what is missing."""
    from drills.twin.launcher import start_twin

    profile = yaml.safe_load((REPO / "drills/twin/profiles/minimal.yaml").read_text())
    job = profile["workloads"]["training"]["llm-finetune-8b"]
    job.update(checkpoint={**job["checkpoint"], "interval_steps": 20000}, initial_step=20150,
               initial_checkpoint=20000, step_time="500ms")
    twin_profile = tmp_path / "sparse.yaml"
    twin_profile.write_text(yaml.safe_dump(profile))
    state = tmp_path / "twin"
    handle = start_twin(str(state), profile=str(twin_profile), scale=60.0)
    try:
        drills("run", "-m", "training", "-k", "cordon", "--twin-state", str(state), "--no-html",
               "--reports", str(tmp_path), "--run-id", "interval")
    finally:
        handle.stop()
    (rec,) = records(tmp_path / "interval")
    lost = next(c for c in rec["details"]["checks"] if c["name"] == "lost steps")
    assert lost["verdict"] == "inconclusive" and "not observed" in lost["reason"], lost
    assert rec["verdict"] != "pass" and rec["details"].get("checkpoint_interval") in (None, 0), rec["reason"]


def test_replicas_that_answer_with_nothing_are_not_a_serving_platform(twin_factory, tmp_path):
    """Class 1 and 5 on the serving drills (red team, wave 7): one replica was replaced before the drill (a pod
    deleted with kubectl) on a platform whose replacements answer HTTP 200 with no text (empty-replacements). Every
    replica is Ready and in the endpoints — the replicas reading was nominal, and the pod kill was injected into a
    platform serving nothing (INCONCLUSIVE before, blaming the site's replica header). The hypothesis now sends probe
    completions and classifies them as the load does: nothing is injected, the reading names what came back."""
    import requests

    twin = twin_factory(defects=["empty-replacements"], scale=600)
    pods = f"{twin.url}/api/v1/namespaces/ai-platform/pods"

    def ready() -> list[str]:
        items = requests.get(pods, params={"labelSelector": "app=llama-7b-infer"}, timeout=5).json()["items"]
        return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]

    deadline = time.monotonic() + 60
    while len(ready()) < 2:
        assert time.monotonic() < deadline, "the Deployment never had 2 Ready replicas"
        time.sleep(0.05)
    gone = ready()[0]
    requests.delete(f"{pods}/{gone}", timeout=5).raise_for_status()  # kubectl delete pod: the ReplicaSet replaces it
    while gone in ready() or len(ready()) < 2:
        assert time.monotonic() < deadline + 60, "the replacement never became Ready"
        time.sleep(0.05)
    done = drills("run", "-m", "inference", "-k", "kill_one", "--twin-state", str(twin.state_dir), "--no-html",
                  "--reports", str(tmp_path), "--run-id", "empty")
    (rec,) = records(tmp_path / "empty")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (rec["verdict"], rec["category"]) == ("inconclusive", "precondition_not_met"), rec["reason"]
    readings = {r["facet"]: r for r in rec["details"]["steady_state"]["before"]["readings"]}
    assert readings["inference replicas"]["ok"] is True  # Ready and in the endpoints: the platform's word
    answers = readings["inference answers"]
    assert answers["ok"] is False and "200 without generated text" in answers["detail"], answers
    assert "/v1/completions × 4" in answers["source"] and not rec["details"].get("faults")
    # what the replica's own vLLM /metrics told Prometheus meanwhile (InferenceServingNothing reads it): each empty
    # answer a finished request under its finish reason (stop), no token generated, in the token histogram's first bucket
    from prometheus_client.parser import text_string_to_metric_families

    empties = 0
    for name in ready():
        text = requests.get(f"{pods}/{name}:8000/proxy/metrics", timeout=5).text
        fam = {f.name: f for f in text_string_to_metric_families(text)}
        stop = sum(x.value for x in fam["vllm:request_success"].samples if x.labels["finished_reason"] == "stop")
        first = next(x.value for x in fam["vllm:request_generation_tokens"].samples
                     if x.name.endswith("_bucket") and x.labels["le"] == "1.0")
        if stop:
            assert first == stop and fam["vllm:generation_tokens"].samples[0].value == 0, text
        empties += stop
    assert empties >= 1  # the probes reached the replacement


def test_the_jobs_leaves_are_read_from_lldp_not_from_a_label(twin_factory, tmp_path):
    """Red team, wave 8 (class 1, switch uplink): leaf-2's first uplink is down before the drill
    (uplink-down-before-drill) and the job's node under leaf-2 carries a leaf label naming leaf-1. The hypothesis took
    the job's leaves from the labels — only leaf-1's uplinks were read: "every uplink of the job's leaves up", PASS on
    a fabric already short of an uplink. The switches' own LLDP now says which leaf each job node is cabled to: leaf-2
    is read, its down uplink refuses the drill, and the reading says how leaf-2 was found."""
    import requests

    twin = twin_factory(defects=["uplink-down-before-drill"], scale=300.0)
    requests.patch(f"{twin.url}/api/v1/nodes/gpu-train-02", json={"metadata": {"labels": {
        "network.gpu-drills.io/leaf": "leaf-1"}}}, headers={"Content-Type": "application/merge-patch+json"},
        timeout=5).raise_for_status()
    done = drills("run", "-m", "network", "-k", "carrying and not sonic and not nxos", "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path), "--run-id", "lldp")
    (rec,) = records(tmp_path / "lldp")
    assert done.returncode == 2 and (rec["verdict"], rec["category"]) == ("inconclusive", "precondition_not_met"), \
        (rec["reason"], done.stdout[-2000:])
    reading = _reading(rec, "uplink leaf-2:Ethernet1/31")
    assert reading["ok"] is False and "LLDP of leaf-2 shows gpu-train-02" in reading["source"], reading
