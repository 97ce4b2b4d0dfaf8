"""A drill's verdict does not depend on how late its streams are (this machine starved, an API server's watch
cache behind): the `lagging-watch` defect delivers every watch event 30 twin minutes late — past the drill's
deadline — while lists stay current. The drill reads what its streams had not delivered at the deadline
(`EventMerger.catch_up`), so a healthy twin still PASSes with the eviction's own time, and a broken one still
FAILs for its own reason."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import audit_file, drill_mutations, drills, records

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, run_id: str, *defects: str) -> tuple:
    done = drills("run", "-m", "training", "-k", "cordon", "--no-html", "--reports", str(tmp_path),
                  "--run-id", run_id, "--scale", "600", *(a for d in defects for a in ("--defect", d)))
    recs = records(tmp_path / run_id)
    assert len(recs) == 1, done.stdout + done.stderr
    return done, recs[0]


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_healthy_twin_passes_with_its_streams_half_an_hour_late(tmp_path):
    done, rec = _run(tmp_path, "lagging", "lagging-watch")
    assert done.returncode == 0 and rec["verdict"] == "pass", (rec["reason"], done.stdout[-3000:])
    details, phases = rec["details"], rec["phases"]
    state = Path(details["twin_state"])
    truth = json.loads((state / "truth.json").read_text())["training"]["ai-platform/llm-finetune-8b"]["last"]
    # the loss is when the kubelet began stopping the worker (its Killing event, second precision: after the
    # eviction by the kubelet's reaction, seconds at 600× on a busy machine), not when the late stream showed
    # the pod gone (30 twin minutes later)
    (eviction,) = [w for w in drill_mutations(audit_file(state)) if w.get("subresource") == "eviction"]
    # (an event's second precision floors its time by up to 1 s, and the audit stamps the eviction when its answer
    # is written, a little after the kubelet reacted: at 600× a few wall milliseconds are another cluster second)
    assert -2.0 <= _at(details["lost_at"]) - eviction["twinTime"] < 30.0, (details["lost_at"], eviction)
    assert _at(phases["detected"]) <= _at(phases["rescheduled"]), phases
    assert details["resumed_step"] == details["latest_checkpoint"] == truth["resumed_from_checkpoint"]["step"]
    assert abs(_at(phases["recovered"]) - truth["first_step_after_resume"]["at"]) < 1.0


def test_a_job_that_crash_loops_still_fails_with_late_streams(tmp_path):
    """The job resumes and crashes until Volcano fails it; by the time the late streams are caught up its
    resumed pods (and their logs) are gone, so the drill cannot tell a resume it never saw: it FAILs on what
    the cluster still shows — the job Failed — never PASSes."""
    done, rec = _run(tmp_path, "lagging-crash", "crash-after-resume", "lagging-watch")
    assert done.returncode == 1 and rec["verdict"] == "fail", (rec["reason"], done.stdout[-3000:])
    assert rec["details"]["job_phase"] == "Failed" and "Failed" in rec["reason"], rec["reason"]
