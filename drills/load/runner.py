"""Run the inference load in a locust subprocess that can always be stopped, and read its results.

locust is never imported here (its gevent monkey-patching breaks ssl once the kubernetes client
is loaded): `LoadRunner` starts `python -m locust --headless` in its own session, waits until
requests flow, and on `stop()` (or leaving the `with` block, or interpreter exit) asks it to quit
with SIGTERM, then kills its process group. Three safety nets stop even an orphan: `--run-time`,
`--parent-pid` (the locustfile quits when this process is gone) and the master's heartbeat.

The same load against a real cluster endpoint:

    export DRILLS_LOAD_API_KEY=...        # sent as "Authorization: Bearer ..."; never on the command line
    runner = LoadRunner("https://llm.example.com", users=64, spawn_rate=16, out_dir="reports/load",
                        model="meta-llama/Llama-3.1-8B-Instruct", workers=4)   # --load-workers 4

or by hand: `python -m locust -f drills/load/locustfile.py --headless -H URL -u 64 -r 16 -t 30m
--model NAME --bucket-file out/buckets.jsonl` (add `--master --expect-workers N` and N
`--worker --bucket-file out/buckets-wI.jsonl` processes for more load than one core makes).
One locust process is one core; add workers when its CPU saturates, not users.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from drills.core.errors import CheckFailed
from drills.load.bucket_stats import WindowStats, window
from drills.load.buckets import Bucket, read_buckets, rebin
from drills.load.watermark import read_watermark
from drills.load.outcome import DEFAULT_CLIENT_TIMEOUT_S

__all__ = ["LoadRunner", "LoadResult", "LOCUSTFILE"]

log = logging.getLogger(__name__)

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
FLUSH_S = 0.25  # wall seconds between a locust process's bucket flushes (locustfile.py --bucket-flush-s default)
LATE_RESULTS_S = 10.0  # wall seconds a reader waits for the load's results to reach a moment (normally ~0.35 s)


@dataclass
class LoadResult:
    """What the load saw: fine buckets (epoch wall time) plus locust's own end-of-run summary."""

    buckets: list[Bucket]
    summary: list[dict] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    started_at: float | None = None
    stopped_at: float | None = None

    @property
    def totals(self) -> WindowStats:
        return window(self.buckets)

    @property
    def requests(self) -> int:
        return sum(b.n for b in self.buckets)

    @property
    def failures(self) -> int:
        return sum(b.fail for b in self.buckets)

    @property
    def failure_rate(self) -> float:
        return self.totals.failure_rate

    @property
    def p50_ms(self) -> float:
        return self.totals.p50_ms

    @property
    def p99_ms(self) -> float:
        return self.totals.p99_ms

    def errors(self) -> dict[str, int]:
        """Error messages over the run (the first few distinct ones per bucket), most frequent first."""
        out: dict[str, int] = {}
        for b in self.buckets:
            for k, v in b.errors.items():
                out[k] = out.get(k, 0) + v
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def series(self, width_s: float = 1.0) -> list[dict]:
        """Rows for a chart: per `width_s` interval the request rate, failures and latency."""
        rows = []
        for b in rebin(self.buckets, width_s):
            w = window([b])
            rows.append({"t": b.t, "rps": b.n / width_s, "ok": b.ok, "fail": b.fail,
                         "mean_ms": _none(w.mean_ms), "p50_ms": _none(w.p50_ms), "p99_ms": _none(w.p99_ms)})
        return rows

    def to_dict(self) -> dict:
        """A compact, JSON-ready summary for records and reports (no buckets)."""
        return {**self.totals.to_dict(), "errors": self.errors(), "started_at": self.started_at,
                "stopped_at": self.stopped_at, "files": {k: str(v) for k, v in self.files.items()}}


class LoadRunner:
    """One headless locust run against `host`, kept in subprocesses in their own sessions."""

    def __init__(self, host: str, users: int = 5, spawn_rate: float = 5.0, out_dir: str | Path = "reports/load",
                 *, bucket_s: float = 0.05, model: str = "drill-model", workers: int = 0,
                 run_time_limit_s: float = 3600.0, max_tokens: int = 16, prompt_words: int = 8,
                 chat_weight: float = 0.0, wait_s: tuple[float, float] = (0.0, 0.0),
                 timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S, replica_header: str | None = None,
                 latency_scale: float = 1.0, cluster_timeout_s: float | None = None,
                 start_timeout_s: float = 30.0, stop_timeout_s: float = 15.0,
                 locustfile: str | Path = LOCUSTFILE,
                 on_starting: Callable[[LoadRunner], None] | None = None,
                 on_launched: Callable[[LoadRunner], None] | None = None) -> None:
        self.host = host.rstrip("/")
        self.users, self.spawn_rate, self.workers = users, spawn_rate, workers
        self.out_dir = Path(out_dir)
        self.bucket_s, self.model = bucket_s, model
        self.run_time_limit_s = run_time_limit_s
        self.max_tokens, self.prompt_words, self.chat_weight, self.wait_s = max_tokens, prompt_words, chat_weight, wait_s
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        # Wall seconds a request may take before it counts as hung (kind `timeout`), and the response
        # header naming the replica that answered (successes per replica); see drills.load.outcome.
        self.timeout_s, self.replica_header, self.latency_scale = timeout_s, replica_header, latency_scale
        # The endpoint is the twin's gateway: the client timeout in cluster seconds, and the twin says what is hung
        # once `timeout_s` of wall time is up (drills/load/hung.py). None: `timeout_s` decides alone.
        self.cluster_timeout_s = cluster_timeout_s
        self.locustfile = Path(locustfile)
        # Optional hooks: before the first process starts, and once all have started.
        self.on_starting, self.on_launched = on_starting, on_launched
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._logs: list = []
        self._result: LoadResult | None = None
        self.started_at: float | None = None

    def __repr__(self) -> str:  # short and secret-free: it may end up in a report
        return f"LoadRunner({self.host!r}, users={self.users}, workers={self.workers})"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> LoadRunner:
        """Launch locust and return once the first requests have completed (raises CheckFailed if not)."""
        if self._procs:
            raise RuntimeError("LoadRunner.start() called twice")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for f in self.bucket_files:
            f.unlink(missing_ok=True)
        if self.on_starting is not None:
            self.on_starting(self)
        atexit.register(self.stop)
        try:
            self._launch()
            if self.on_launched is not None:
                self.on_launched(self)
            self._wait_for_traffic()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> LoadResult:
        """Ask locust to quit, wait, kill what is left. Idempotent; returns the result."""
        if self._result is not None:
            return self._result
        if not self._procs:
            self._result = self.result()
            return self._result
        atexit.unregister(self.stop)
        master = self._procs[0][1]
        _signal(master, signal.SIGTERM)  # master shutdown also sends "quit" to its workers
        deadline = time.monotonic() + self.stop_timeout_s
        for _, p in self._procs:
            _wait(p, max(0.1, deadline - time.monotonic()))
        for name, p in self._procs:
            if p.poll() is None:
                log.warning("locust %s (pid %d) did not quit in %.0fs: killing it", name, p.pid, self.stop_timeout_s)
                _killpg(p, signal.SIGTERM)
                if not _wait(p, 2.0):
                    _killpg(p, signal.SIGKILL)
                    _wait(p, 5.0)
            _killpg(p, signal.SIGKILL)  # anything the process left behind in its group
        for fh in self._logs:
            fh.close()
        self._result = self.result()
        self._result.stopped_at = time.time()
        log.info("load stopped: %d requests, %d failed", self._result.requests, self._result.failures)
        return self._result

    def __enter__(self) -> LoadRunner:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ observation
    @property
    def running(self) -> bool:
        return any(p.poll() is None for _, p in self._procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for _, p in self._procs]

    def processes(self) -> list[tuple[str, int]]:
        """(name, pid) of each locust process started; each leads its own session and process group."""
        return [(name, p.pid) for name, p in self._procs]

    @property
    def bucket_files(self) -> list[Path]:
        if self.workers:
            return [self.out_dir / f"buckets-w{i}.jsonl" for i in range(self.workers)]
        return [self.out_dir / "buckets.jsonl"]

    def buckets(self) -> list[Bucket]:
        """Buckets written so far (live while running: they lag by the flush interval, ~0.3 s)."""
        return read_buckets(self.bucket_files)

    def covered_until(self) -> float | None:
        """Epoch wall moment before which every completed request is in `buckets()` (None: nothing flushed yet)."""
        return read_watermark(self.bucket_files)

    def wait_covered(self, until: float, timeout_s: float = LATE_RESULTS_S) -> float | None:
        """Wait until the load's results reach the wall moment `until` (each worker flushes every ~0.25 s), at
        most `timeout_s` or until the load ended; returns the watermark reached (None: nothing flushed)."""
        end = time.monotonic() + timeout_s
        while True:
            mark = self.covered_until()
            if (mark is not None and mark >= until) or time.monotonic() >= end or not self.running:
                return mark
            time.sleep(0.02)

    def result(self) -> LoadResult:
        summary_path = self.out_dir / "locust.json"
        summary: list[dict] = []
        if summary_path.exists():
            try:
                summary = json.loads(summary_path.read_text(encoding="utf-8") or "[]")
            except ValueError:
                log.warning("unreadable locust summary %s", summary_path)
        files = {"buckets": self.bucket_files[0] if not self.workers else self.out_dir,
                 "summary": summary_path, "stats_csv": self.out_dir / "locust_stats.csv",
                 "failures_csv": self.out_dir / "locust_failures.csv", "log": self.out_dir / "locust-master.log"}
        return LoadResult(buckets=self.buckets(), summary=summary,
                          files={k: v for k, v in files.items() if v.exists()}, started_at=self.started_at)

    # ------------------------------------------------------------ helpers
    def twin_timeout_args(self) -> list[str]:
        if self.cluster_timeout_s is None:
            return []
        return ["--ask-twin-before-timeout", "--cluster-timeout-s", f"{self.cluster_timeout_s:g}"]

    def _common_args(self) -> list[str]:
        lo, hi = self.wait_s
        return ["-f", str(self.locustfile), "--model", self.model, "--max-tokens", str(self.max_tokens),
                "--prompt-words", str(self.prompt_words), "--chat-weight", str(self.chat_weight),
                "--wait-min-s", str(lo), "--wait-max-s", str(hi), "--bucket-s", str(self.bucket_s),
                "--timeout-s", f"{self.timeout_s:g}", "--replica-header", self.replica_header or "",
                "--latency-scale", f"{self.latency_scale:g}", *self.twin_timeout_args(),
                "--parent-pid", str(os.getpid()), "--loglevel", "WARNING"]

    def _launch(self) -> None:
        run_time = f"{max(1, math.ceil(self.run_time_limit_s))}s"
        master = [sys.executable, "-m", "locust", *self._common_args(), "--headless", "-H", self.host,
                  "-u", str(self.users), "-r", str(self.spawn_rate), "-t", run_time, "--only-summary",
                  "--csv", str(self.out_dir / "locust"), "--json-file", str(self.out_dir / "locust"),  # locust appends .json
                  "--exit-code-on-error", "0"]
        if self.workers:
            port = _free_port()
            master += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                       "--expect-workers", str(self.workers),
                       "--expect-workers-max-wait", str(math.ceil(self.start_timeout_s))]
        else:
            master += ["--bucket-file", str(self.bucket_files[0])]
        self._spawn("master", master)
        for i in range(self.workers):
            self._spawn(f"w{i}", [sys.executable, "-m", "locust", *self._common_args(), "--worker",
                                  "--master-host", "127.0.0.1", "--master-port", str(port),
                                  "--bucket-file", str(self.bucket_files[i])])
        self.started_at = time.time()
        log.info("load started: %s users against %s (%d workers)", self.users, self.host, self.workers)

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        fh = open(self.out_dir / f"locust-{name}.log", "wb")  # noqa: SIM115 (closed in stop)
        self._logs.append(fh)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # A new session: the process group can be killed as one, and a terminal's Ctrl-C reaches
        # only us (we stop locust ourselves, after flushing).
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        self._procs.append((name, p))

    def _wait_for_traffic(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for name, p in self._procs:
                if p.poll() is not None:
                    raise CheckFailed(f"locust {name} exited with code {p.returncode} before any request "
                                      f"completed against {self.host}: {self._log_tail(name)}")
            if any(b.n for b in self.buckets()):
                return
            time.sleep(0.05)
        raise CheckFailed(f"no request completed against {self.host} within {self.start_timeout_s:.0f}s "
                          f"of starting locust: {self._log_tail('master')}")

    def _log_tail(self, name: str, chars: int = 1500) -> str:
        path = self.out_dir / f"locust-{name}.log"
        try:
            text = path.read_bytes()[-chars:].decode("utf-8", "replace").strip()
        except OSError:
            return "(no log)"
        return text or "(empty log)"


def _signal(p: subprocess.Popen, sig: int) -> None:
    if p.poll() is None:
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass


def _killpg(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(p: subprocess.Popen, timeout_s: float) -> bool:
    try:
        p.wait(timeout=timeout_s)
        return True
    except subprocess.TimeoutExpired:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _none(x: float) -> float | None:
    return None if math.isnan(x) else x
