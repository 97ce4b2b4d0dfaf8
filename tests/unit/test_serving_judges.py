"""What counts as a served completion, and the inference judges that keep a broken platform from passing
(issue 12 items 4 and 5): small literal inputs, no twin."""

from __future__ import annotations

import json
import socket

import pytest

from drills.load.bucket_stats import kind_counts, served_by
from drills.load.buckets import Bucket, BucketAccumulator, merge_buckets
from drills.load.outcome import classify_answer, classify_exception, client_timeout_wall_s
from drills.measure.replicas import FaultEffect, Replacement, endpoint_pods, served_count
from drills.verdicts.serving import judge_fault_effect, judge_replacements, judge_visible_failures
from drills.verdicts.timeline import Verdict, combine

COMPLETION = {"choices": [{"index": 0, "text": "the cluster recovered"}]}
CHAT = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


@pytest.mark.parametrize("status, body, kind", [
    (200, COMPLETION, None),
    (200, CHAT, None),
    (200, {"object": "error", "error": {"message": "no ready replica"}, "choices": [{"index": 0, "text": ""}]},
     "error_200"),
    (200, {"error": "upstream failed", "choices": [{"index": 0, "text": "partial"}]}, "error_200"),
    (200, {"choices": [{"index": 0, "text": ""}]}, "invalid"),
    (200, {"choices": []}, "invalid"),
    (200, "<html>ok</html>", "invalid"),
    (503, {"error": {"message": "no ready replica"}}, "status"),
])
def test_a_success_is_a_valid_completion(status, body, kind):
    raw = body if isinstance(body, str) else json.dumps(body)
    assert classify_answer(status, raw.encode())[0] == kind


def test_a_completion_from_another_model_is_not_a_success():
    """A router's fallback answers with another model's text: a failure of its own kind, masked from dashboards;
    the model the endpoint answered as at first (vLLM names its served model) stays a success."""
    asked = {"llama-7b", "meta-llama/Llama-2-7b-chat-hf"}
    other = json.dumps({**COMPLETION, "model": "meta-llama/Llama-3.2-1B-Instruct"}).encode()
    kind, reason = classify_answer(200, other, asked)
    assert kind == "wrong_model" and "meta-llama/Llama-3.2-1B-Instruct, not llama-7b" in reason
    assert classify_answer(200, json.dumps({**COMPLETION, "model": "llama-7b"}).encode(), asked) == (None, "")
    assert classify_answer(200, json.dumps(COMPLETION).encode(), asked) == (None, "")  # no name: not judged
    assert classify_answer(200, other) == (None, "")  # nothing to compare with
    assert "1 requests returned 2xx with a completion from another model" in \
        judge_visible_failures({"wrong_model": 1}, 30.0).reason


def test_an_error_answer_keeps_its_message():
    assert classify_answer(502, b'{"error": {"message": "upstream connect error"}}') == \
        ("status", "502 upstream connect error")


class _Wrapped(Exception):  # geventhttpclient's RetriesExceeded keeps the cause in `original`
    def __init__(self, original):
        super().__init__("retries exceeded")
        self.original = original


def test_a_hung_request_is_a_timeout_even_when_wrapped():
    assert classify_exception(socket.timeout("timed out")) == "timeout"
    assert classify_exception(_Wrapped(TimeoutError())) == "timeout"
    assert classify_exception(ConnectionRefusedError()) == "connection"


def test_client_timeout_follows_the_dilated_clock_with_a_floor():
    assert client_timeout_wall_s(30, 1) == 30
    assert client_timeout_wall_s(30, 60) == 0.5
    assert client_timeout_wall_s(30, 600) == 0.25  # never below the floor: a busy machine is not a hang


def test_buckets_count_failure_kinds_and_answers_per_replica():
    acc = BucketAccumulator(0.05)
    acc.add(10.01, 5, None, replica="pod-a")
    acc.add(10.02, 5, None, replica="pod-b")
    acc.add(10.03, 500, "no answer", kind="timeout")
    acc.add(10.07, 1, "200 with an error payload", kind="error_200")
    lines = [b.to_json() for b in acc.take_all()]
    buckets = merge_buckets([Bucket.from_json(line) for line in lines * 2])  # two workers, same buckets
    assert kind_counts(buckets) == {"timeout": 2, "error_200": 2}
    assert served_by(buckets) == {"pod-a": 2, "pod-b": 2}
    assert served_by(buckets, start=10.05) == {}


def test_a_replacement_counts_only_ready_in_endpoints_and_serving():
    endpoints = {"subsets": [{"addresses": [{"ip": "10.0.0.7", "targetRef": {"name": "pod-a"}}],
                              "notReadyAddresses": [{"ip": "10.0.0.8", "targetRef": {"name": "pod-b"}}]}]}
    assert endpoint_pods(endpoints) == {"pod-a", "10.0.0.7"}
    pod = {"metadata": {"name": "pod-c"}, "status": {"podIP": "10.0.0.9"}}
    assert served_count(pod, {"10.0.0.9:8000": 3, "pod-c": 1, "pod-a": 5}) == 4
    outside = Replacement("pod-c", True, False, 0)
    silent = Replacement("pod-d", True, True, 0)
    unknown = Replacement("pod-e", True, True, None)  # the endpoint names no replica: Ready + Endpoints count
    v = judge_replacements([outside, silent], 2)
    assert not v.passed and v.measured == 0
    assert "replacement pod-c is Ready but not in the Service's endpoints" in v.reason
    assert "replacement pod-d is Ready and in the Service's endpoints but has not served a request" in v.reason
    assert judge_replacements([unknown], 1).passed
    assert "no replacement at all" in judge_replacements([], 1).reason


def test_masked_failures_fail_and_name_their_count():
    assert judge_visible_failures({"status": 40, "connection": 3}, 30.0).passed  # honest errors: the budget's job
    v = judge_visible_failures({"error_200": 12, "timeout": 3, "status": 1}, 30.0)
    assert not v.passed and v.measured == 15
    assert v.reason == ("12 requests returned HTTP 200 with an error payload; "
                        "3 requests hung past the 30s client timeout")


def test_a_fault_without_effect_is_inconclusive_not_a_pass():
    effect = FaultEffect(restart_mode=False, killed={"u1": "pod-a", "u2": "pod-b"})
    effect.observe("ADDED", {"metadata": {"uid": "u1", "name": "pod-a"}})
    effect.observe("ADDED", {"metadata": {"uid": "u2", "name": "pod-b"}})
    effect.observe("DELETED", {"metadata": {"uid": "u1", "name": "pod-a"}})
    effect.finish()
    assert effect.unaffected == ("pod-b",)
    v = judge_fault_effect(effect.unaffected, 2, restart_mode=False)
    assert not v.passed and v.inconclusive and v.verdict == "inconclusive"
    assert v.reason.startswith("inconclusive: the fault had no effect on 1 of 2 killed pods (pod-b")
    overall = combine([v, Verdict("recovery", True, 1.0, 300.0, "s", "recovered")])
    assert overall.inconclusive and not overall.passed


def test_a_restarted_container_or_a_pod_already_gone_is_an_effect():
    effect = FaultEffect(restart_mode=True, killed={"u1": "pod-a", "u2": "pod-b"}, restarts_before={"pod-a": 0})
    effect.observe("MODIFIED", {"metadata": {"uid": "u1", "name": "pod-a"},
                                "status": {"containerStatuses": [{"restartCount": 1}]}})
    effect.finish()  # u2 never listed: already gone
    assert effect.had_effect and judge_fault_effect((), 2, True).passed
