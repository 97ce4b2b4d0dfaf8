"""The steady-state hypothesis, judged (drills/verdicts/steady.py), the profile's `nominal:` section, and the
evidence-of-effect judges added with it (issue 30): pure functions, small literal inputs. Each check can fail,
and a test shows it failing for its reason."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from drills.core.errors import InvalidProfile
from drills.measure.job_state import JobState
from drills.measure.store_identity import find_job_checkpoints
from drills.profile.model import parse_profile
from drills.verdicts.serving import judge_fault_target
from drills.verdicts.steady import (Hypothesis, replicas_reading, restart_reading, store_reading, throughput_reading,
                                    uplink_reading)
from drills.verdicts.store_target import judge_store_target
from drills.verdicts.training import judge_lost_progress

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def test_a_job_at_a_fifth_of_its_nominal_throughput_is_not_nominal_and_the_sentence_says_why():
    off = throughput_reading(51.2, "samples/s", "pods/log ai-platform/w-0", 256.0, "the profile's nominal", 0.8)
    ok = throughput_reading(250.0, "samples/s", "pods/log ai-platform/w-0", 256.0, "the profile's nominal", 0.8)
    assert off.ok is False and ok.ok is True
    text = off.sentence()
    assert "51.2 samples/s (20% of nominal)" in text and "≥ 205 samples/s" in text and "pods/log ai-platform/w-0" in text


def test_an_unread_throughput_or_an_unknown_nominal_is_not_observed_never_nominal():
    assert throughput_reading(None, "samples/s", "no step lines", 256.0, "profile", 0.8).ok is None
    no_history = throughput_reading(256.0, "samples/s", "log", None, "history: only 1 passed run", 0.8)
    assert no_history.ok is None and "history: only 1 passed run" in no_history.expected
    hyp = Hypothesis("before", "gpu-node-loss", (no_history,))
    assert not hyp.nominal and "NOT OBSERVED" in hyp.reason()


def test_a_recent_restart_breaks_the_hypothesis_before_and_only_a_later_one_after_the_revert():
    ten_min_ago = NOW - timedelta(minutes=10)
    assert restart_reading(ten_min_ago, "the job restarted", "job", NOW, 1800.0).ok is False
    assert restart_reading(NOW - timedelta(hours=1), "the job restarted", "job", NOW, 1800.0).ok is True
    assert restart_reading(None, "", "job", NOW, 1800.0).ok is True
    reverted = NOW - timedelta(minutes=1)
    assert restart_reading(ten_min_ago, "the drill's own", "job", NOW, 1800.0, since=reverted).ok is True
    assert restart_reading(NOW - timedelta(seconds=20), "a crash", "job", NOW, 1800.0, since=reverted).ok is False
    # drills one after another on one cluster: the earlier drill's own restart, verified restored after it
    earlier = restart_reading(ten_min_ago, "the job restarted", "job", NOW, 1800.0, verified=NOW - timedelta(minutes=2))
    assert earlier.ok is True and "by an earlier drill of this run" in earlier.sentence()
    later = restart_reading(ten_min_ago, "the job restarted", "job", NOW, 1800.0, verified=NOW - timedelta(minutes=20))
    assert later.ok is False  # a restart after the last verified restore is not excused


def test_replicas_uplinks_and_the_store_each_judged_against_their_nominal():
    assert replicas_reading(1, 1, 1, 2, "deployments x").ok is False
    assert replicas_reading(2, 2, 2, 2, "deployments x").ok is True
    assert uplink_reading("leaf-2", "Ethernet1/31", False, False, "ssh").ok is False
    assert uplink_reading("leaf-2", "Ethernet1/31", True, False, "ssh").ok is False  # the far end is down
    assert uplink_reading("leaf-2", "Ethernet1/31", True, True, "ssh").ok is True
    assert store_reading(8.6, "probe", 40.0, 0.5).ok is False and store_reading(35.0, "probe", 40.0, 0.5).ok is True
    withheld = store_reading(None, "not probed", 40.0, 0.5, withheld=True)
    assert withheld.ok is None and withheld.withheld


def test_the_profile_declares_nominal_per_drill_with_documented_ranges():
    p = parse_profile("nominal: {settle_s: 2m, drills: {gpu-node-loss: {training_throughput: {history: 5}, "
                      "no_worker_restart_s: 30m}}}")
    state = p.nominal.of("gpu-node-loss")
    assert p.nominal.settle_s == 120 and state.training_throughput.history == 5 and state.no_worker_restart_s == 1800
    assert state.facets == ("training throughput", "worker restarts")
    assert p.nominal.of("switch-uplink").uplinks_up  # undeclared: the facets that need no site figure
    assert parse_profile("nominal: {drills: {switch-uplink: {}}}").nominal.of("switch-uplink").facets == ()
    with pytest.raises(InvalidProfile, match="either as `value`.*or as `history: N`"):
        parse_profile("nominal: {drills: {gpu-node-loss: {training_throughput: {value: 256, history: 3}}}}")
    with pytest.raises(InvalidProfile, match="unknown drill gpu-node-los"):
        parse_profile("nominal: {drills: {gpu-node-los: {}}}")
    with pytest.raises(InvalidProfile, match="nominal.settle_s"):
        parse_profile("nominal: {settle_s: 2h}")
    with pytest.raises(InvalidProfile, match="min_ratio"):
        parse_profile("nominal: {drills: {gpu-node-loss: {training_throughput: {value: 256, min_ratio: 1.5}}}}")


def test_the_killed_pods_must_be_what_the_load_measured():
    hit = judge_fault_target(["p-1"], {"p-1": 12, "p-2": 11}, ("p-1", "p-2"), "svc")
    assert hit.passed and "p-1 answered 12" in hit.reason
    miss = judge_fault_target(["decoy-1"], {"p-1": 12}, ("p-1",), "svc")
    assert miss.inconclusive and "none of the killed pods (decoy-1) answered the load" in miss.reason
    unnamed = judge_fault_target(["p-1"], {}, ("p-1", "p-2"), "svc")  # a header configured, never answered
    assert unnamed.inconclusive and "named no replica" in unnamed.reason
    no_header = judge_fault_target(["p-1"], None, ("p-1", "p-2"), "svc")
    assert no_header.passed and "which pod answered is not observed" in no_header.reason
    outside = judge_fault_target(["x-1"], None, ("p-1",), "svc")
    assert outside.inconclusive and "x-1 were not in service svc's endpoints" in outside.reason


def test_the_flooded_store_must_hold_the_jobs_checkpoints(tmp_path):
    (tmp_path / "ai-platform" / "llm-8b").mkdir(parents=True)
    (tmp_path / "ai-platform" / "llm-8b" / "step-6000.json").write_text("{}")
    (tmp_path / "ai-platform" / "other-job").mkdir()
    (tmp_path / "ai-platform" / "other-job" / "step-4500.json").write_text("{}")
    found, seen = find_job_checkpoints(tmp_path, "llm-8b", [4500, 6000])
    assert found == ["ai-platform/llm-8b/step-6000.json"] and seen >= 4
    assert judge_store_target(found, str(tmp_path), "llm-8b", [6000], seen).passed
    hf = tmp_path / "hf" / "llm-8b" / "checkpoint-7500"
    hf.mkdir(parents=True)
    assert "hf/llm-8b/checkpoint-7500" in find_job_checkpoints(tmp_path, "llm-8b", [7500])[0]
    empty = judge_store_target([], "/mnt/scratch", "llm-8b", [4500, 6000], 0)
    assert empty.inconclusive and "holds no checkpoint of llm-8b at the steps its log saved (4500, 6000" in empty.reason


def test_an_interval_the_log_does_not_show_is_not_taken_from_the_profile():
    state = JobState()
    state.checkpoints.append(("uid", NOW - timedelta(minutes=5), 6000))
    interval, source = state.interval(NOW, 1500)
    assert interval is None and source.startswith("not observed") and "only step 6000 saved" in source
    state.checkpoints.append(("uid", NOW - timedelta(minutes=1), 7500))
    assert state.interval(NOW, 20000) == (1500, "log (saves at steps 6000 and 7500)")  # the log beats the profile


def test_lost_progress_with_no_observed_interval_is_inconclusive_not_a_fail_nor_a_pass():
    from drills.measure.checkpoint import TrainingRecovery
    from drills.verdicts.timeline import Timeline

    rec = TrainingRecovery(Timeline(), 6150, 6000, 6000, 6001, (), None, None, None,
                           checkpoint_interval=None, interval_source="not observed: the log shows only step 6000 saved")
    verdict = judge_lost_progress(rec, 2000)
    assert verdict.inconclusive and "checkpoint interval was not observed (not observed: the log shows" in verdict.reason
    over = judge_lost_progress(TrainingRecovery(Timeline(), 204150, 200000, 200000, 200001, (), None, None, None,
                                                checkpoint_interval=None, interval_source="not observed"), 2000)
    assert not over.passed and not over.inconclusive and "4150 steps lost" in over.reason  # observed: that fails it


def test_an_interval_the_log_does_not_show_is_read_from_the_stores_complete_checkpoints():
    """A job resumed just before this fault has logged one save since: its own store still shows the interval —
    two checkpoints it proves complete at the fault (a save the fault cut off is not one of them)."""
    from drills.measure.checkpoint import TrainingRecovery
    from drills.measure.ckpt_store import StoreCheckpoint, StoreReading
    from drills.verdicts.timeline import Timeline

    fault = NOW.timestamp()

    def ckpt(step: int, done: bool, at: float) -> StoreCheckpoint:
        return StoreCheckpoint(step, f"iter_{step:07d}", done, "tracker" if done else "no tracker", at, True, at)

    def rec(*checkpoints: StoreCheckpoint) -> TrainingRecovery:
        store = StoreReading("megatron", checkpoints, timed=True, root_changed_at=fault - 60)
        return TrainingRecovery(Timeline(injected=NOW), 24960, 24000, 24000, 24001, (), None, None, None,
                                checkpoint_interval=None, interval_source="not observed: only step 24000 saved",
                                store=store)

    ok = judge_lost_progress(rec(ckpt(22500, True, fault - 900), ckpt(24000, True, fault - 300)), 2000)
    assert ok.passed and "one checkpoint interval of 1500 steps (store (complete at the fault: checkpoints at steps " \
        "22500 and 24000)" in ok.reason
    sparse = judge_lost_progress(rec(ckpt(21000, True, fault - 1800), ckpt(22500, False, fault - 900),
                                     ckpt(24000, True, fault - 300)), 2000)
    assert not sparse.passed and not sparse.inconclusive and "every 3000 steps" in sparse.reason  # the cut save is no save
    one = judge_lost_progress(rec(ckpt(24000, True, fault - 300)), 2000)
    assert one.inconclusive and "only step 24000 saved" in one.reason


def test_a_history_nominal_is_the_median_of_the_last_passed_runs_baselines(tmp_path):
    import json

    from drills.measure.steady import history_nominal

    def run(name: str, hour: int, base: float, verdict: str = "pass") -> None:
        (tmp_path / name).mkdir()
        rec = {"drill": "gpu-node-loss", "verdict": verdict, "run_id": name, "wall_started": f"2026-01-01T{hour:02d}:00:00Z",
               "category": None if verdict == "pass" else "slo_breach",
               "details": {"job": "ai-platform/llm-8b", "baseline_throughput": base}}
        (tmp_path / name / "records.jsonl").write_text(json.dumps(rec) + "\n")

    run("r1", 1, 250.0)
    run("r2", 2, 51.0, verdict="fail")  # a degraded run's baseline never becomes nominal
    run("r3", 3, 256.0)
    run("r4", 4, 260.0)
    (tmp_path / "now").mkdir()
    value, source = history_nominal(tmp_path / "now", "ai-platform/llm-8b", 3)
    assert value == 256.0 and "median of the last 3 passed runs' baselines (r1, r3, r4)" in source
    missing, why = history_nominal(tmp_path / "now", "ai-platform/llm-8b", 5)
    assert missing is None and "only 3 passed run(s)" in why


def test_a_serving_platform_already_slow_before_the_fault_is_not_nominal(tmp_path):
    """Issue 30, class 1 on the serving drills (wave 8): the probe completions' median latency against the site's
    nominal × max_ratio — a platform already 4× slower than usual is not a baseline to judge 'p99 within 2×' from.
    No valid probe, or no nominal yet (history too short), is not observed."""
    import json

    from drills.measure.steady import history_facet
    from drills.verdicts.steady import latency_reading

    slow = latency_reading([1.52, 1.49, 1.55, 1.5], "POST /v1/completions × 4", 0.4, "the profile's nominal", 3.0)
    assert slow.ok is False and slow.value == pytest.approx(1.51)
    assert "1510 ms (median of 4 valid probe completion(s)), 3.8× nominal" in slow.sentence()
    assert "expected ≤ 1200 ms (3 × nominal 400 ms, the profile's nominal)" in slow.sentence()
    assert latency_reading([0.37, 0.36, 0.38, 0.37], "probe", 0.4, "nominal", 3.0).ok is True
    assert latency_reading([], "probe", 0.4, "nominal", 3.0).ok is None
    assert latency_reading([0.37], "probe", None, "history: only 1 passed run(s)", 3.0).ok is None

    p = parse_profile("nominal: {drills: {inference-pod-kill: {inference_latency: {value: 400ms, max_ratio: 2}}}}")
    spec = p.nominal.of("inference-pod-kill").inference_latency
    assert spec.value == 0.4 and spec.max_ratio == 2 and p.nominal.of("inference-pod-kill").facets == ("inference latency",)
    with pytest.raises(InvalidProfile, match="either as `value`.*or as `history: N`"):
        parse_profile("nominal: {drills: {inference-pod-kill: {inference_latency: {max_ratio: 2}}}}")
    with pytest.raises(InvalidProfile, match="max_ratio"):
        parse_profile("nominal: {drills: {inference-pod-kill: {inference_latency: {value: 1s, max_ratio: 0.5}}}}")

    def run(name: str, hour: int, latency: float, verdict: str = "pass", ok: bool = True) -> None:
        (tmp_path / name).mkdir()
        before = {"readings": [{"facet": "inference latency", "value": latency, "ok": ok}]}
        rec = {"drill": "inference-pod-kill", "verdict": verdict, "run_id": name,
               "wall_started": f"2026-01-01T{hour:02d}:00:00Z", "category": None if verdict == "pass" else "slo_breach",
               "details": {"steady_state": {"before": before}}}
        (tmp_path / name / "records.jsonl").write_text(json.dumps(rec) + "\n")

    run("r1", 1, 0.37)
    run("r2", 2, 1.5, verdict="fail")  # a degraded run's reading never becomes nominal
    run("r3", 3, 0.39)
    (tmp_path / "now").mkdir()
    value, source = history_facet(tmp_path / "now", "inference-pod-kill", "inference latency", 2)
    assert value == pytest.approx(0.38) and "median of the last 2 passed runs' readings (r1, r3)" in source
    assert history_facet(tmp_path / "now", "inference-pod-kill", "inference latency", 3)[0] is None


def test_a_drill_the_profile_opts_out_is_said_not_checked_never_nominal():
    """Red team, wave 8: `nominal.drills.switch-uplink: {}` is a documented opt-out; the drill then ran on an uplink
    already down and PASSed with nothing saying the platform was not checked. The record now says so (checked false,
    nominal unknown, why), and so do the console and the summary's drill table."""
    from drills.core.record import Outcome, Record
    from drills.report.summary import _drill_table
    from drills.report.text import labels

    opted = Hypothesis("before", "switch-uplink", (), opted_out="the profile opts switch-uplink out")
    data = opted.to_dict()
    assert data["checked"] is False and data["nominal"] is None and data["why"].startswith("the profile opts")
    rec = Record(run_id="r", drill="switch-uplink", scenario="Drop one uplink", verdict=Outcome.PASS, recovery_s=1.0,
                 target_s=900.0, phases={}, reason="recovered", details={"steady_state": {"before": data}})
    (row,) = _drill_table([rec], labels("en"))["rows"]
    assert row[-1] == "recovered (steady state not checked: the profile opts this drill out)"
