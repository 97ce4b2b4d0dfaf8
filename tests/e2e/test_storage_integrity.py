"""Verdict integrity of the storage drill (issue 12, item 7): each test builds a broken platform on the twin
and asserts the drill does NOT pass — it fails, or is inconclusive, for the right reason in records.jsonl.

The twin's store is a mounted file system with a modelled bandwidth (drills/twin/workloads/storefs.py)
that fio, the checkpoint probe and the job's saves all share, so nothing is throttled to pass:

- a slow store (`slow-store`) fails the probe's save-time check, measured by the probe itself (the run is
  test_drill_storage.py's test_slow_store_fails_the_probe_save_check, which asserts both);
- a store that gives fio less than its declared bandwidth fails the bandwidth check;
- a store that corrupts data fails on the baseline probe (`corrupt-store-reads`);
- a job that checkpoints far apart (`sparse-checkpoints`) is not blamed on the store (the training drill fails it);
- a training save after fio stopped is not "under saturation": inconclusive (fio stopped by an event, the
  probe under it measured; the record warns that the window was shorter than the checkpoint interval);
- a throttled fio (no effect on the store) is inconclusive, not a pass;
- saves the job's log reports under saturation that the store holds incomplete (`saves-lost-under-load`, a
  write-back client dropping its flushes) fail on the store's completion evidence, not the log's word.
A healthy twin still passes (tests/e2e/test_drill_storage.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drills.twin.workloads.store_mount import fuse_available
from tests.e2e.drill_helpers import drills, records, write_profile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(fuse_available() is not None, reason=f"the twin's modelled store needs FUSE: {fuse_available()}"),
]

FAST = "600"

BASE = """\
storage:
  checkpoint_store: from-twin
  probe_size_mb: 4
  probe_shards: 4
  probe_save_limit_s: 5s
  saturation: {{rw: write, block_size: 1M, size: 16M, numjobs: 2, iodepth: 4, runtime_s: {runtime}, until: {until}}}
  fio_options: {{{fio_options}}}
  bandwidth_target_mb_s: {target}
safety:
  allow: {{nodes: ["*"], namespaces: [ai-platform]}}
"""


def run(tmp_path: Path, run_id: str, *args: str, scale: str = FAST, exit_codes=(1,), **profile) -> tuple[dict, dict]:
    """One storage drill; returns (the record, its checks by name)."""
    extra = []
    if profile:
        values = {"runtime": "5m", "until": "runtime", "fio_options": "", "target": 40, **profile}
        extra = ["--profile", write_profile(tmp_path / f"{run_id}.yaml", BASE.format(**values))]
    done = drills("run", "-m", "storage", "--scale", scale, "--no-html", "--reports", str(tmp_path),
                  "--run-id", run_id, *extra, *args)
    (rec,) = records(tmp_path / run_id)
    assert done.returncode in exit_codes, done.stdout + done.stderr  # never a pass, unless a test says so
    return rec, {c["name"]: c for c in rec["details"]["checks"]}


def test_a_store_below_its_declared_bandwidth_fails(tmp_path):
    rec, checks = run(tmp_path, "bw", target=500)  # the twin's store: 100 MB/s, 40 per client
    assert rec["verdict"] == "fail"
    assert checks["saturation effect"]["verdict"] == "pass"
    bw = checks["store bandwidth"]
    assert bw["verdict"] == "fail" and "below the declared 500 MB/s" in bw["reason"] and bw["measured"] < 100


def test_a_corrupted_baseline_probe_fails_the_drill(tmp_path):
    rec, checks = run(tmp_path, "corrupt", "--defect", "corrupt-store-reads")
    assert rec["verdict"] == "fail" and rec["category"] == "storage_io"
    base = checks["baseline checkpoint intact"]
    assert base["verdict"] == "fail" and "before the saturation (baseline) read back corrupted" in base["reason"]
    assert rec["phases"].get("injected") is None  # judged before any fault


def test_sparse_checkpoints_do_not_blame_the_store(tmp_path):
    """A job that checkpoints every 200,000 steps (its next save 13.6 twin hours away) is the training drill's
    failure (lost steps), not the store's: no save was due under the saturation, so the store is not judged
    on training saves — inconclusive, never a fail blaming the store for a save that was not due."""
    rec, checks = run(tmp_path, "sparse", "--defect", "sparse-checkpoints", exit_codes=(1,))
    saves = checks["training checkpoint save"]
    assert saves["verdict"] == "inconclusive", saves
    assert "the store is not judged" in saves["reason"], saves["reason"]
    assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", (rec["verdict"], rec["reason"])


def test_a_save_after_fio_stopped_is_not_judged_under_saturation(tmp_path):
    """fio stops on an event — once the probe under it is measured (`until: probe`) — not on a timer. At 4×
    that window is a few cluster seconds, shorter than one save (~40 s) and far shorter than the job's
    interval (1500 steps, ~6 min): no save can start and end inside it, and the saves the job makes after
    fio stopped must not pass as "under saturation". The record warns that the window was too short."""
    rec, checks = run(tmp_path, "late", scale="4", until="probe")
    assert checks["checkpoint save"]["verdict"] == "pass"  # the probe ran under fio: the window was real
    saves = checks["training checkpoint save"]
    assert saves["verdict"] == "inconclusive", saves
    assert "no training checkpoint save started and ended inside the saturation window" in saves["reason"]
    assert "shorter than the job's checkpoint interval (1500 steps" in saves["reason"], saves["reason"]
    assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", rec["reason"]
    window = rec["details"]["training_saves"]
    assert window["window_end"] is not None and window["saturated"] == [] and window["warning"]


def test_a_throttled_fio_is_inconclusive(tmp_path):
    rec, checks = run(tmp_path, "throttled", fio_options="rate: 256k")
    effect = checks["saturation effect"]
    assert effect["verdict"] == "inconclusive" and "the fault had no effect" in effect["reason"], effect
    assert rec["verdict"] == "inconclusive" and "store bandwidth" not in checks


def test_saves_logged_under_saturation_but_never_written_fail_on_the_store(tmp_path):
    """Red team, wave 5: the job logs its save under fio in good time (the save-time check passes, as it did
    before: PASS), but the store holds it without its completion evidence — the checkpoint was never written."""
    rec, checks = run(tmp_path, "lost", "--defect", "saves-lost-under-load")
    assert checks["training checkpoint save"]["verdict"] == "pass"  # the log's word alone still passes
    saves = checks["saves on the store"]
    assert saves["verdict"] == "fail" and "its save never completed" in saves["reason"], saves
    assert rec["verdict"] == "fail" and rec["category"] == "storage_io", (rec["verdict"], rec["category"])
