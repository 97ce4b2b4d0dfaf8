"""Inference drill steps: the Deployment serves under load, replicas are killed, it serves again —
each step one call and one judgement. Numbers in the steps are the defaults; a profile that sets
`slo.inference_recovery_s`, `inference_error_budget` or `p99_latency_factor` overrides them."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, replace

import pytest
from pytest_bdd import given, parsers, then, when

from drills.checks.serving import (
    LoadMeasure, ServingMonitor, ServingRecovery, load_overlay, measure_load, to_wall, wait_for_load,
    with_slowest_phase,
)
from drills.clock import parse_iso
from drills.errors import CheckFailed
from drills.steps.common import duration_s, expect
from drills.timeline import judge_max, judge_min, judge_recovery

__all__ = ["serving_monitor", "inference_recovery", "parse_killed"]

log = logging.getLogger(__name__)

PRECONDITION_WAIT_S = 900.0  # cluster seconds the Deployment may take to be Ready (a cold pull + model load)
WAIT_MARGIN = 1.2  # wait past the target to measure how far over it a slow recovery is
BASELINE_S = 60.0  # cluster seconds of load before the fault
SETTLE_S = 30.0  # cluster seconds of unbroken successes that count as "serving again"
WINDOW_S = 60.0  # cluster seconds of load after recovery for the p99


@dataclass(frozen=True)
class InferenceOutcome:
    recovery: ServingRecovery
    load: LoadMeasure

    def __repr__(self) -> str:  # short: an Allure step parameter
        return f"InferenceOutcome(recovered={self.recovery.timeline.recovered})"


def parse_killed(text: str, desired: int) -> tuple[int | None, float | None]:
    """"1 of its 2 replicas" → (1, None), "all its replicas" → (None, 100), "50% of its replicas" → (None, 50)."""
    text = text.strip()
    if m := re.fullmatch(r"(\d+) of its (\d+) replicas?", text):
        if int(m.group(2)) != desired:
            raise CheckFailed(f"precondition not met: the scenario expects {m.group(2)} replicas, the Deployment "
                              f"wants {desired}")
        return int(m.group(1)), None
    if re.fullmatch(r"all (?:of )?its replicas", text):
        return None, 100.0
    if m := re.fullmatch(r"(\d+(?:\.\d+)?)\s*% of its replicas", text):
        return None, float(m.group(1))
    raise ValueError(f"not a replica count: {text!r} (say \"1 of its 2 replicas\", \"all its replicas\" or "
                     "\"50% of its replicas\")")


@pytest.fixture
def serving_monitor(cluster, target_profile) -> ServingMonitor:
    return ServingMonitor(cluster, target_profile.workloads.inference)


@pytest.fixture
def inference_recovery(drill, serving_monitor, serving_baseline, killed_pods, inference_load, target_profile, clock):
    """Measured once, when the first Then step needs it: waits until serving and Ready, or past the target."""
    record = killed_pods.to_dict()
    injected = parse_iso(record["injected_at"]).timestamp()
    target = drill.target_s or target_profile.slo.inference_recovery_s
    recovery = serving_monitor.recovery(serving_baseline, record, inference_load.buckets,
                                        deadline_ts=injected + target * WAIT_MARGIN, settle_s=SETTLE_S,
                                        window_s=WINDOW_S, on_phase=drill.mark, on_wait=drill.waiting)
    result = inference_load.stop()
    load = measure_load(result.buckets, recovery, clock, BASELINE_S)
    drill.set_timeline(recovery.timeline)
    inj_wall = recovery.wall["injected"]
    drill.note(killed_by=record["mode"], **recovery.details(), load=load.to_dict(),
               locust={k: v for k, v in result.to_dict().items() if k != "files"},
               overlay=load_overlay(result.buckets, clock, inj_wall), overlay_label="requests/s (cluster)")
    _attach(drill, result, recovery, clock, target)
    return InferenceOutcome(recovery, load)


@given("the inference Deployment has all its replicas Ready", target_fixture="serving_baseline")
def deployment_ready(serving_monitor, drill):
    baseline = serving_monitor.baseline(PRECONDITION_WAIT_S, on_wait=drill.waiting)
    drill.note(deployment=f"{baseline.namespace}/{baseline.deployment}", replicas_before=baseline.ready)
    return baseline


@given(parsers.parse("{users:d} users are sending completions to its endpoint"), target_fixture="load_started")
def load_running(users: int, inference_load, clock, drill):
    inference_load.users, inference_load.spawn_rate = users, float(users)
    inference_load.start()
    wait_for_load(inference_load.buckets, clock, BASELINE_S)
    drill.note(load_users=users, load_workers=inference_load.workers, endpoint=inference_load.host)
    return inference_load


@when(parsers.parse("{killed} are killed"), target_fixture="killed_pods")
def kill_pods(killed: str, pod_fault, serving_baseline, load_started):
    from fixtures.injectors import DryRun

    count, percent = parse_killed(killed, serving_baseline.desired)
    try:
        return pod_fault(count=count, percent=percent)
    except DryRun as plan:
        pytest.skip(str(plan))


@then(parsers.parse("the endpoint serves again within {limit}"))
def serves_again(limit: str, inference_recovery, target_profile, drill):
    target = _slo(target_profile, "inference_recovery_s", duration_s(limit))
    verdict = judge_recovery(inference_recovery.recovery.timeline, target, subject="the endpoint", verb="serve again")
    expect(drill.judge(with_slowest_phase(verdict, inference_recovery.recovery)))


@then("the killed pods are replaced, scheduled and Ready again")
def replaced(inference_recovery, drill):
    rec = inference_recovery.recovery
    expect(drill.judge(with_slowest_phase(judge_min("replaced pods", rec.replaced, len(rec.killed), "pods"), rec)))


@then("the Deployment is back to its desired Ready replicas")
def replicas_ready(inference_recovery, drill):
    rec = inference_recovery.recovery
    expect(drill.judge(judge_min("ready replicas", rec.ready_replicas, rec.desired, "replicas")))


@then(parsers.parse("no more than {budget:g}% of requests fail while a replica serves"))
def error_budget(budget: float, inference_recovery, target_profile, drill):
    limit = _slo(target_profile, "inference_error_budget", budget / 100.0) * 100.0
    load = inference_recovery.load
    rate = None if load.budget_error_rate is None else load.budget_error_rate * 100.0
    verdict = judge_max("error budget", None if rate is None else round(rate, 2), limit, "%")
    errors = "; ".join(f"{n}× {message}" for message, n in load.budget_errors.items())
    expect(drill.judge(replace(verdict, reason=f"{verdict.reason} of requests failing {load.budget_window}"
                                               f"{f'; most frequent: {errors}' if errors and not verdict.passed else ''}")))


@then(parsers.parse("p99 latency stays within {factor:g}x the baseline while a replica serves"))
def p99_within(factor: float, inference_recovery, target_profile, drill):
    """Users' p99 from the fault on (or since serving again, when none survived) against the steady
    state before it: the survivors must carry the load (N+1 headroom), not only the healed Deployment."""
    limit = _slo(target_profile, "p99_latency_factor", factor)
    load = inference_recovery.load
    ratio = load.serving_p99_ms / load.baseline_p99_ms if load.serving_p99_ms and load.baseline_p99_ms else None
    verdict = judge_max("p99 latency", None if ratio is None else round(ratio, 2), limit, "x baseline")
    expect(drill.judge(replace(verdict, reason=f"{verdict.reason} (p99 {load.baseline_p99_ms} ms before the fault, "
                                               f"{load.serving_p99_ms} ms {load.budget_window}; "
                                               f"{load.after_p99_ms} ms once Ready again)")))


def _slo(profile, name: str, default: float) -> float:
    """The profile's SLO when it sets one, else the scenario's number."""
    return float(getattr(profile.slo, name)) if name in profile.slo.model_fields_set else float(default)


def _attach(drill, result, recovery: ServingRecovery, clock, target: float) -> None:
    """The locust summary and a chart of rate, failures and latency over the drill, for the report."""
    from drills.report.load_chart import load_chart_png

    out = result.files.get("summary")
    folder = out.parent if out else None
    if folder is None:
        return
    inj_wall = recovery.wall["injected"]
    rows = [{**r, "t": clock.cluster_seconds(r["t"] - inj_wall), "rps": r["rps"] / clock.scale,
             "fail": r["fail"] / clock.cluster_seconds(0.25)} for r in result.series(0.25)]
    phases = {k: clock.cluster_seconds(v - inj_wall) for k, v in recovery.wall.items() if k != "end"}
    try:
        chart = load_chart_png(rows, folder / "load.png", phases, target, title=f"load — {drill.scenario}")
    except Exception as err:  # noqa: BLE001 — a chart must never fail the drill
        log.warning("load chart not drawn: %s", err)
        chart = None
    summary = folder / "load-summary.json"
    summary.write_text(json.dumps({**result.to_dict(), "locust": result.summary}, indent=2, default=str),
                       encoding="utf-8")
    hook = drill.item.ihook.pytest_drill_attachment
    hook(item=drill.item, name="locust summary", body=summary.read_bytes(), mime="application/json", extension="json")
    if chart is not None:
        hook(item=drill.item, name="load: requests, failures, latency", body=chart.read_bytes(), mime="image/png",
             extension="png")
