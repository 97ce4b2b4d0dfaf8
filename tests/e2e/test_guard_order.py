"""Guard order (DESIGN §3): the fault guard decides on a scenario's main fault — allowlist, caps, dry run —
before anything acts. A refused or dry-run inference drill starts no load and takes no Lease; a dry-run
storage drill writes no probe. The twin's audit log shows no mutating request by the drills."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from drills.measure.checkpoint_io import PROBE_PREFIX
from tests.e2e.drill_helpers import audit_of, drills, write_profile
from tests.e2e.test_drill_inference import locust_processes

pytestmark = pytest.mark.slow

BUILTIN = Path(__file__).resolve().parents[2] / "drills" / "profile" / "twin.yaml"


def _drills_writes(audit: list[dict]) -> list[dict]:
    """Every mutating request by the drills, the run lock's Lease included."""
    return [r for r in audit if str(r.get("userAgent", "")).startswith("gpu-drills") and not r.get("dryRun")]


def _profile(tmp_path: Path, safety: str) -> str:
    text = BUILTIN.read_text().split("\nsafety:")[0] + "\n" + safety
    return write_profile(tmp_path / "site.yaml", text)


def _load_files(run_dir: Path) -> list[Path]:
    return [p for p in (run_dir / "load").rglob("*") if p.is_file()] if (run_dir / "load").exists() else []


@pytest.mark.parametrize("safety, expected", [
    ("safety:\n  allow: {nodes: ['*'], namespaces: [other-team]}\n",
     "namespace ai-platform is not in the profile's allowlist"),
    ("safety:\n  allow: {nodes: ['*'], namespaces: [ai-platform]}\n  blast_radius: {max_pods: 0}\n", "max_pods"),
], ids=["namespace-not-allowed", "pods-over-cap"])
def test_refused_pod_kill_starts_no_load(safety, expected, twin_factory, tmp_path):
    twin = twin_factory(scale=120.0)
    done = drills("run", "-m", "inference", "-k", "loses and not all", "--profile", _profile(tmp_path, safety),
                  "--twin-state", str(twin.state_dir), "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "x")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert _drills_writes(audit_of(twin)) == []  # no kill, no Lease
    assert _load_files(tmp_path / "r" / "x") == [] and locust_processes(str(tmp_path)) == []
    assert not (tmp_path / "r" / "x" / "journal.jsonl").exists() or \
        '"op":"open"' not in (tmp_path / "r" / "x" / "journal.jsonl").read_text()


def test_dry_run_inference_decides_before_the_load(twin_factory, tmp_path):
    twin = twin_factory(scale=120.0)
    done = drills("run", "-m", "inference", "-k", "loses and not all", "--dry-run", "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "dry")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run: would delete 1 of 2 pods" in done.stdout, done.stdout
    assert _drills_writes(audit_of(twin)) == []
    assert _load_files(tmp_path / "r" / "dry") == [] and locust_processes(str(tmp_path)) == []


def test_dry_run_storage_writes_no_probe(twin_factory, tmp_path):
    twin = twin_factory(scale=120.0)
    store = Path(twin.info["checkpoint_store"])
    seen: set[str] = set()
    done_flag = threading.Event()

    def watch() -> None:  # a probe lives for about a second: polling every 10 ms sees it
        while not done_flag.is_set():
            seen.update(p.name for p in store.iterdir() if p.name.startswith(PROBE_PREFIX))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        done = drills("run", "-m", "storage", "--dry-run", "--twin-state", str(twin.state_dir), "--no-html",
                      "--reports", str(tmp_path / "r"), "--run-id", "dry")
    finally:
        done_flag.set()
        watcher.join()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run: would saturate" in done.stdout, done.stdout
    assert _drills_writes(audit_of(twin)) == []
    assert seen == set() and not (tmp_path / "r" / "dry" / "storage").exists()
