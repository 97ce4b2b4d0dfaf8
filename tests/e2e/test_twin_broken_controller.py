"""A twin whose controller has a bug says so: /twin/v1/health answers 503 with the traceback, `drills twin
health` exits 1 naming it, and the e2e fixtures' check fails the test (the construction: a controller whose
reconcile hits an AttributeError on every ReplicaSet, added to the real ones)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.manager import CONTROLLERS, ControllerManager
from drills.twin.runtime import Twin
from fixtures.twin import broken_components

ROOT = Path(__file__).resolve().parents[2]


class BrokenReplicaSets(Controller):
    """Reads a ReplicaSet's status through a misspelt key, the way past bugs did: `.get` on a None."""

    name = "broken-replicasets"

    def setup(self) -> None:
        self.sets = self.ctx.informers.informer(by_kind("apps/v1", "ReplicaSet"))
        self.sets.add_handler(lambda etype, obj, old: self.enqueue((obj["metadata"].get("namespace"),
                                                                    obj["metadata"]["name"])))

    async def reconcile(self, key) -> None:
        rs = self.sets.get(*key) or {}
        rs.get("stauts").get("replicas")  # AttributeError


def install_broken(twin: Twin) -> None:
    manager = ControllerManager(twin, CONTROLLERS + [f"{__name__}:BrokenReplicaSets"])
    twin.store.graceful_pods = twin.store.graceful_namespaces = True
    twin.controller_manager = manager  # type: ignore[attr-defined]
    twin.add_component("controllers", manager.start, manager.stop)


class _Handle:
    """What broken_components() reads of a twin: its URL and whether it runs."""

    def __init__(self, url: str):
        self.url = url

    def alive(self) -> bool:
        return True


@pytest.fixture
def broken_twin(tmp_path):
    """The minimal twin in this process (its own loop in a thread) with one buggy controller more."""
    twin = Twin(tmp_path / "state", profile="minimal", providers=[f"{__name__}:install_broken"])
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(twin.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(60), "the twin did not start"
    try:
        yield twin
    finally:
        asyncio.run_coroutine_threadsafe(twin.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _broken(url: str) -> dict:
    deadline = 200
    for _ in range(deadline):  # the seeded Deployment's ReplicaSet reaches the controller within moments
        resp = requests.get(f"{url}/twin/v1/health", timeout=10)
        if resp.status_code == 503:
            return resp.json()
        threading.Event().wait(0.05)
    raise AssertionError(f"the twin never reported its broken controller: {resp.json()}")


def test_a_controller_bug_is_served_shown_and_fails_the_test(broken_twin):
    snapshot = _broken(broken_twin.url)
    assert not snapshot["ok"]
    [broken] = [b for b in snapshot["broken"] if b["component"] == "controller broken-replicasets"]
    assert broken["error"] == "AttributeError" and broken["message"] == "'NoneType' object has no attribute 'get'"
    assert 'rs.get("stauts").get("replicas")' in broken["traceback"] and broken["key"].startswith("('ai-platform', 'llama-7b-infer")
    assert {b["component"] for b in snapshot["broken"]} == {"controller broken-replicasets"}  # the real ones are fine

    shown = subprocess.run([sys.executable, "-m", "drills.cli", "twin", "health", "--state-dir",
                            str(broken_twin.state_dir)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 1
    assert "controller broken-replicasets: AttributeError: 'NoneType' object has no attribute 'get'" in shown.stderr
    assert 'rs.get("stauts").get("replicas")' in shown.stderr

    described = broken_components(_Handle(broken_twin.url))  # what the fixtures fail a test with
    assert described.startswith("controller broken-replicasets: AttributeError")


def test_a_healthy_twin_says_so(twin):
    assert requests.get(f"{twin.url}/twin/v1/health", timeout=10).json() == {"ok": True, "broken": []}
    shown = subprocess.run([sys.executable, "-m", "drills.cli", "twin", "health", "--state-dir", str(twin.state_dir)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "every component healthy" in shown.stdout
