"""A busy machine's hiccup is not a hang; a hang is still one (drills/load/hung.py).

At 600× the load's wall wait is a quarter of a second (30 cluster seconds, floored). The construction: the
twin's whole process stopped (SIGSTOP) for a second of wall time under load, then continued — what a loaded
CI machine does to it for shorter spells. Every request in flight then waited past its wall wait, yet the
twin owed each an answer due well within the 30 s client timeout of its own clock. Judged on the wall clock
alone (no `cluster_timeout_s`), those requests counted as hung; asked, the twin says they were not. That a
real hang still counts is the hanging-pod construction (test_inference_integrity.py), and a request the
gateway never owes an answer is judged hung in a few wall waits below.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from drills.load import LoadRunner
from drills.load.bucket_stats import kind_counts
from drills.load.hung import HangJudge, post_asking_twin
from drills.load.outcome import client_timeout_wall_s
from drills.twin.launcher import start_twin

pytestmark = pytest.mark.slow

SCALE = 600.0
TIMEOUT_S = 30.0
STOPPED_S = 1.0  # wall seconds the twin's process is stopped: 600 cluster seconds, 20× the client timeout


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("twin"), profile="minimal", scale=SCALE)
    try:
        yield handle
    finally:
        handle.stop()


def _load_through_a_stopped_twin(twin, out_dir, cluster_timeout_s):
    runner = LoadRunner(twin.info["gateway"], users=8, spawn_rate=8, out_dir=out_dir, model="llama-7b",
                        timeout_s=client_timeout_wall_s(TIMEOUT_S, SCALE), latency_scale=SCALE,
                        cluster_timeout_s=cluster_timeout_s, run_time_limit_s=60)
    with runner:
        os.kill(twin.pid, signal.SIGSTOP)
        try:
            time.sleep(STOPPED_S)
        finally:
            os.kill(twin.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while sum(b.ok + b.fail for b in runner.buckets()) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)  # answers flow again after the stop
    buckets = runner.stop().buckets
    return kind_counts(buckets), buckets


@pytest.mark.parametrize("ask_twin", [True, False], ids=["asked", "wall-clock-alone"])
def test_a_stopped_twin_is_late_on_the_wall_clock_not_hung(twin, tmp_path, ask_twin):
    kinds, buckets = _load_through_a_stopped_twin(twin, tmp_path / "load", TIMEOUT_S if ask_twin else None)
    assert sum(b.ok + b.fail for b in buckets) >= 200
    if ask_twin:
        assert kinds.get("timeout", 0) == 0, kinds
    else:  # the construction bites: the same stop, judged on the wall clock, made hangs of late answers
        assert kinds.get("timeout", 0) >= 1, kinds


def test_a_request_the_twin_never_answers_is_hung_on_its_clock(twin):
    """No completion route takes this body as a request it owes (the model does not exist: 404 at once) — so
    ask the judge directly: owed nothing, the gateway's clock passing arrival + timeout makes it hung."""
    judge = HangJudge(TIMEOUT_S)
    assert judge.left(200, {"arrived": 100.0, "due": None, "now": 110.0}) == pytest.approx(20.0)
    assert judge.left(200, {"arrived": 100.0, "due": None, "now": 131.0}) < 0  # wedged: hung on its clock
    assert judge.left(200, {"arrived": 100.0, "due": 131.0, "now": 140.0}) < 0  # due after the timeout
    assert judge.left(200, {"arrived": 100.0, "due": 101.0, "now": 700.0}) > 0  # due in time: late on the wall
    assert judge.left(None, None) == 0.0  # the gateway did not answer
    unseen = HangJudge(TIMEOUT_S)
    assert unseen.left(404, {"now": 50.0}) == pytest.approx(30.0)
    assert unseen.left(404, {"now": 81.0}) < 0
    answer = post_asking_twin(twin.info["gateway"] + "/v1/completions", {"model": "llama-7b", "prompt": "hi",
                              "max_tokens": 4}, twin.info["gateway"], 0.25, TIMEOUT_S, SCALE)
    assert getattr(answer, "status_code", None) == 200, answer
