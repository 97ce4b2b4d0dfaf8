"""The load runner end to end: real locust subprocesses against a small OpenAI-compatible peer.

The peer (an aiohttp app on 127.0.0.1, started here) can be switched to answer 503 for a
window; it records when it switched, which is the ground truth the buckets must match.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web

from drills.core.errors import CheckFailed
from drills.load import LoadRunner, error_rate, first_sustained_success, window

# The placement tolerance: a few 50 ms buckets, generous for a loaded 2-core machine.
TOL_S = 0.3


class OpenAIPeer:
    """A tiny OpenAI-compatible endpoint that serves 200 or, while `down`, 503 like the twin gateway."""

    def __init__(self) -> None:
        self.down = False
        self.flips: list[tuple[float, bool]] = []
        self.requests = 0
        self.auth: set[str | None] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> OpenAIPeer:
        self._thread.start()
        assert self._ready.wait(10), "test peer did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_down(self, down: bool) -> float:
        self.down = down
        t = time.time()
        self.flips.append((t, down))
        return t

    async def _completions(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.auth.add(request.headers.get("Authorization"))
        body = await request.json()
        if self.down:
            return web.json_response({"error": {"message": "no ready replica", "type": "unavailable"}}, status=503)
        if "messages" in body:
            return web.json_response({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})
        return web.json_response({"choices": [{"text": " ok", "index": 0}], "model": body.get("model")})

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()


@pytest.fixture
def peer():
    with OpenAIPeer() as p:
        yield p


def locust_processes(marker: Path) -> list[int]:
    """Pids of live processes whose command line names `marker` (our unique out dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if str(marker) in cmdline and "locust" in cmdline and "Z" not in state.split()[1:2]:
            pids.append(int(entry.name))
    return pids


def wait_until(cond, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_failures_land_in_the_outage_window_and_recovery_after_it(peer, tmp_path, monkeypatch):
    out = tmp_path / "load"
    monkeypatch.setenv("DRILLS_LOAD_API_KEY", "sk-test-key")
    with LoadRunner(peer.url, users=5, spawn_rate=50, out_dir=out, wait_s=(0.01, 0.02), chat_weight=0.2,
                    model="test-model", run_time_limit_s=30) as load:
        assert not any("sk-test-key" in Path(f"/proc/{pid}/cmdline").read_text() for pid in load.pids)
        time.sleep(1.0)
        down = peer.set_down(True)
        time.sleep(1.0)
        up = peer.set_down(False)
        time.sleep(1.0)
    result = load.stop()
    buckets = result.buckets

    # Every failure completed inside the outage (client stamps lag the server by the latency).
    failed = [b for b in buckets if b.fail]
    assert failed, "the outage produced no failed request"
    assert failed[0].end > down and failed[0].t < down + TOL_S
    assert failed[-1].t >= down and failed[-1].t < up + TOL_S
    assert error_rate(buckets, None, down - TOL_S) == 0.0
    assert error_rate(buckets, down + TOL_S, up - TOL_S) == 1.0
    assert error_rate(buckets, up + TOL_S, None) == 0.0
    assert set(result.errors()) == {"503 no ready replica"}

    # recovered is when the first good request was sent: one sent a hair before `up` can be answered after it
    recovered = first_sustained_success(buckets, after=down, min_duration_s=0.5, min_ok=20)
    assert recovered is not None and up - 0.05 <= recovered < up + TOL_S

    # Locust's own summary agrees with the buckets on totals.
    assert result.requests == sum(e["num_requests"] for e in result.summary)
    assert result.failures == sum(e["num_failures"] for e in result.summary)
    assert result.requests <= peer.requests
    assert {e["name"] for e in result.summary} == {"/v1/completions", "/v1/chat/completions"}
    assert 0 < result.failure_rate < 1 and result.p99_ms >= result.p50_ms > 0
    assert window(buckets).requests == result.requests
    assert peer.auth == {"Bearer sk-test-key"}
    assert locust_processes(out) == []


def test_no_locust_survives_an_exception_in_the_with_block(peer, tmp_path):
    out = tmp_path / "load"
    with pytest.raises(ZeroDivisionError):
        with LoadRunner(peer.url, users=2, spawn_rate=20, out_dir=out, wait_s=(0.02, 0.05)) as load:
            assert load.running and locust_processes(out)
            1 / 0
    assert not load.running
    assert locust_processes(out) == []
    assert load.stop().requests > 0  # idempotent, and the buckets were flushed at quit


def test_locust_quits_by_itself_when_its_parent_is_killed(peer, tmp_path):
    out = tmp_path / "load"
    script = textwrap.dedent(f"""
        import time
        from drills.load import LoadRunner
        LoadRunner({peer.url!r}, users=2, spawn_rate=20, out_dir={str(out)!r}, wait_s=(0.02, 0.05)).start()
        print("started", flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "started"
        assert locust_processes(out)
        parent.send_signal(signal.SIGKILL)  # no cleanup at all: only locust's own safety net is left
        parent.wait(10)
        assert wait_until(lambda: not locust_processes(out), 10), "orphaned locust kept running"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in locust_processes(out):
            os.kill(pid, signal.SIGKILL)


def test_a_broken_locustfile_fails_start_with_locusts_own_words(tmp_path):
    broken = tmp_path / "broken_locustfile.py"
    broken.write_text("raise RuntimeError('boom from the locustfile')\n", encoding="utf-8")
    load = LoadRunner("http://127.0.0.1:9", users=1, out_dir=tmp_path / "load", locustfile=broken,
                      start_timeout_s=20)
    with pytest.raises(CheckFailed, match="boom from the locustfile"):
        load.start()
    assert not load.running


def test_two_workers_share_the_load_and_their_buckets_merge(peer, tmp_path):
    out = tmp_path / "load"
    with LoadRunner(peer.url, users=4, spawn_rate=40, out_dir=out, workers=2, wait_s=(0.02, 0.04),
                    run_time_limit_s=30) as load:
        assert wait_until(lambda: all(f.exists() and f.stat().st_size for f in load.bucket_files), 5)
        assert len(load.pids) == 3
    result = load.stop()
    assert locust_processes(out) == []
    assert result.failures == 0 and result.requests > 0
    assert result.requests == sum(e["num_requests"] for e in result.summary)
