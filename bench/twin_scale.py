"""Benchmark of the whole twin at the `large` profile (a benchmark, not a test: prints figures).

1,024 GPU nodes, a 64-worker and a 2-worker training job, 32 inference replicas, 20 SSH switches,
every controller running. Measures: start time (process start → twin.json), time until the
workloads settle (both jobs stepping, every replica Ready, from the ground truth), RSS, CPU over
`--idle-s` seconds of steady state (heartbeats, leases, training logs), and p50/p99 of list nodes /
list pods while the controllers run.

    .venv/bin/python bench/twin_scale.py [--profile large] [--rounds 30] [--idle-s 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drills.twin.launcher import start_twin  # noqa: E402

__all__ = ["main"]

log = logging.getLogger(__name__)

_TICK = os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    with tempfile.TemporaryDirectory(prefix="twin-scale-") as tmp:
        t0 = time.perf_counter()
        twin = start_twin(Path(tmp) / "state", profile=args.profile, scale=args.scale, timeout=300)
        with twin:
            started = time.perf_counter() - t0
            http = requests.Session()
            settled = _settle(http, twin, args.settle_timeout_s) - t0
            rss_settled = _rss_mib(twin.pid)
            cpu = _cpu_percent(twin.pid, args.idle_s)
            lists = {
                "list nodes": _time(lambda: _get(http, f"{twin.url}/api/v1/nodes"), args.rounds),
                "list pods (all namespaces)": _time(lambda: _get(http, f"{twin.url}/api/v1/pods"), args.rounds),
                "list nodes, Table (kubectl get nodes)": _time(lambda: _get(
                    http, f"{twin.url}/api/v1/nodes",
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}), args.rounds),
            }
            stats = http.get(f"{twin.url}/twin/v1/stats", timeout=30).json()
            rss_end = _rss_mib(twin.pid)
    figures = {
        "profile": args.profile, "scale": args.scale or 60, "nodes": stats["objects"].get("nodes"),
        "pods": stats["objects"].get("pods"), "switches": None,
        "start_s": round(started, 2), "settled_s": round(settled, 2),
        "rss_mib_settled": rss_settled, "rss_mib_end": rss_end,
        f"cpu_percent_of_one_core_over_{args.idle_s:g}s": round(cpu, 1),
        "list_ms": {name: {"p50": round(p50 * 1000, 1), "p99": round(p99 * 1000, 1)} for name, (p50, p99) in lists.items()},
    }
    figures["switches"] = len(twin.info.get("switches") or [])
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"twin `{args.profile}`: {figures['nodes']} nodes, {figures['pods']} pods, {figures['switches']} switches, "
              f"scale {figures['scale']}x")
        print(f"  start (process → twin.json): {started:.2f} s; workloads settled (jobs stepping, replicas Ready): "
              f"{settled:.2f} s")
        print(f"  RSS: {rss_settled} MiB settled, {rss_end} MiB at the end")
        print(f"  CPU in steady state over {args.idle_s:g} s: {cpu:.1f} % of one core")
        for name, (p50, p99) in lists.items():
            print(f"  {name:<40} p50 {p50 * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms   ({args.rounds} rounds)")
    return 0


def _settle(http: requests.Session, twin, timeout_s: float) -> float:
    """Wall time (perf_counter) when every training job has started and every Deployment is all Ready."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        truth = http.get(twin.info["truth"], timeout=30).json()
        jobs = truth["training"].values()
        deps = truth["inference"].values()
        if jobs and deps and all("job_started" in j.get("last", {}) for j in jobs) \
                and all(d.get("all_ready") for d in deps):
            return time.perf_counter()
        time.sleep(0.2)
    raise SystemExit(f"the workloads did not settle within {timeout_s:.0f} s")


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return -1


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _cpu_percent(pid: int, seconds: float) -> float:
    c0, t0 = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (_cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def _get(http: requests.Session, url: str, headers: dict | None = None) -> None:
    resp = http.get(url, headers=headers, timeout=60)
    resp.raise_for_status()
    resp.content  # noqa: B018 — read the whole body


def _time(fn, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="large")
    p.add_argument("--scale", type=float, default=None, help="twin seconds per wall second (default: the profile's)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--idle-s", type=float, default=10.0)
    p.add_argument("--settle-timeout-s", type=float, default=300.0)
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
