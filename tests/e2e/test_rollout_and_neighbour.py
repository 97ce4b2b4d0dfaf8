"""The rolling-restart and noisy-neighbour drills (issue 35, the seed §5.3 and §5.4) on the twin: the real `drills
run` restarts the serving Deployment as `kubectl rollout restart` does, then submits a burst of low-priority Volcano
training jobs, both under locust load. Each twin below carries one rolling-restart construction and one noisy-
neighbour construction that do not touch each other (a rollout runs no burst; a burst replaces no pod unless it
evicts it), so the two drills share one twin and one run: four runs instead of eight.

| twin (defects)                                    | rolling restart             | noisy neighbour                       |
|---------------------------------------------------|-----------------------------|---------------------------------------|
| healthy, 30 s endpoint propagation (profile edit) | pass                        | pass: 4 jobs run, 4 wait in the queue |
| no-readiness-probe + no-priority-class            | fail slo_breach (502s)      | pass: its queue is not reclaimable    |
| no-prestop-drain + serving-unprotected (shared-queue + no-priority-class) | fail slo_breach (502s) | fail serving_evicted: 1 of 2 preempted (the PDB keeps one) |
| rollout-all-at-once + shared-queue + no-priority-class + no-pdb | fail unsafe_rollout | fail serving_evicted: 2 of 2 preempted |
| the same, 6 training nodes (profile edit: 32 free GPUs) | fail unsafe_rollout | inconclusive no_effect: all 8 jobs fit on training nodes (PASS before) |

The healthy twin carries the same 30 s endpoint propagation as no-prestop-drain: its 40 s preStop covers it, so the
defect's FAIL comes from the missing drain. The serving replicas have three lines of defence against a burst: a
queue of their own (Volcano preempts only within a queue and reclaims only from reclaimable queues), a PriorityClass
above the training jobs (what preempt compares within a queue) and a PodDisruptionBudget (Volcano's pdb plugin never
takes a victim below it). One missing keeps serving (no-priority-class here; shared-queue and no-pdb alone are
bench/verdicts.yaml rows, `make verdicts` runs them one defect at a time); with queue and priority gone the burst
preempts a replica, and without the budget as well, both.

Issue 30, class 3 (red team, wave 6): the same unprotected serving on a roomier cluster (two more training nodes) — the
burst fits in the free GPUs, nothing ever asks for the serving replicas' GPUs, and "none evicted" passed a platform
whose burst takes both replicas the moment the cluster is full. The drill now needs evidence that the burst contested
the serving GPUs (a burst pod left Unschedulable, placed on a serving node, or a replica disrupted), else it is
inconclusive (no_effect). `make test` runs that twin in place of the 2-of-2 one (same defects, one twin);
bench/matrix.py runs both.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from bench.verdicts import mismatches, rows, site_profile
from drills.core.kube import connect_twin
from drills.faults import Target, rollout
from drills.profile.model import load_target
from drills.twin.profile import PROFILES_DIR
from tests.e2e.drill_helpers import drills, records, write_profile
from tests.e2e.matrix import cases

pytestmark = [pytest.mark.slow, pytest.mark.inference]

RESTART, NEIGHBOUR = "inference-rolling-restart", "inference-noisy-neighbour"
MARKS = "inference_rolling_restart or inference_noisy_neighbour"
SCALE = 60  # the load is sparse in cluster time at higher scales: a 30 s propagation window must see requests
RESTART_ROWS = {r.defect: r for r in rows("inference_rolling_restart")}
NEIGHBOUR_ROWS = {r.defect: r for r in rows("inference_noisy_neighbour")}
TWINS = [("no-readiness-probe", ["no-priority-class"]), ("no-prestop-drain", ["serving-unprotected"]),
         ("rollout-all-at-once", ["shared-queue", "no-priority-class", "no-pdb"])]
ROOMY = "roomy"  # the twin's profile edit: 6 training nodes, so all 8 burst jobs of 4 GPUs find free GPUs


def _run(twin, tmp_path: Path, run_id: str) -> dict[str, dict]:
    done = drills("run", "-m", MARKS, "--twin-state", str(twin.state_dir), "--no-html", "--reports", str(tmp_path),
                  "--run-id", run_id)
    recs = {r["drill"]: r for r in records(tmp_path / run_id)}
    assert set(recs) == {RESTART, NEIGHBOUR}, done.stdout + done.stderr
    return recs


def _checks(rec: dict) -> dict:
    return {c["name"]: c for c in rec["details"]["checks"]}


# rows run on twins of their own (make verdicts; wave 7's serving-nothing rows: test_steady_state.py, test_detect_stack.py;
# wave 8's serving already slow: test_steady_state.py)
ISSUE_30 = {"scaled-down-deployment", "long-completions", "empty-replacements", "slow-serving-before-drill"}


def test_the_constructions_are_the_tables():
    assert set(RESTART_ROWS) - ISSUE_30 == {"no-readiness-probe", "no-prestop-drain", "rollout-all-at-once"}
    assert {d for d, r in NEIGHBOUR_ROWS.items() if r.verdict == "pass"} == {"no-priority-class", "shared-queue",
                                                                            "no-pdb"}  # alone: pass (defence in depth)
    assert NEIGHBOUR_ROWS["serving-unprotected"].verdict == "fail"  # shared-queue + no-priority-class, as one defect
    assert {d for d, _ in TWINS} == set(RESTART_ROWS) - ISSUE_30


def test_a_healthy_platform_restarts_and_holds_a_burst_without_users_noticing(twin_factory, tmp_path):
    profile = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    profile["workloads"]["inference"]["llama-7b-infer"]["endpoints_lag"] = "30s"
    twin = twin_factory(profile=write_profile(tmp_path / "propagating.yaml", yaml.safe_dump(profile)), scale=SCALE)
    recs = _run(twin, tmp_path, "healthy")
    restart, neighbour = recs[RESTART], recs[NEIGHBOUR]
    assert restart["verdict"] == "pass", restart["reason"]
    rollout = restart["details"]["rollout"]
    before, after = rollout["pods_before"], rollout["pods_after"]
    assert len(before) == 2 and len(after) == 2 and not rollout["left"]
    assert not set(before.values()) & {p["uid"] for p in after.values()}  # replaced: judged by uid, not by name
    assert all(p["ready"] and p["in_endpoints"] and p["served"] > 0 for p in after.values())
    assert rollout["min_available"] == 2 and rollout["completed_s"] == restart["recovery_s"] > 60  # two model loads
    assert restart["details"]["load"]["failures"] == 0 and restart["details"]["load"]["requests"] > 50
    assert restart["details"]["restart"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert neighbour["verdict"] == "pass", neighbour["reason"]
    jobs = neighbour["details"]["neighbour"]["burst_jobs"]
    running = [j for j in jobs.values() if j["phase"] == "Running"]
    assert len(jobs) == 8 and len(running) == 4  # the two free training nodes hold 4 jobs of 4 GPUs; 4 wait
    assert all(n.startswith("gpu-train-") for j in running for n in j["nodes"])
    assert not neighbour["details"]["neighbour"]["disrupted"]
    waiting = [p for j in jobs.values() for p in j["unschedulable"]]  # the 4 waiting jobs contested the serving GPUs
    effect = _checks(neighbour)["fault effect"]
    assert len(waiting) == 4 and effect["verdict"] == "pass" and "4 burst pod(s) found no free GPUs" in str(effect)


def _roomy(tmp_path: Path) -> str:
    """minimal with 6 training nodes (4 × 8 GPUs more than the job's 16 in all): the burst's 32 GPUs are all free."""
    profile = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    pool = profile["node_pools"]["training"]
    pool["count"], pool["leaves"] = 6, [*pool["leaves"], "leaf-1", "leaf-2"]
    return write_profile(tmp_path / "roomy.yaml", yaml.safe_dump(profile))


# make test: the two constructions that fail each drill on its own check (all at once: the rollout's availability;
# no drain + serving unprotected: users' errors and the evictions), the last on the roomy cluster (the burst's no
# effect); bench/matrix.py adds no-readiness-probe and the last on the minimal cluster (2 of 2 preempted)
CASES = [(*t, "minimal") for t in TWINS] + [(*TWINS[2], ROOMY)]
SAMPLED = cases([CASES[1], CASES[3]], CASES)


@pytest.mark.parametrize("restart_defect, neighbour_defects, cluster", SAMPLED,
                         ids=[f"{d}-{c}" for d, _, c in SAMPLED])
def test_each_construction_gets_its_verdict_for_its_own_reason(restart_defect, neighbour_defects, cluster,
                                                               twin_factory, tmp_path):
    profile = _roomy(tmp_path) if cluster == ROOMY else "minimal"
    twin = twin_factory(profile=profile, defects=[restart_defect, *neighbour_defects], scale=SCALE)
    recs = _run(twin, tmp_path, restart_defect)
    restart, neighbour = recs[RESTART], recs[NEIGHBOUR]
    row = RESTART_ROWS[restart_defect]
    assert not mismatches(row, row.exit, restart), mismatches(row, row.exit, restart)  # the run's exit is both drills'
    checks = _checks(restart)
    assert checks["rollout"]["verdict"] == "pass"  # every defect still completes the rollout: its own check fails
    if restart_defect == "rollout-all-at-once":
        assert restart["details"]["rollout"]["min_available"] == 0 and restart["details"]["load"]["failures"] > 0
    else:
        assert checks["unavailable replicas"]["verdict"] == "pass"  # a replica was always Ready: users still lost
        assert restart["details"]["load"]["failures"] > 0
    if len(neighbour_defects) == 1:  # a named defect: its row (one line of defence missing: the other holds)
        (defect,) = neighbour_defects
        row = NEIGHBOUR_ROWS[defect]
        assert not mismatches(row, row.exit, neighbour), mismatches(row, row.exit, neighbour)
        if row.verdict == "pass":
            return
    if cluster == ROOMY:  # issue 30 class 3: PASS before ("none of the 2 serving replicas was evicted or preempted")
        assert neighbour["verdict"] == "inconclusive" and neighbour["category"] == "no_effect", neighbour["reason"]
        assert _checks(neighbour)["fault effect"]["verdict"] == "inconclusive"
        assert "never contested the serving replicas' GPUs" in neighbour["reason"], neighbour["reason"]
        jobs = neighbour["details"]["neighbour"]["burst_jobs"]
        assert len(jobs) == 8 and all(j["phase"] == "Running" and not j["unschedulable"] for j in jobs.values()), jobs
        assert all(n.startswith("gpu-train-") for j in jobs.values() for n in j["nodes"]), jobs
        return
    assert _checks(neighbour)["fault effect"]["verdict"] == "pass", neighbour["reason"]
    assert neighbour["verdict"] == "fail" and neighbour["category"] == "serving_evicted", neighbour["reason"]
    disrupted = neighbour["details"]["neighbour"]["disrupted"]
    lost = 1 if "no-pdb" not in neighbour_defects else 2  # the budget (minAvailable 1) keeps one replica serving
    assert len(disrupted) == lost and {d["reason"] for d in disrupted} == {"PreemptionByScheduler"}
    assert neighbour["reason"].startswith(f"serving evictions: {lost} of 2 serving replicas evicted or preempted")
    assert neighbour["details"]["neighbour"]["min_available"] == 2 - lost


def test_a_restart_reverted_mid_rollout_rolls_back_to_the_template_before_the_drill(twin_factory):
    """What revert means for a restart: nothing to undo once the rollout completed; cut short (a Ctrl-C, new pods that
    never become available) it rolls back as `kubectl rollout undo` does — the restartedAt of before — so the
    ReplicaSet that served before the drill serves again; read back, and idempotent."""
    twin = twin_factory(scale=SCALE)
    cluster = connect_twin(twin.info["kubeconfig"], twin.info["url"], state_dir=str(twin.state_dir))
    target, apps = Target(cluster), cluster.apps

    def read(kind: str) -> dict:
        if kind == "deployment":
            return json.loads(apps.read_namespaced_deployment("llama-7b-infer", "ai-platform", _preload_content=False).data)
        return json.loads(apps.list_namespaced_replica_set("ai-platform", _preload_content=False).data)

    deadline = time.monotonic() + 30
    while (read("deployment").get("status") or {}).get("readyReplicas") != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    serving = {r["metadata"]["name"] for r in read("rs")["items"] if r["spec"]["replicas"]}
    plan = rollout.plan(target, load_target(None))
    record = rollout.inject(target, plan).to_dict()
    assert read("deployment")["spec"]["template"]["metadata"]["annotations"][rollout.ANNOTATION] == record["restarted_at"]
    assert rollout.revert(target, dict(plan.undo), record) == "rolled back"  # the rollout has only begun
    assert rollout.revert(target, dict(plan.undo), record) == "nothing to undo"  # the template is no longer ours
    assert rollout.ANNOTATION not in read("deployment")["spec"]["template"]["metadata"]["annotations"]
    while not (reading := rollout.verify(target, dict(plan.undo), record)).undone and time.monotonic() < deadline + 30:
        time.sleep(0.1)
    assert reading.undone, reading.sentence()
    assert {r["metadata"]["name"] for r in read("rs")["items"] if r["spec"]["replicas"]} == serving



def test_a_p99_of_a_few_dozen_answers_is_not_observed(twin_factory, tmp_path):
    """Issue 30, class 4 (red team, wave 6): completions take ~20 s (defect long-completions), so the feature's 4 users
    get ~12 answers a cluster minute: the baseline held 16, the rollout's window about 24, the burst's about 58. Each
    "p99" was the slowest answer; both drills PASSed on "1 x baseline" (bench/verdicts.yaml `before:`). Now the load
    runs on before the fault until its baseline holds 100 answers, and the one p99 judge (drills/verdicts/latency.py)
    says the window's figure was not observed, naming both counts; every other check still passes — the platform
    serves, the drill cannot say how its tail behaved."""
    twin = twin_factory(defects=["long-completions"], scale=SCALE)
    # make test: the rollout; bench/matrix.py: the burst's too
    marks = " or ".join(cases(["inference_rolling_restart"], ["inference_rolling_restart", "inference_noisy_neighbour"]))
    # the site says its completions are long (its nominal latency): nominal, so the drill runs (the rows' `nominal`)
    profile = site_profile({**RESTART_ROWS["long-completions"].nominal, **NEIGHBOUR_ROWS["long-completions"].nominal},
                           tmp_path / "long.yaml")
    done = drills("run", "-m", marks, "--twin-state", str(twin.state_dir), "--no-html", "--reports", str(tmp_path),
                  "--run-id", "long", "--profile", str(profile))
    recs = {r["drill"]: r for r in records(tmp_path / "long")}
    assert RESTART in recs, done.stdout + done.stderr
    for drill, rec in recs.items():
        row = (RESTART_ROWS if drill == RESTART else NEIGHBOUR_ROWS)["long-completions"]
        assert not mismatches(row, row.exit, rec), mismatches(row, row.exit, rec)
        checks = _checks(rec)
        assert checks["p99 latency"]["verdict"] == "inconclusive", checks["p99 latency"]
        assert {c["verdict"] for n, c in checks.items() if n != "p99 latency"} == {"pass"}, checks
        load = rec["details"]["load"]
        # the load ran on before the fault until its baseline held 100 answers (wait_for_load); the window cannot
        assert load["failures"] == 0 and load["baseline_answers"] >= 100 > load["answers"], load
        assert f"the window {load['window']} held {load['answers']} answer(s)" in rec["reason"], rec["reason"]
