"""Starting and stopping twins: readiness marker, clean stop, failures that say why."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

from drills.core.errors import DrillError
from drills.core.followclock import FollowingClock
from drills.core.kube import connect_twin, twin_clock
from drills.twin.launcher import read_twin_info, start_twin


def test_start_writes_kubeconfig_and_twin_json_and_stop_removes_it(tmp_path):
    handle = start_twin(tmp_path, scale=120)
    try:
        info = read_twin_info(tmp_path)
        assert info["url"] == handle.url and info["pid"] == handle.pid and info["scale"] == 120
        assert (tmp_path / "kubeconfig").read_text().count(handle.url) == 1
        clock = requests.get(f"{handle.url}/twin/v1/clock", timeout=5).json()
        assert clock["scale"] == 120 and clock["nowIso"].endswith("Z")
        assert requests.get(f"{handle.url}/healthz", timeout=5).text == "ok"
        assert requests.get(f"{handle.url}/version", timeout=5).json()["gitVersion"].startswith("v1.32.")
    finally:
        assert handle.stop() == 0
    assert read_twin_info(tmp_path) is None
    assert (tmp_path / "audit.jsonl").exists()


def test_the_drills_copy_of_a_twins_clock_is_within_its_stated_error(tmp_path):
    """A recovery is measured between our copy of the twin's clock (the fault's stamp) and the twin's own (its
    logs): every later read of the twin's clock lies within the copy's stated error of its readings around it,
    however busy the machine. On this host the copy follows the twin's gate (drills/core/gatedclock.py): while
    the twin holds its clock (it is still starting its pods here) the copy holds too. A copy read over HTTP
    alone (a twin on another host) states half its round trip, and is right only while the twin keeps up."""
    handle = start_twin(tmp_path, scale=600)
    try:
        copy = connect_twin(handle.kubeconfig, handle.url).clock
        assert isinstance(copy, FollowingClock) and copy.scale == 600 and copy.error_s == 0
        remote = twin_clock(handle.url)
        assert remote.scale == 600 and 0 < remote.error_s < 600 * 5.0  # a round trip under the read's timeout
        with requests.Session() as session:
            for _ in range(20):
                before = copy.timestamp()
                now = session.get(f"{handle.url}/twin/v1/clock", timeout=5).json()["now"]
                after = copy.timestamp()
                assert before - 1e-3 <= now <= after + 1e-3, (before, now, after)
    finally:
        assert handle.stop() == 0


def test_a_twin_that_cannot_start_raises_with_its_reason(tmp_path):
    with pytest.raises(DrillError) as err:
        start_twin(tmp_path, profile="no-such-profile", timeout=60)
    assert "exited with code" in str(err.value) and "no-such-profile" in str(err.value)


def test_twin_up_prints_the_url_and_the_kubeconfig_hint(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "drills.cli", "twin", "up", "--state-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert requests.get(f"{url}/api/v1/nodes", timeout=5).json()["kind"] == "NodeList"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert f"export KUBECONFIG={tmp_path / 'kubeconfig'}" in err


def test_a_twin_does_not_outlive_a_killed_parent(tmp_path):
    """`drills run` SIGKILLed mid-drill: its twin notices the parent is gone and stops by itself."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import json, os, sys, time\n"
        "from drills.twin.launcher import start_twin\n"
        f"h = start_twin({str(tmp_path)!r}, scale=60)\n"
        "print(json.dumps({'twin': h.pid}), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        twin_pid = json.loads(parent.stdout.readline())["twin"]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(twin_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(twin_pid, signal.SIGKILL)
            raise AssertionError("the twin kept running after its parent was killed")
        assert not (tmp_path / "twin.json").exists(), "a clean stop removes twin.json"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_twin_up_keeps_state_and_keys_in_a_private_dir_and_twin_down_stops_it(tmp_path):
    """Without --state-dir: a fresh folder under $XDG_STATE_HOME/gpu-drills/twins (0700, keys 0600, none under
    reports/), printed on start; `--twin-state` drills it; `drills twin down` (the newest by default) stops it."""
    import os
    import stat
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(repo))  # this tree's drills

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "drills.cli", *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=240)

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    with open(tmp_path / "up.err", "w") as err:  # a file: a full stderr pipe would block the twin
        proc = subprocess.Popen([sys.executable, "-m", "drills.cli", "twin", "up", "--scale", "100"], cwd=work,
                                env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        url = proc.stdout.readline().strip()
        root = tmp_path / "xdg" / "gpu-drills" / "twins"
        [state] = [p for p in root.iterdir() if p.name != "latest"]
        assert (root / "latest").resolve() == state and read_twin_info(state)["url"] == url
        assert mode(state) == mode(state / "hostkeys") == mode(root) == 0o700
        keys = [state / "switch_id_ed25519", *(state / "hostkeys").iterdir()]
        assert len(keys) > 4 and all(mode(key) == 0o600 for key in keys)
        assert not (work / "reports").exists()

        dry = cli("run", "-m", "training", "--dry-run", "--twin-state", str(state), "--no-html",
                  "--reports", str(tmp_path / "r"), "--run-id", "dry")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert not list((tmp_path / "r").rglob("*_ed25519*"))  # no key reaches the reports

        down = cli("twin", "down")
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == f"stopped the twin at {url} (pid {proc.pid}); its state stays in {state}"
        assert proc.wait(30) == 0 and read_twin_info(state) is None
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    printed = (tmp_path / "up.err").read_text()
    assert f"  state: {state} (drill it: drills run --twin-state {state}; stop it: drills twin down --state-dir " \
           f"{state})" in printed
    again = cli("twin", "down", "--state-dir", str(state))
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"drills: no running twin in {state} (no twin.json): nothing to stop; `drills twin up` prints the state dir "
        "of the twin it starts"]
