"""Storage drill steps: probe the store, saturate it with fio, judge checkpoint I/O — one call and one judgement each."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime

import pytest
from pytest_bdd import given, then, when

from drills.checks.storage_io import (
    judge_bandwidth, judge_intact, judge_probe_save, judge_training_saves, probe_series, store_bandwidth_mb_s,
    training_saves,
)
from drills.steps.common import expect

__all__ = ["probe_saturated", "saturation_report"]

log = logging.getLogger(__name__)


@pytest.fixture
def probe_saturated(drill, checkpoint_store, target_profile, saturation):
    """The checkpoint probe under saturation, measured once for the steps that judge it."""
    st = target_profile.storage
    series = probe_series(checkpoint_store, st.probe_size_mb, st.probe_shards)
    drill.note(probe_saturated=series.to_dict())
    return series


@pytest.fixture
def saturation_report(drill, store_saturation, probe_baseline, probe_saturated):
    """Ends the saturation (revert) and attaches fio's report and the bandwidth/latency chart."""
    from drills.report.storage_chart import storage_png

    result = store_saturation.stop()
    summary = result.summary() if result is not None else None
    drill.note(fio=summary)
    item, out = drill.item, store_saturation.out_dir
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{drill.run.run_id}-{uuid.uuid4().hex[:8]}"
    if summary is not None:
        path = out / f"fio-summary-{stem}.json"
        path.write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
        item.ihook.pytest_drill_attachment(item=item, name="fio summary (JSON)", body=path.read_bytes(),
                                           mime="application/json", extension="json")
    png = storage_png({"probe_baseline": probe_baseline.to_dict(), "probe_saturated": probe_saturated.to_dict(),
                       "fio": summary}, out / f"storage-{stem}.png")
    item.ihook.pytest_drill_attachment(item=item, name="bandwidth and latency", body=png.read_bytes(),
                                       mime="image/png", extension="png")
    return result


@given("a checkpoint probe of the store gives a baseline", target_fixture="probe_baseline")
def probe_baseline(checkpoint_store, target_profile, drill):
    st = target_profile.storage
    series = probe_series(checkpoint_store, st.probe_size_mb, st.probe_shards)
    drill.note(checkpoint_store=checkpoint_store, probe_baseline=series.to_dict())
    return series


@when("the checkpoint store is saturated with fio", target_fixture="saturation")
def saturate(store_saturation, probe_baseline):
    from fixtures.injectors import DryRun

    try:
        return store_saturation.start()
    except DryRun as plan:
        pytest.skip(str(plan))


@then("a checkpoint written under saturation reads back intact")
def intact(probe_saturated, drill):
    expect(drill.judge(judge_intact(probe_saturated)))


@then("its save time stays within the budget")
def probe_save_within(probe_baseline, probe_saturated, target_profile, drill):
    expect(drill.judge(judge_probe_save(probe_baseline, probe_saturated, target_profile.slo.checkpoint_save_ratio,
                                        target_profile.storage.probe_save_limit_s)))


@then("the training job's checkpoint saves stay within the budget")
def training_saves_within(training_monitor, training_baseline, saturation, target_profile, drill):
    window = datetime.fromisoformat(saturation["injected_at"].replace("Z", "+00:00"))
    ratio = target_profile.slo.checkpoint_save_ratio
    saves = training_saves(training_monitor, window, target_profile.workloads.training.checkpoint_interval_steps,
                           ratio, on_wait=drill.waiting)
    drill.note(training_saves=saves.to_dict())
    expect(drill.judge(judge_training_saves(saves, ratio)))


@then("the store delivers its declared bandwidth under fio and the probe")
def bandwidth(saturation_report, probe_saturated, target_profile, drill):
    measured = store_bandwidth_mb_s(saturation_report, probe_saturated)
    drill.note(store_bandwidth_mb_s=round(measured, 1))
    expect(drill.judge(judge_bandwidth(measured, target_profile.storage.bandwidth_target_mb_s, saturation_report)))
