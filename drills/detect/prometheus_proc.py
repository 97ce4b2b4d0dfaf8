"""Run a real Prometheus (Debian's `prometheus`) for one run: a temp dir, a free port on 127.0.0.1, a config
given as data; ready when `/-/ready` answers; read through its HTTP API; stopped with SIGTERM (SIGKILL after a
grace). Nothing here knows what is scraped: the caller's config says (see k8s_sd.scrape_configs).

API: `PrometheusProcess(config, workdir, binary=None)`; `.start(timeout_s) → url`; `.query(expr) → [series]`;
`.targets(state="active") → [target]`; `.api(path, **params) → data`; `.stop()`; a context manager.
`find_prometheus()` → the binary's path or None (callers skip, naming why).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from drills.core.errors import DrillError

__all__ = ["PrometheusProcess", "find_prometheus", "free_port"]

log = logging.getLogger(__name__)


def find_prometheus() -> str | None:
    return shutil.which("prometheus") or (p if os.access(p := "/usr/bin/prometheus", os.X_OK) else None)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class PrometheusProcess:
    def __init__(self, config: dict, workdir: str | Path, binary: str | None = None, host: str = "127.0.0.1"):
        self.config, self.workdir = config, Path(workdir)
        self.binary = binary or find_prometheus()
        self.host, self.port = host, 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> str:
        if not self.binary:
            raise DrillError("prometheus is not installed (Debian package `prometheus`; `make` installs it as root)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.workdir / "data", ignore_errors=True)  # a fresh TSDB: series of another run never answer
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.port = free_port(self.host)
        log_path = self.workdir / "prometheus.log"
        with open(log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={cfg}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address={self.host}:{self.port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DrillError(f"prometheus exited with code {self.proc.returncode} while starting: "
                                 f"{_tail(log_path)} (its log: {log_path})")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1.0) as resp:
                    if resp.status == 200:
                        return self.url
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise DrillError(f"prometheus did not become ready within {timeout_s:.0f} s (its log: {log_path})")

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/<path>; the `data` of a success, DrillError otherwise."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10.0) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise DrillError(f"prometheus /api/v1/{path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def targets(self, state: str = "active") -> list[dict]:
        data = self.api("targets", state=state)
        return data.get("activeTargets" if state == "active" else "droppedTargets") or []

    def stop(self, grace_s: float = 5.0) -> None:
        """Idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(grace_s)

    def __enter__(self) -> "PrometheusProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
