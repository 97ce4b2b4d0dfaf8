"""`drills run --dry-run` of every drill touches nothing (issue 17): the twin's gateway received no request
(no load, not one completion), its audit log holds no write by the drills (no fault, no Lease), no checkpoint
probe appeared on the store, no fio ran, no load or storage artefact was written — and the run is marked a
dry run, so it never becomes a point of the trend or a score."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import requests

from drills.measure.checkpoint_io import PROBE_PREFIX
from drills.report.records import RUN_FILE
from tests.e2e.drill_helpers import audit_of, drills

pytestmark = pytest.mark.slow


def _fio_running(*places: Path) -> bool:
    """An fio process working on `places` (its command line names one, or it holds a file open under one): other
    tests' fio on this machine (other workers) are not this dry run's."""
    marks = [str(p) for p in places]
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "comm").read_text().strip() != "fio":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            files = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(m in cmdline or any(f.startswith(m) for f in files) for m in marks):
            return True
    return False


def test_a_dry_run_of_every_drill_sends_no_request_and_writes_nothing(twin_factory, tmp_path):
    twin = twin_factory(scale=120.0)
    gateway = twin.info["gateway"]
    store = Path(twin.info["checkpoint_store"])
    probes: set[str] = set()
    fio_seen = threading.Event()
    done = threading.Event()

    def watch() -> None:  # a probe file lives about a second, fio as long as it saturates: 10 ms polls see both
        while not done.is_set():
            probes.update(p.name for p in store.iterdir() if p.name.startswith(PROBE_PREFIX))
            if _fio_running(store, tmp_path):
                fio_seen.set()
            time.sleep(0.01)

    fio_before = _fio_running(store, tmp_path)  # a leftover fio on this store would make the check meaningless
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc = drills("run", "--dry-run", "--twin-state", str(twin.state_dir), "--no-html",
                      "--reports", str(tmp_path), "--run-id", "dry", timeout=900)
    finally:
        done.set()
        watcher.join()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for plan in ("would cordon and drain node", "would delete 1 of 2 pods", "would saturate", "would shut"):
        assert plan in proc.stdout, (plan, proc.stdout[-3000:])
    assert requests.get(f"{gateway}/twin/v1/requests", timeout=5).json() == {}  # not one completion
    writes = [r for r in audit_of(twin) if str(r.get("userAgent", "")).startswith("gpu-drills") and not r.get("dryRun")]
    assert writes == []  # no fault, no Lease
    assert probes == set()
    assert fio_before or not fio_seen.is_set()
    run = tmp_path / "dry"
    assert not (run / "load").exists() and not (run / "storage").exists()
    assert json.loads((run / RUN_FILE).read_text()) == {"dry_run": True}


def test_the_gateway_counts_what_it_receives(twin_factory):
    """The counter the test above reads is not blind: completions and health checks are counted."""
    twin = twin_factory(scale=120.0)
    gateway = twin.info["gateway"]
    requests.get(f"{gateway}/health", timeout=5)
    requests.post(f"{gateway}/v1/completions", json={"model": "llama-7b", "prompt": "hi", "max_tokens": 4}, timeout=30)
    counts = requests.get(f"{gateway}/twin/v1/requests", timeout=5).json()
    assert counts == {"GET /health": 1, "POST /v1/completions": 1}
