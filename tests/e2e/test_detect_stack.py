"""Detection against a real Prometheus and Alertmanager (drills/detect): the runner starts both, scraping a small
static target served here in the Prometheus text format with dcgm-exporter's own metric name and labels
(NVIDIA/dcgm-exporter etc/default-counters.csv @d5e5f51: DCGM_FI_DEV_XID_ERRORS, gpu/UUID/modelName/Hostname),
on a clock 60× faster than the wall, as the twin's. One stack for the module; each construction is one fault
on the target (a GPU reporting XID 79), judged as a drill judges it:

| construction                                         | judge            | verdict                       |
|------------------------------------------------------|------------------|-------------------------------|
| XID 79 on one GPU, the pack's GpuXidError            | detection ≤ 1 m  | pass (measured, cluster s)    |
| the same fault, the seed's NvidiaXidError (a metric   | detection ≤ 1 m  | FAIL not_detected             |
|   name dcgm-exporter does not export: blind)          |                  |                               |
| the XID cleared (recovery)                           | resolution       | pass                          |
| XID on all 8 GPUs at once, budget 3                  | alert storm      | FAIL alert_storm (8 > 3)      |
| the pack's GpuXidError / the seed's NvidiaXidError    | watching?        | yes / no: NVIDIA_XID_ERRORS_… |
|                                                      |                  |   has no series               |
| a vLLM replica (the twin's exporter) whose answers    | detection ≤ 4 m  | pass: InferenceServingNothing |
|   turn 70 % empty (HTTP 200, no token), all Ready     |                  |   (before: no rule, no alert) |
| `drills run`, built-in profile: node loss, uplink,    | detection ≤ 1 m, | pass each (TrainingNodeLost,  |
|   inference pod kill on the healthy twin             | resolution, storm|   FabricLinkDown, InferenceRe…|
| `drills run` storage flood, healthy twin (alone)      | detection ≤ 1 m, | pass (CheckpointStoreSaturat…)|
|                                                      | resolution, storm|                               |
|   … a blind copy of its rule, same flood              | detection ≤ 1 m  | FAIL not_detected             |
| `drills run` rolling restart, healthy twin (alone)    | quiet, storm     | pass (none fired, watching)   |
| `drills run` node loss, monitoring managed but blind  | detection ≤ 1 m  | FAIL not_detected (the drill) |
| `drills run` rolling restart, serving rules blind     | quiet            | INCONCLUSIVE not_observed     |

The `drills run` rows run in tests/e2e/test_detect_drills.py (and test_detect_resolution.py), files of their own so
the suite's file-by-file scheduling spreads them. Skipped, naming why, where Debian's prometheus /
prometheus-alertmanager are not installed.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from drills.core.catalog import drill_for_tags
from drills.core.clock import DilatedClock
from drills.core.record import Category
from drills.detect.alerts import read_alert_rules, read_alerts
from drills.detect.pack import alert_names, pack_files
from drills.detect.judge import judge_detection, judge_resolution, judge_storm
from drills.detect.objects import identity
from drills.detect.runner import open_monitoring
from drills.detect.watching import ALIVE_SCRAPES, BLIND, GAP_WALL_S, SEEN, UNREAD, observed_between, read_rules
from drills.detect.stack import missing_tools
from drills.profile.monitoring import MonitoringConfig
from drills.twin.exporters.vllm import ReplicaMetrics

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(missing_tools()), reason=f"{' and '.join(missing_tools())} not installed "
                                                               f"(Debian packages; `make bootstrap` installs them as root)")]

SCALE = 60.0
GPUS = 8
MINUTE = 60.0


class Served:
    """A static scrape target: `exposition()` in the Prometheus text format, over HTTP."""

    failing = False  # answer 503, as an exporter that stopped working does

    def __init__(self) -> None:
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if target.failing:
                    self.send_error(503)
                    return
                body = target.exposition()
                body = body if isinstance(body, bytes) else body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def exposition(self) -> str | bytes:
        raise NotImplementedError


class DcgmTarget(Served):
    """A stand-in for one node's dcgm-exporter: DCGM_FI_DEV_XID_ERRORS per GPU (the last XID, 0 when none)."""

    def __init__(self) -> None:
        self.xid = {gpu: 0 for gpu in range(GPUS)}
        super().__init__()

    def exposition(self) -> str:
        lines = ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
                 "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
        lines += [f'DCGM_FI_DEV_XID_ERRORS{{gpu="{g}",UUID="GPU-{g:04d}",pci_bus_id="00000000:{g + 16:02X}:00.0",'
                  f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-01",'
                  f'DCGM_FI_DRIVER_VERSION="550.54.15"}} {v}' for g, v in self.xid.items()]
        return "\n".join(lines) + "\n"


class VllmTarget(Served):
    """One vLLM replica's /metrics as the twin serves it (drills/twin/exporters/vllm.py: the twin's own exporter,
    fed the requests its gateway would count)."""

    def __init__(self) -> None:
        self.metrics = ReplicaMetrics("llama-7b", max_concurrency=8)
        super().__init__()

    def exposition(self) -> bytes:
        return self.metrics.exposition(inflight=0)


@pytest.fixture(scope="module")
def target():
    served = DcgmTarget()
    yield served
    served.server.shutdown()


@pytest.fixture(scope="module")
def vllm_target():
    served = VllmTarget()
    yield served
    served.server.shutdown()


@pytest.fixture(scope="module")
def monitoring(target, vllm_target, tmp_path_factory):
    clock = DilatedClock(scale=SCALE)
    config = MonitoringConfig(rules=["gpu", "seed", "inference"], alert_budget=3)
    scrape = [{"job_name": "dcgm-exporter", "static_configs": [{"targets": [target.address],
                                                               "labels": {"node": "gpu-node-01"}}]},
              {"job_name": "vllm", "static_configs": [{"targets": [vllm_target.address]}]}]
    mon = open_monitoring(config, clock, tmp_path_factory.mktemp("monitoring"), scrape)
    yield mon
    mon.close()


@pytest.fixture(scope="module")
def xid_fault(monitoring, target):
    """XID 79 on GPU 3, then cleared: the watch saw it from injection to well after the recovery."""
    clock = monitoring.clock
    watch = monitoring.watch()
    injected = clock.now()
    target.xid[3] = 79
    # the deadline is the budget: the blind seed rule is still watched this long
    watch.wait(lambda: watch.raised("GpuXidError") and watch.raised("NvidiaXidError"), clock.timestamp() + MINUTE)
    recovered = clock.now()
    target.xid[3] = 0
    watch.wait(lambda: watch.resolved("GpuXidError") is not None, clock.timestamp() + 10 * MINUTE)
    watch.stop()
    return watch, injected, recovered


def test_the_stack_evaluates_the_pack_it_was_given(monitoring):
    assert sorted(read_alert_rules(monitoring.prometheus_url)) == sorted(alert_names(pack_files(["gpu", "seed",
                                                                                               "inference"])))


def test_a_rule_is_watching_only_when_prometheus_evaluates_it_over_series_it_scrapes(monitoring, xid_fault):
    """What makes silence a claim (drills/detect/watching.py): the pack's GpuXidError reads a series the target
    exports; the seed's NvidiaXidError reads NVIDIA_XID_ERRORS_TOTAL, which nothing exports (blind: its silence
    proves nothing); a rule Prometheus does not have is named as such."""
    from drills.detect.watching import unwatched

    timing = monitoring.timing
    found = unwatched(monitoring.prometheus_url, ["GpuXidError", "NvidiaXidError", "FabricLinkDown"],
                      4 * timing.wall(timing.scrape_s))
    assert found["GpuXidError"] is None
    assert found["NvidiaXidError"] == ("its rule reads NVIDIA_XID_ERRORS_TOTAL, of which Prometheus has no series: "
                                       "nothing it scrapes exports it")
    assert found["FabricLinkDown"] == "Prometheus has no alerting rule named FabricLinkDown"


def test_a_sites_own_stack_is_read_where_it_is_and_on_the_wall_clock(monitoring, xid_fault):
    """prometheus: <url>, alertmanager: <url> — nothing started, nothing rewritten, only GETs."""
    site = open_monitoring(MonitoringConfig(prometheus=monitoring.prometheus_url,
                                            alertmanager=monitoring.alertmanager_url), monitoring.clock, Path("unused"))
    assert site.stack is None and site.timing.scale == 1 and not site.describe()["managed"]
    assert "GpuXidError" in read_alert_rules(site.prometheus_url)
    assert {a.name for a in read_alerts(site.alertmanager_url)} <= {"GpuXidError"}  # what the module's faults left


def test_the_stack_runs_at_the_sites_cadence_in_cluster_time(monitoring):
    described = monitoring.describe()
    assert described["managed"] and described["scale"] == SCALE and not described["slowed"]
    assert described["resolution_s"] == pytest.approx(30.0)  # one 15 s scrape + one 15 s evaluation
    assert (monitoring.stack.workdir / "rules" / "00-gpu.yaml").read_text().count("ms") >= 3  # dilated


def test_an_xid_is_detected_by_the_packs_rule_within_a_minute(monitoring, xid_fault):
    watch, injected, _ = xid_fault
    verdict = judge_detection("GpuXidError", injected, watch.raised("GpuXidError"), MINUTE,
                              slowed=monitoring.timing.slowed, resolution_s=monitoring.timing.resolution_s)
    assert verdict.passed, verdict.reason
    assert 0 < verdict.measured <= MINUTE
    raised = [s.alert for s in watch.seen.values() if s.alert.name == "GpuXidError"]
    assert [(a.labels["gpu"], a.labels["UUID"], a.labels["Hostname"]) for a in raised] == [("3", "GPU-0003", "gpu-node-01")]


def test_the_seeds_rule_on_a_metric_dcgm_exporter_does_not_export_never_fires(monitoring, xid_fault):
    watch, injected, _ = xid_fault
    verdict = judge_detection("NvidiaXidError", injected, watch.raised("NvidiaXidError"), MINUTE,
                              slowed=monitoring.timing.slowed)
    assert not verdict.passed and not verdict.inconclusive
    assert verdict.measured is None and not verdict.never_reached  # its own category, not an SLO breach
    assert verdict.reason.startswith("no alert NvidiaXidError within 1m")
    assert drill_for_tags(["gpu_node_loss"]).category(verdict.name) is Category.NOT_DETECTED


def test_the_alert_resolves_after_the_recovery(xid_fault):
    watch, _, recovered = xid_fault
    verdict = judge_resolution("GpuXidError", recovered, watch.resolved("GpuXidError"), 10 * MINUTE)
    assert verdict.passed, verdict.reason
    assert 0 < verdict.measured <= 2 * MINUTE  # a scrape, an evaluation, a poll: not the whole budget


def test_an_alert_gone_with_its_condition_was_seen_after_and_one_gone_with_its_exporter_was_not(monitoring, target,
                                                                                                xid_fault):
    """Class 2 for detection (issue 30): an alert that resolves because its data stopped, the fault still in place.
    The cleared XID's GpuXidError went with its condition: Prometheus got samples about that GPU after it went
    (SEEN). Then XID 79 again, and the exporter starts failing (503) while the GPU is still faulted: the alert
    resolves all the same (its series went stale) — and no sample about the GPU came after (BLIND)."""
    url, clock = monitoring.prometheus_url, monitoring.clock
    query = read_rules(url)["GpuXidError"]["query"]
    settle = (ALIVE_SCRAPES + 1) * monitoring.timing.wall(monitoring.timing.scrape_s)
    watch, _, _ = xid_fault
    [cleared] = watch.gone("GpuXidError")
    about = identity(cleared.alert.labels)
    assert about == {"Hostname": "gpu-node-01", "gpu": "3", "UUID": "GPU-0003"}  # not the owner pod: it moves
    time.sleep(max(0.0, cleared.gone_unix + settle - time.time()))
    assert observed_between(url, query, about, cleared.gone_unix, cleared.gone_unix + settle) == SEEN
    step = monitoring.timing.wall(monitoring.timing.scrape_s)
    assert observed_between(url, query, about, cleared.gone_unix, cleared.gone_unix + settle, step_s=step) == SEEN

    watch = monitoring.watch()
    target.xid[3] = 79
    try:
        assert watch.wait(lambda: watch.raised("GpuXidError") is not None, clock.timestamp() + MINUTE)
        target.failing = True
        assert watch.wait(lambda: watch.resolved("GpuXidError") is not None, clock.timestamp() + 10 * MINUTE)
        [went] = watch.gone("GpuXidError")
        time.sleep(max(0.0, went.gone_unix + settle - time.time()))
        assert observed_between(url, query, about, went.gone_unix, went.gone_unix + settle) == BLIND
        assert observed_between("http://127.0.0.1:9", query, about, went.gone_unix, went.gone_unix + settle) == UNREAD
        went_at = went.gone_unix  # the exporter's return raises the alert again (the XID is still there)
        target.failing = False  # the exporter back (the fault reverted): samples after it went, the data went first
        time.sleep(settle)
        assert observed_between(url, query, about, went_at, time.time()) == SEEN
        assert observed_between(url, query, about, went_at, time.time(), step_s=step) == BLIND
    finally:
        target.failing = False
        target.xid[3] = 0
        watch.wait(lambda: False, clock.timestamp() + 2 * MINUTE)  # the alert it raises again, gone before the next
        watch.stop()


def test_a_rule_whose_exporter_was_away_for_part_of_the_drill_was_not_watching_then(monitoring, target):
    """Red team, wave 8: the quiet claim read each rule's series once, at the end; an exporter that went away during
    the drill and came back before it left the claim "each was watching" standing. Now every series a rule reads must
    be there scrape by scrape since the fault: the target failing for 6 s of wall time (6 cluster minutes; the floor is
    GAP_WALL_S of the stack's clock) is named, with how long; a target that never failed is not."""
    from drills.detect.watching import unwatched

    timing, url = monitoring.timing, monitoring.prometheus_url
    step, lookback = timing.wall(timing.scrape_s), 4 * timing.wall(timing.scrape_s)
    since = time.time()
    time.sleep(8 * step)
    assert unwatched(url, ["GpuXidError"], lookback, since_unix=since, step_s=step, scale=timing.scale) == \
        {"GpuXidError": None}
    target.failing = True
    try:
        time.sleep(2 * GAP_WALL_S)  # the stack's own clock: a shorter stall is a loaded machine's, not counted
    finally:
        target.failing = False
    time.sleep(8 * step)  # scraped again: the end-of-drill reading alone would say "watching"
    assert unwatched(url, ["GpuXidError"], lookback) == {"GpuXidError": None}
    gap = unwatched(url, ["GpuXidError"], lookback, since_unix=since, step_s=step, scale=timing.scale)["GpuXidError"]
    assert gap is not None and gap.startswith("its rule reads DCGM_FI_DEV_XID_ERRORS, of which Prometheus had no "
                                              "series for "), gap
    assert "(cluster time) during the drill" in gap and "it could not fire then" in gap


def test_one_fault_raising_more_distinct_alerts_than_the_budget_is_an_alert_storm(monitoring, target, xid_fault):
    clock = monitoring.clock
    watch = monitoring.watch()
    for gpu in range(GPUS):
        target.xid[gpu] = 79
    try:
        watch.wait(lambda: len(watch.distinct()) >= GPUS, clock.timestamp() + MINUTE)
    finally:
        for gpu in range(GPUS):
            target.xid[gpu] = 0
        watch.stop()
    verdict = judge_storm([a.name for a in watch.distinct()], monitoring.config.alert_budget)
    assert not verdict.passed and verdict.measured == GPUS and verdict.target == 3
    assert drill_for_tags(["gpu_node_loss"]).category(verdict.name) is Category.ALERT_STORM
    # the single-GPU fault stayed within it
    assert judge_storm([a.name for a in xid_fault[0].distinct()], 3).passed


def test_a_replica_that_answers_with_nothing_pages_inference_serving_nothing(monitoring, vllm_target):
    """time-sliced-serving's and empty-replacements' symptom, on the twin's vLLM exporter: every replica Ready, every
    answer HTTP 200, but from the fault on 70 % of them generate no token (finish_reason abort). Nothing else of the
    pack sees it (no replica lost, latency fine); InferenceServingNothing (the share of finished requests that
    generated at most one token over 2 m, held 1 m) pages within 4 minutes — while a healthy minute before it did
    not. The rule's other cases (a healthy series, a 45 s blip, an idle service) are promtool's
    (drills/detect/rules/tests/inference_test.yaml)."""
    clock, metrics, rng = monitoring.clock, vllm_target.metrics, random.Random(34)
    watch = monitoring.watch()
    state = {"empty_share": 0.0, "stop": False}

    def users() -> None:  # 10 finished requests per cluster second, as the drill's users and gateway make them
        while not state["stop"]:
            for _ in range(10):
                if rng.random() < state["empty_share"]:
                    metrics.served(0.2, 8, 0, first_token_s=0.2, finished_reason="abort")
                else:
                    metrics.served(0.5, 8, 16, first_token_s=0.1)
            threading.Event().wait(1.0 / SCALE)

    traffic = threading.Thread(target=users, daemon=True)
    traffic.start()
    try:
        watch.wait(lambda: False, clock.timestamp() + MINUTE)  # a healthy minute: scraped, rated, quiet
        assert watch.raised("InferenceServingNothing") is None
        injected = clock.now()
        state["empty_share"] = 0.7
        watch.wait(lambda: watch.raised("InferenceServingNothing") is not None, clock.timestamp() + 6 * MINUTE)
    finally:
        state["stop"] = True
        traffic.join(timeout=5)
        watch.stop()
    verdict = judge_detection("InferenceServingNothing", injected, watch.raised("InferenceServingNothing"),
                              4 * MINUTE, slowed=monitoring.timing.slowed, resolution_s=monitoring.timing.resolution_s)
    assert verdict.passed, verdict.reason
    raised = [s.alert for s in watch.seen.values() if s.alert.name == "InferenceServingNothing"]
    assert [(a.labels["model_name"], a.labels["severity"]) for a in raised] == [("llama-7b", "critical")]
    assert {a.name for a in watch.distinct()} == {"InferenceServingNothing"}  # availability and latency stay quiet
