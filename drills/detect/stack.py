"""A real Prometheus and Alertmanager for one run (Debian's `prometheus` 2.x and `prometheus-alertmanager`).

`start_stack` runs both on 127.0.0.1 free ports from a folder of the run's reports (their configs, the dilated
rule pack, their data and logs stay there as evidence), with the scrape and evaluation intervals of a real
site (cluster time, `Timing`) turned into wall time for the target's clock. The caller hands the scrape
configs (static targets for the tests, `kubernetes_sd_configs` for the twin: drills/detect/scrape.py);
nothing here knows what is scraped. Both processes die with this one (PR_SET_PDEATHSIG) and `stop()` ends them.

Why these flags: Alertmanager runs without its HA gossip (`--cluster.listen-address=`: no port 9094 taken, no
peer to wait for); Prometheus's lookback and resend delay are dilated with the rules, so a series that stops
being scraped goes stale, and an alert is resent, after the same cluster time as on a real site.
"""

from __future__ import annotations

import ctypes
import json
import logging
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from drills.core.errors import DrillError
from drills.detect.pack import Distortion, format_wall, write_dilated

__all__ = ["Timing", "Stack", "start_stack", "missing_tools", "PROMETHEUS", "ALERTMANAGER", "MIN_WALL_S"]

log = logging.getLogger(__name__)

PROMETHEUS = ("prometheus",)
ALERTMANAGER = ("prometheus-alertmanager", "alertmanager")  # Debian's name, upstream's
MIN_WALL_S = 0.1  # the shortest scrape / evaluation interval we ask of Prometheus (wall seconds)
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Timing:
    """The site's monitoring cadence in cluster seconds, and the target clock's dilation."""

    scale: float = 1.0
    scrape_s: float = 15.0
    evaluation_s: float = 15.0
    lookback_s: float = 300.0  # Prometheus's default --query.lookback-delta
    resend_s: float = 60.0  # Prometheus's default --rules.alert.resend-delay
    group_wait_s: float = 0.0  # Alertmanager: detection is judged on what it holds, not on notifications

    def wall(self, cluster_s: float) -> float:
        return max(cluster_s / self.scale, MIN_WALL_S)

    @property
    def resolution_s(self) -> float:
        """Cluster seconds one scrape plus one evaluation can add to a detection here (the floors included)."""
        return (self.wall(self.scrape_s) + self.wall(self.evaluation_s)) * self.scale

    @property
    def slowed(self) -> bool:
        """True when the wall floor made scrapes or evaluations rarer (in cluster time) than the site's."""
        return self.scrape_s / self.scale < MIN_WALL_S or self.evaluation_s / self.scale < MIN_WALL_S


@dataclass
class Stack:
    """A running Prometheus + Alertmanager: their URLs, folder, the rule files they load and what was widened."""

    prometheus_url: str
    alertmanager_url: str
    workdir: Path
    timing: Timing
    rule_files: list[Path]
    distortions: list[Distortion]
    procs: list[subprocess.Popen] = field(default_factory=list, repr=False)

    def stop(self, timeout: float = 10.0) -> None:
        """End both processes (SIGTERM, then SIGKILL after `timeout`); idempotent."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:  # short: fixtures' reprs end up in reports
        return f"Stack({self.prometheus_url}, {self.alertmanager_url})"


def missing_tools() -> list[str]:
    """The Debian packages this machine lacks to run a managed stack (empty: both there)."""
    out = []
    if not _which(PROMETHEUS):
        out.append("prometheus")
    if not _which(ALERTMANAGER):
        out.append("prometheus-alertmanager")
    return out


def start_stack(workdir: Path, rule_files: Sequence[Path], scrape_configs: Sequence[dict[str, Any]],
                timing: Timing = Timing()) -> Stack:
    """Start Alertmanager, then Prometheus loading the (dilated) `rule_files` and scraping `scrape_configs`;
    return once both answer /-/ready. DrillError naming the tool when one is missing or does not start."""
    missing = missing_tools()
    if missing:
        raise DrillError(f"monitoring: {' and '.join(missing)} not installed (apt-get install {' '.join(missing)}, "
                         f"or `make bootstrap` as root)")
    workdir = Path(workdir)
    (workdir / "rules").mkdir(parents=True, exist_ok=True)
    rules, distortions = write_dilated(rule_files, workdir / "rules", timing.scale, timing.wall(timing.scrape_s))
    am_port, prom_port = _free_port(), _free_port()
    stack = Stack(f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", workdir, timing, rules, distortions)
    try:
        stack.procs.append(_start_alertmanager(workdir, am_port, timing))
        _wait_ready(stack.alertmanager_url, stack.procs[-1], workdir / "alertmanager.log")
        stack.procs.append(_start_prometheus(workdir, prom_port, am_port, rules, scrape_configs, timing))
        _wait_ready(stack.prometheus_url, stack.procs[-1], workdir / "prometheus.log")
        _wait_scraped(stack.prometheus_url, [c["job_name"] for c in scrape_configs])
    except BaseException:
        stack.stop()
        raise
    log.info("monitoring: Prometheus %s, Alertmanager %s (scrape %s, evaluate %s wall; scale %g)",
             stack.prometheus_url, stack.alertmanager_url, format_wall(timing.wall(timing.scrape_s)),
             format_wall(timing.wall(timing.evaluation_s)), timing.scale)
    return stack


def _start_alertmanager(workdir: Path, port: int, timing: Timing) -> subprocess.Popen:
    wait = format_wall(timing.wall(timing.group_wait_s)) if timing.group_wait_s else "0s"
    config = {
        "route": {"receiver": "drills", "group_by": ["alertname"], "group_wait": wait,
                  "group_interval": format_wall(timing.wall(timing.evaluation_s)),
                  "repeat_interval": "4h"},
        "receivers": [{"name": "drills"}],  # no notifier: the drill reads the alerts over the API
    }
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (workdir / "alertmanager-data").mkdir(exist_ok=True)
    return _spawn([_which(ALERTMANAGER), f"--config.file={workdir / 'alertmanager.yml'}",
                   f"--storage.path={workdir / 'alertmanager-data'}", f"--web.listen-address=127.0.0.1:{port}",
                   "--cluster.listen-address=", "--log.level=warn"], workdir / "alertmanager.log")


def _start_prometheus(workdir: Path, port: int, am_port: int, rules: Sequence[Path],
                      scrape_configs: Sequence[dict[str, Any]], timing: Timing) -> subprocess.Popen:
    scrape = format_wall(timing.wall(timing.scrape_s))
    config = {
        "global": {"scrape_interval": scrape, "scrape_timeout": scrape,
                   "evaluation_interval": format_wall(timing.wall(timing.evaluation_s))},
        "rule_files": [str(p) for p in rules],
        "alerting": {"alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": list(scrape_configs),
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return _spawn([_which(PROMETHEUS), f"--config.file={workdir / 'prometheus.yml'}",
                   f"--storage.tsdb.path={workdir / 'prometheus-data'}", f"--web.listen-address=127.0.0.1:{port}",
                   f"--query.lookback-delta={format_wall(timing.wall(timing.lookback_s))}",
                   f"--rules.alert.resend-delay={format_wall(timing.wall(timing.resend_s))}",
                   "--log.level=warn"], workdir / "prometheus.log")


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen:
    out = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent, cwd=log_path.parent)
    finally:
        out.close()


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies (a drill killed by SIGKILL leaves no stack)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


def _wait_ready(url: str, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DrillError(f"monitoring: {Path(proc.args[0]).name} exited ({proc.returncode}) at start: "
                             f"{_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise DrillError(f"monitoring: {Path(proc.args[0]).name} not ready at {url} within {READY_TIMEOUT_S:g} s: "
                     f"{_tail(log_path)}")


def _wait_scraped(url: str, jobs: Sequence[str]) -> None:
    """Until every scrape job has been scraped once (Prometheus hands discovered targets to its scrapers at most
    every 5 s: a fault injected before that would be judged on a stack that saw nothing yet). A job still without a
    scraped target after the timeout is logged, not fatal: its rules will not fire, and the drill says so."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    pending = set(jobs)
    while pending and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/targets?state=active", timeout=2) as answer:
                active = json.load(answer).get("data", {}).get("activeTargets", [])
        except (urllib.error.URLError, OSError, ValueError):
            active = []
        pending -= {t.get("scrapePool") for t in active if t.get("health") == "up"}
        if pending:
            time.sleep(0.1)
    if pending:
        log.warning("monitoring: no target of %s scraped within %g s: its rules cannot fire", ", ".join(sorted(pending)),
                    READY_TIMEOUT_S)


def _which(names: Sequence[str]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:]) or "(no output)"
    except OSError:
        return "(no log)"
