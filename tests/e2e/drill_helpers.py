"""Shared helpers for the drill end-to-end tests: run the real `drills` CLI, read a twin's nodes,
audit log and ground truth."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from drills.core.prefork import popen_python

REPO = Path(__file__).resolve().parents[2]
DRILL_AGENT = "gpu-drills"


def drills(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """`drills ARGS…` in a process of its own (the real CLI: exits and files are real), forked from the session's
    prefork server when there is one (tests/e2e/conftest.py: the imports done once), else a fresh interpreter.
    `env`: the process's whole environment (default: this one's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = popen_python("drills.cli", args, env=_env(env), cwd=REPO, stdout=out, stderr=err)
        try:
            rc = proc.wait(timeout)
        except BaseException:  # a timeout, or Ctrl-C on the suite: as subprocess.run, kill it
            proc.kill()
            proc.wait()
            raise
        return subprocess.CompletedProcess([sys.executable, "-m", "drills.cli", *args], rc, _text(out), _text(err))


def _text(fh) -> str:
    """As subprocess.run(text=True) reads it: the locale's encoding, universal newlines."""
    fh.seek(0)
    return io.TextIOWrapper(fh).read()


def drills_popen(*args: str) -> subprocess.Popen:
    """A run in the background that a test will signal: SIGINT/SIGTERM at their defaults in the child (a test
    suite started from a non-interactive shell's background job inherits SIGINT ignored, and so would the run)."""
    return subprocess.Popen([sys.executable, "-m", "drills.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), preexec_fn=default_signals)


def default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def records(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def node(twin, name: str) -> dict:
    return requests.get(f"{twin.url}/api/v1/nodes/{name}", timeout=5).json()


def schedulable(node_obj: dict) -> bool:
    """Not cordoned, no drill taint, GPUs not marked unhealthy by a drill."""
    spec = node_obj.get("spec") or {}
    taints = spec.get("taints") or []
    annotations = (node_obj.get("metadata") or {}).get("annotations") or {}
    return (not spec.get("unschedulable") and not any(t.get("key") == "gpu-drills.io/node-loss" for t in taints)
            and annotations.get("twin.gpu-drills.io/gpu-health") != "unhealthy")


def drill_mutations(audit: list[dict]) -> list[dict]:
    """Mutating requests the drills made (the controllers have their own user agent; the run lock's Lease aside)."""
    return [r for r in audit if str(r.get("userAgent", "")).startswith(DRILL_AGENT) and not r.get("dryRun")
            and r.get("resource") != "leases"]


def first_applied_write(audit: list[dict]) -> dict | None:
    """The drills' first write the server accepted: when the fault took effect (a write it refused — a guarded
    patch on a node that moved on, 422 — changed nothing); None when there is none."""
    return next((r for r in drill_mutations(audit) if r.get("code", 200) < 400), None)


def audit_of(twin) -> list[dict]:
    return requests.get(f"{twin.url}/twin/v1/audit", timeout=5).json()


def audit_file(state_dir: Path) -> list[dict]:
    path = Path(state_dir) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_injection(run_dir: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until the run's journal says a fault is in place (the drill is now waiting for recovery)."""
    journal = Path(run_dir) / "journal.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if journal.exists() and '"op":"injected"' in journal.read_text():
            return
        if proc.poll() is not None:
            raise AssertionError(f"drills run ended before injecting: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("no injection within the timeout")


def twin_locust_processes_left(twin) -> list[int]:
    """The twin's locust processes still alive once each had its time to stop: a deleted pod's process gets SIGTERM
    and up to `STOP_S` wall seconds (then SIGKILL) while the pod object goes on the twin's clock, so right after a
    revert one may still be flushing (drills/twin/workloads/locust_pods.py)."""
    from drills.twin.workloads.locust_pods import STOP_S

    deadline = time.monotonic() + STOP_S + 20.0  # + the kill and the reap on a busy machine
    while (left := twin_locust_processes(twin)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def twin_locust_processes(twin) -> list[int]:
    """Live locust processes a twin started for its locust pods (they carry `--parent-pid <twin pid>`)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if b"locust" in argv and b"--parent-pid" in argv and str(twin.pid).encode() in argv and state != "Z":
                out.append(int(entry.name))
    return out


def write_profile(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _env(env: dict | None = None) -> dict:
    return dict(os.environ if env is None else env, PYTHONUNBUFFERED="1", COLUMNS="160")


def without_readings(reverts: list[dict]) -> list[dict]:
    """A record's reverts without their read-backs (drills/faults/readback.py), to compare the rest exactly."""
    return [{k: v for k, v in r.items() if k != "readings"} for r in reverts]
