"""Quiet monitoring (drills/detect/judge.py `judge_quiet`, drills/detect/watching.py `rule_metrics`): a planned
operation that pages fails in its own category; silence is a PASS only when every named alert was watching, else
inconclusive naming why. Small literal inputs, expectations by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import yaml

from drills.core.catalog import drill_for_tags
from drills.core.record import Category
from drills.detect.judge import judge_quiet
from drills.detect.pack import RULES_DIR
from drills.detect.watching import rule_metrics

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)
SERVING = ["InferenceUnavailable", "InferenceReplicasUnavailable", "InferenceLatencyBurn"]
QUIET = {a: None for a in SERVING}
NONE_FIRED = {a: None for a in SERVING}


def test_silence_of_watching_rules_passes():
    verdict = judge_quiet(SERVING, T0, NONE_FIRED, QUIET)
    assert verdict.passed and verdict.measured == 0
    assert verdict.reason.startswith("none of InferenceUnavailable, InferenceReplicasUnavailable, "
                                     "InferenceLatencyBurn fired through the drill, and each was watching")


@pytest.mark.parametrize("tag", ["inference_rolling_restart", "inference_noisy_neighbour"])
def test_an_alert_that_fires_fails_paged_naming_it_and_when(tag):
    fired = {**NONE_FIRED, "InferenceUnavailable": T0 + timedelta(seconds=20)}
    verdict = judge_quiet(SERVING, T0, fired, {a: "blind" for a in SERVING})  # fired: evidence, watching or not
    assert not verdict.passed and not verdict.inconclusive and verdict.measured == 1
    assert verdict.reason == ("the monitoring paged during the drill: InferenceUnavailable 20s after it — the on-call "
                              "was woken for it")
    assert drill_for_tags([tag]).category(verdict.name) is Category.PAGED


def test_a_rule_that_is_not_watching_makes_silence_inconclusive_naming_why():
    blind = {**QUIET, "InferenceLatencyBurn": "its rule reads vllm:e2e_latency_bucket, of which Prometheus has no series"}
    verdict = judge_quiet(SERVING, T0, NONE_FIRED, blind)
    assert not verdict.passed and verdict.inconclusive and verdict.unobserved
    assert verdict.reason == ("quiet proves nothing, the monitoring was not watching — InferenceLatencyBurn: its rule "
                              "reads vllm:e2e_latency_bucket, of which Prometheus has no series")
    unchecked = judge_quiet(SERVING, T0, NONE_FIRED, {})  # nothing said about a rule is not "watching"
    assert unchecked.inconclusive and "InferenceUnavailable: not checked" in unchecked.reason


def test_already_firing_unread_or_no_fault_is_inconclusive():
    assert judge_quiet(SERVING, T0, NONE_FIRED, QUIET, already=["InferenceLatencyBurn"]).inconclusive
    unread = judge_quiet(SERVING, T0, NONE_FIRED, QUIET, unread="Alertmanager http://am was not read")
    assert unread.inconclusive and unread.reason.endswith("Alertmanager http://am was not read")
    assert judge_quiet(SERVING, None, NONE_FIRED, QUIET).inconclusive


def test_rule_metrics_are_the_selectors_not_functions_keywords_labels_or_strings():
    assert rule_metrics('sum by (model_name) (rate(vllm:e2e_request_latency_seconds_bucket{le="10.0"}[5m])) '
                        '/ on (model_name) group_left kube_deployment_spec_replicas > 14.4 * 0.01') == [
        "vllm:e2e_request_latency_seconds_bucket", "kube_deployment_spec_replicas"]
    assert rule_metrics('{__name__="up", job="x"} == 0 unless absent(foo_total offset 5m)') == ["up", "foo_total"]
    pack = {r["alert"]: rule_metrics(r["expr"]) for f in ("inference", "storage")
            for g in yaml.safe_load((RULES_DIR / f"{f}.yaml").read_text())["groups"] for r in g["rules"]}
    assert pack["InferenceReplicasUnavailable"] == ["kube_deployment_status_replicas_available",
                                                    "kube_deployment_spec_replicas",
                                                    "kube_deployment_status_replicas_updated"]
    assert pack["CheckpointStoreSaturated"] == ["node_mountstats_nfs_operations_request_time_seconds_total"]


def test_every_detection_step_arms_the_watch_in_either_language():
    """A zh-CN run must arm detection before its fault as an English one does (else an alert that fired and went
    during the drill is never seen, and a quiet claim passes it by): every feature line of a detection step, in
    features/ and features/zh/, is recognised; no Given/When line is."""
    from pathlib import Path

    from fixtures.detection import monitoring_step

    root = Path(__file__).parents[2] / "features"
    keywords = {"Given": "setup", "When": "setup", "假如": "setup", "当": "setup",
                "Then": "check", "And": "check", "而且": "check", "那么": "check"}

    def split(line: str) -> tuple[str, str] | None:
        for word, kind in keywords.items():
            if line.startswith(word):
                return kind, line[len(word):].strip()
        return None

    parsed = [p for f in root.rglob("*.feature") for line in f.read_text(encoding="utf-8").splitlines()
              if (p := split(line.strip())) is not None]
    armed = [text for kind, text in parsed if kind == "check" and monitoring_step(text)]
    assert sum("CheckpointStoreSaturated" in s for s in armed) == 2  # en + zh
    assert sum("InferenceLatencyBurn" in s for s in armed) == 4  # rolling restart, noisy neighbour; en + zh
    assert sum(s in ("it resolves after the flood stops", "打满结束后该告警解除") for s in armed) == 2
    assert not [text for kind, text in parsed if kind == "setup" and monitoring_step(text)]
