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
