"""Benchmark of the whole twin at scale (a benchmark, not a test: prints figures).

Two shapes:
- `--profile large` (default): the `large` profile as it is (1,024 GPU nodes, a 64-worker job, 32 replicas).
- `--nodes N [--pods P]`: the `minimal` profile (its workloads, so the same drills run) plus a fleet of
  N − 6 idle 8-GPU nodes, and filler pods bound to them up to P pods in all (`--nodes 4096 --pods 50000`:
  32,768 GPUs, the issue-19 profile). The GPU DaemonSets run on every fleet node as on the others.

Measures (with the 1-minute load average at each phase, and the twin's own CPU seconds to start and to settle,
which a loaded machine does not inflate): start time (process start → twin.json), time until the workloads
settle (both jobs stepping, every replica Ready, no pod Pending), RSS, CPU over `--idle-s` seconds of steady
state (after the kubelets have taken up the filler pods), p50/p99 of list nodes, list pods by field selector (spec.nodeName, a random node each round), the full
pod list, and one chunk of a paginated pod list (limit=500, continued through the whole list); with `--drill`,
the wall time of one node-loss drill (`drills run -k <scenario> --twin-state`) on this twin and on a minimal twin.

    .venv/bin/python bench/twin_scale.py [--profile large | --nodes 4096 --pods 50000] [--drill] [--json]
    .venv/bin/python bench/twin_scale.py --nodes 4096 --drill-starting [--scale 600] [--detection]

`--drill-starting` (issue 32) is another shape: the node-loss drill runs as soon as the training job steps, while
the fleet's DaemonSet pods are still starting; it prints the verdict and the recovery vs the twin's truth.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drills.twin.launcher import start_twin  # noqa: E402

__all__ = ["main"]

log = logging.getLogger(__name__)

_TICK = os.sysconf("SC_CLK_TCK")
_FILLER_NS = "batch-fleet"
_DRILL = "cordon-drain"  # the node-loss Example timed with --drill


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.drill_starting:
        return _drill_while_starting(args)
    with tempfile.TemporaryDirectory(prefix="twin-scale-") as tmp:
        profile = _fleet_profile(Path(tmp), args.nodes) if args.nodes else args.profile
        t0 = time.perf_counter()
        twin = start_twin(Path(tmp) / "state", profile=profile, scale=args.scale, timeout=300)
        with twin:
            started = time.perf_counter() - t0
            cpu_s = {"start": _cpu_seconds(twin.pid)}
            loads = {"start": _load()}
            http = requests.Session()
            settled = _settle(http, twin, args.settle_timeout_s) - t0
            cpu_s["settle"], loads["settle"] = _cpu_seconds(twin.pid) - cpu_s["start"], _load()
            print(f"settled after {settled:.1f} s ({cpu_s['settle']:.1f} CPU s, load {loads['settle']})",
                  file=sys.stderr, flush=True)
            filled = _fill(http, twin, args.pods) if args.pods else 0.0
            absorbed = _quiesce(http, twin.url, args.settle_timeout_s) if args.pods else 0.0
            rss_settled = _rss_mib(twin.pid)
            cpu = _cpu_percent(twin.pid, args.idle_s)
            loads["idle"] = _load()
            nodes = [n["metadata"]["name"] for n in http.get(f"{twin.url}/api/v1/nodes", timeout=60).json()["items"]]
            rng = random.Random(1)
            lists = {
                "list nodes": _time(lambda: _get(http, f"{twin.url}/api/v1/nodes"), args.rounds),
                "list nodes, Table (kubectl get nodes)": _time(lambda: _get(
                    http, f"{twin.url}/api/v1/nodes",
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}), args.rounds),
                "list pods by field selector (spec.nodeName)": _time(lambda: _get(
                    http, f"{twin.url}/api/v1/pods", params={"fieldSelector": f"spec.nodeName={rng.choice(nodes)}"}),
                    args.rounds),
                "list pods (all namespaces)": _time(lambda: _get(http, f"{twin.url}/api/v1/pods"), args.rounds),
                "one chunk of a paginated pod list (limit=500)": _chunks(http, f"{twin.url}/api/v1/pods", 500,
                                                                        args.rounds),
            }
            loads["lists"] = _load()
            stats = http.get(f"{twin.url}/twin/v1/stats", timeout=30).json()
            rss_end = _rss_mib(twin.pid)
            print(f"measured: {json.dumps({'start_s': round(started, 2), 'settled_s': round(settled, 2), 'rss_mib': rss_end, 'cpu': round(cpu, 1), 'lists': lists})}",
                  file=sys.stderr, flush=True)
            _settle(http, twin, args.settle_timeout_s)  # settled again after the list benchmarks
            drill_s = _drill(twin.state_dir, Path(tmp)) if args.drill else None
            loads["drill"] = _load()
        minimal_drill_s = _minimal_drill(Path(tmp), args.scale) if args.drill else None
        loads["minimal drill"] = _load()
    figures = {
        "profile": args.profile if not args.nodes else f"minimal + fleet ({args.nodes} nodes)",
        "scale": args.scale or 60, "nodes": stats["objects"].get("nodes"), "pods": stats["objects"].get("pods"),
        "gpus": None, "start_s": round(started, 2), "settled_s": round(settled, 2),
        "twin_cpu_s": {k: round(v, 1) for k, v in cpu_s.items()}, "load_average_1m": loads,
        "filler_pods_load_s": round(filled, 2), "filler_pods_absorbed_s": round(absorbed, 1), "rss_mib_settled": rss_settled, "rss_mib_end": rss_end,
        f"cpu_percent_of_one_core_over_{args.idle_s:g}s": round(cpu, 1),
        "list_ms": {name: {"p50": round(p50 * 1000, 1), "p99": round(p99 * 1000, 1)} for name, (p50, p99) in lists.items()},
        "node_loss_drill_s": drill_s, "node_loss_drill_s_minimal": minimal_drill_s,
        "drill_ratio": round(drill_s / minimal_drill_s, 2) if drill_s and minimal_drill_s else None,
    }
    figures["gpus"] = 8 * (figures["nodes"] or 0) if args.nodes else None
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"twin `{figures['profile']}`: {figures['nodes']} nodes, {figures['pods']} pods, scale {figures['scale']}x")
        print(f"  start (process → twin.json): {started:.2f} s; workloads settled (jobs stepping, replicas Ready): "
              f"{settled:.2f} s; filler pods loaded in {filled:.2f} s, absorbed by the kubelets in {absorbed:.1f} s")
        print(f"  the twin's CPU time: {cpu_s['start']:.1f} s to start, {cpu_s['settle']:.1f} s to settle")
        print(f"  load average (1 min) at each phase: {loads}")
        print(f"  RSS: {rss_settled} MiB settled, {rss_end} MiB at the end")
        print(f"  CPU in steady state over {args.idle_s:g} s: {cpu:.1f} % of one core")
        for name, (p50, p99) in lists.items():
            print(f"  {name:<46} p50 {p50 * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms")
        if args.drill:
            print(f"  node-loss drill ({_DRILL}): {drill_s:.1f} s here, {minimal_drill_s:.1f} s on the minimal twin "
                  f"({figures['drill_ratio']}x)")
    return 0


def _fleet_profile(tmp: Path, nodes: int) -> str:
    """The minimal profile plus `nodes` − 6 idle 8-GPU inference-role nodes (no leaf: no fabric traffic)."""
    profile = yaml.safe_load((ROOT / "drills/twin/profiles/minimal.yaml").read_text())
    base = sum(p["count"] for p in profile["node_pools"].values())
    fleet = dict(profile["node_pools"]["inference"], prefix="gpu-fleet", count=max(nodes - base, 0), gpus=8)
    fleet.pop("leaves", None)
    profile["node_pools"]["fleet"] = fleet
    profile["description"] = f"minimal + {fleet['count']} idle 8-GPU nodes (bench/twin_scale.py)"
    path = tmp / f"fleet-{nodes}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return str(path)


def _fill(http: requests.Session, twin, total: int) -> float:
    """Create Running filler pods bound round-robin to the fleet nodes until the twin holds `total` pods."""
    t0 = time.perf_counter()
    url = twin.url
    have = http.get(f"{url}/twin/v1/stats", timeout=30).json()["objects"]["pods"]
    nodes = [n["metadata"]["name"] for n in http.get(f"{url}/api/v1/nodes", params={"labelSelector": "gpu-drills.io/pool=fleet"},
                                                    timeout=60).json()["items"]] or ["gpu-fleet-0001"]
    http.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": _FILLER_NS}}, timeout=30)
    batch, i = [], 0
    for i in range(max(total - have, 0)):
        batch.append(_filler_pod(i, nodes[i % len(nodes)]))
        if len(batch) == 2000:
            http.post(f"{url}/twin/v1/load", json={"items": batch}, timeout=120).raise_for_status()
            batch = []
    if batch:
        http.post(f"{url}/twin/v1/load", json={"items": batch}, timeout=120).raise_for_status()
    return time.perf_counter() - t0


def _quiesce(http: requests.Session, url: str, timeout_s: float, floor_per_s: float = 60.0) -> float:
    """Seconds until the twin's writes fall back to steady state (≤ `floor_per_s` a second, three seconds in
    a row: heartbeats and the workloads), once the kubelets have taken up the filler pods (their stages write
    each one): steady-state figures are measured after that, not during it."""
    t0 = time.monotonic()
    calm, rv = 0, int(http.get(f"{url}/twin/v1/stats", timeout=30).json()["resourceVersion"])
    while calm < 3 and time.monotonic() - t0 < timeout_s:
        time.sleep(1.0)
        now = int(http.get(f"{url}/twin/v1/stats", timeout=30).json()["resourceVersion"])
        calm, rv = (calm + 1 if now - rv <= floor_per_s else 0), now
    return time.monotonic() - t0


def _filler_pod(i: int, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"filler-{i:05d}", "namespace": _FILLER_NS, "labels": {"app": f"filler-{i % 100}"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.local/batch/worker:1"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _drill(state_dir: Path, tmp: Path) -> float:
    """Wall seconds of one node-loss drill against the running twin in `state_dir`."""
    reports = tmp / f"reports-{state_dir.name}"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "drills.cli", "run", "-m", "gpu_node_loss", "-k", _DRILL,
                           "--twin-state", str(state_dir), "--reports", str(reports), "--no-html"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:  # a drill that fails here is a finding: say so, keep the other figures
        print(f"the node-loss drill failed ({done.returncode}) after {elapsed:.1f} s:\n{done.stdout[-3000:]}",
              file=sys.stderr)
        return -round(elapsed, 1)
    return round(elapsed, 1)


def _drill_while_starting(args: argparse.Namespace) -> int:
    """Issue 32: a node-loss drill on a twin whose fleet is still starting its DaemonSet pods must pass, and
    measure its recovery as the twin's truth has it. The drill starts as soon as the training job steps (not
    once the twin settled); prints the Pending pods then and after, the verdict, the recovery vs the truth."""
    from bench.truth import errors

    with tempfile.TemporaryDirectory(prefix="twin-scale-") as tmp:
        profile = _fleet_profile(Path(tmp), args.nodes) if args.nodes else args.profile
        t0 = time.perf_counter()
        twin = start_twin(Path(tmp) / "state", profile=profile, scale=args.scale, timeout=600)
        with twin:
            http = requests.Session()
            started = time.perf_counter() - t0
            deadline = time.monotonic() + args.settle_timeout_s
            while not all("job_started" in j.get("last", {}) for j in
                          http.get(twin.info["truth"], timeout=60).json()["training"].values() or [{}]):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the training job did not start within {args.settle_timeout_s:.0f} s")
                time.sleep(0.5)
            stepping = time.perf_counter() - t0
            cpu_stepping = _cpu_seconds(twin.pid)
            pending = _pending_count(http, twin.url)
            reports = Path(tmp) / "reports"
            t1 = time.perf_counter()
            # detection off unless asked for (as in the test suite): its Prometheus discovers and scrapes every
            # pod of the fleet, a benchmark of its own (with it on, the drill grew to 20 GB at 4,096 nodes)
            env = os.environ if args.detection else dict(os.environ, DRILLS_MONITORING="off")
            done = subprocess.run([sys.executable, "-m", "drills.cli", "run", "-m", "gpu_node_loss", "-k", _DRILL,
                                   "--twin-state", str(twin.state_dir), "--reports", str(reports), "--run-id", "r",
                                   "--no-html"], cwd=ROOT, capture_output=True, text=True, timeout=3600, env=env)
            drill_s = time.perf_counter() - t1
            cpu_end, drill_cpu = _cpu_seconds(twin.pid), _children_cpu_s()
            pending_after = _pending_count(http, twin.url)
            nodes = http.get(f"{twin.url}/twin/v1/stats", timeout=60).json()["objects"].get("nodes")
            # the twin's ground truth, saved where bench/truth.py reads it (as fixtures/target.py saves it for the
            # twins a run starts itself; this one the bench started)
            (twin.state_dir / "truth.json").write_text(json.dumps(http.get(twin.info["truth"], timeout=120).json()))
            path = reports / "r" / "records.jsonl"
            recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
            for rec, truth, err in errors(recs):  # while the state dir (truth, audit log) is still there
                rec["truth_s"], rec["error_of_target"] = round(truth, 3), round(err, 5)
    print(f"twin with {nodes} nodes: up in {started:.1f} s, training stepping after {stepping:.1f} s with {pending} "
          f"pods Pending; node-loss drill ({_DRILL}) exit {done.returncode} in {drill_s:.1f} s wall, {pending_after} "
          f"pods still Pending at its end; load average {_load()}")
    print(f"  CPU seconds: the twin {cpu_stepping:.1f} until the job stepped, {cpu_end:.1f} at the drill's end; the "
          f"drill's process {drill_cpu:.1f} (a shared machine stretches the wall times, not these)")
    for rec in recs:
        print(f"  {rec['verdict']}: recovery {rec.get('recovery_s')} s (target {rec.get('target_s')} s), truth "
              f"{rec.get('truth_s')} s, error {rec.get('error_of_target', float('nan')):.2%} of the target"
              f"{'' if rec['verdict'] == 'pass' else ' — ' + str(rec.get('reason', ''))[:300]}")
    if not recs:
        print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)
    return 0


def _pending_count(http: requests.Session, url: str) -> int:
    resp = http.get(f"{url}/api/v1/pods", params={"fieldSelector": "status.phase=Pending"}, timeout=120)
    return len(resp.json()["items"])


def _minimal_drill(tmp: Path, scale: float | None) -> float:
    with start_twin(tmp / "minimal-state", profile="minimal", scale=scale, timeout=120) as twin:
        _settle(requests.Session(), twin, 120)
        return _drill(twin.state_dir, tmp)


def _settle(http: requests.Session, twin, timeout_s: float) -> float:
    """Wall time (perf_counter) when every training job has started, every Deployment is all Ready and no pod
    is Pending any more (the DaemonSets' pods on every node have started too)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        truth = http.get(twin.info["truth"], timeout=30).json()
        jobs = truth["training"].values()
        deps = truth["inference"].values()
        if jobs and deps and all("job_started" in j.get("last", {}) for j in jobs) \
                and all(d.get("all_ready") for d in deps) and not _pending(http, twin.url):
            return time.perf_counter()
        time.sleep(0.2)
    raise SystemExit(f"the workloads did not settle within {timeout_s:.0f} s")


def _pending(http: requests.Session, url: str) -> bool:
    resp = http.get(f"{url}/api/v1/pods", params={"fieldSelector": "status.phase=Pending", "limit": 1}, timeout=60)
    return bool(resp.json()["items"])


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return -1


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the drill's `drills run`)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> float:
    """The 1-minute load average: the figures above mean little without it on a shared machine."""
    return round(os.getloadavg()[0], 2)


def _cpu_percent(pid: int, seconds: float) -> float:
    c0, t0 = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (_cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def _get(http: requests.Session, url: str, headers: dict | None = None, params: dict | None = None) -> dict | None:
    resp = http.get(url, headers=headers, params=params, timeout=60)
    resp.raise_for_status()
    return resp.content  # the whole body read


def _chunks(http: requests.Session, url: str, limit: int, rounds: int) -> tuple[float, float]:
    """p50/p99 of single chunk requests, walking the whole list `rounds` times (at most 200 chunks timed)."""
    samples: list[float] = []
    for _ in range(rounds):
        token = ""
        while len(samples) < 200:
            t0 = time.perf_counter()
            resp = http.get(url, params={"limit": limit, **({"continue": token} if token else {})}, timeout=60)
            resp.raise_for_status()
            token = resp.json()["metadata"].get("continue", "")
            samples.append(time.perf_counter() - t0)
            if not token:
                break
    return _quantiles(samples)


def _time(fn, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return _quantiles(samples)


def _quantiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="large")
    p.add_argument("--nodes", type=int, default=0, help="the minimal profile plus idle 8-GPU nodes up to this many")
    p.add_argument("--pods", type=int, default=0, help="filler pods on the fleet up to this many pods in all")
    p.add_argument("--drill", action="store_true", help="time one node-loss drill here and on a minimal twin")
    p.add_argument("--drill-starting", action="store_true",
                   help="only: one node-loss drill as soon as the job steps, while the fleet's pods still start")
    p.add_argument("--detection", action="store_true",
                   help="with --drill-starting: judge detection as the profile says (default: DRILLS_MONITORING=off)")
    p.add_argument("--scale", type=float, default=None, help="twin seconds per wall second (default: the profile's)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--idle-s", type=float, default=10.0)
    p.add_argument("--settle-timeout-s", type=float, default=600.0)
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
