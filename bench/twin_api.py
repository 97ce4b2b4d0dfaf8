"""Benchmark of the twin's API server at cluster scale (a benchmark, not a test: prints figures).

Loads 1,024 GPU nodes and 5,000 pods into a fresh `minimal` twin, then measures p50/p99 of
list nodes, list pods by field selector (spec.nodeName=…), and `kubectl get nodes` wall time, once no pod is
Pending (the GPU DaemonSets start a pod on every new GPU node).

    .venv/bin/python bench/twin_api.py [--nodes 1024] [--pods 5000] [--rounds 50] [--against TREE]

`--against TREE` also starts the twin of another source tree (`git worktree add /tmp/twin-58e4671 58e4671`), loads
it the same way and alternates every operation's rounds between the two twins, so both columns share the machine's
load; the figures in the notes compare this tree with the first twin that way.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drills.twin.launcher import start_twin  # noqa: E402

__all__ = ["main"]

log = logging.getLogger(__name__)

NS = "bench"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    nodes = [f"bench-gpu-{i:04d}" for i in range(args.nodes)]
    with tempfile.TemporaryDirectory(prefix="twin-bench-") as tmp, start_twin(Path(tmp) / "state") as twin:
        twins = {"this tree": (twin.url, twin.kubeconfig)}
        other = _start_other(Path(args.against).resolve(), Path(tmp) / "other") if args.against else None
        try:
            if other is not None:
                twins[f"{args.against}"] = other[1:]
            http = requests.Session()
            for i, (label, (base, _)) in enumerate(twins.items()):
                # another tree's twin may run nothing (the first one left every pod Pending): wait less for it
                _prepare(http, base, nodes, args, label, args.settle_timeout_s if i == 0 else 20.0)
            # the bench's own heap (the objects it built to load) out of its collector's sight: the figures are the
            # twin's and the client's decoding, not this process's full collections (70 ms each at this size)
            gc.collect()
            gc.freeze()
            figures = _measure({label: _operations(http, base, kubeconfig, nodes, Path(tmp) / f"kube-cache-{i}")
                                for i, (label, (base, kubeconfig)) in enumerate(twins.items())}, args)
        finally:
            if other is not None:
                other[0].terminate()
                other[0].wait(30)
    labels = list(twins)
    print(f"{'operation (ms)':34} {'n':>4} " + " ".join(f"{'p50 ' + _short(lb):>15} {'p99 ' + _short(lb):>15}"
                                                        for lb in labels))
    for name, per_twin in figures.items():
        cells = " ".join(f"{_percentile(per_twin[lb], 50) * 1000:>15.1f} {_percentile(per_twin[lb], 99) * 1000:>15.1f}"
                         for lb in labels)
        print(f"{name:34} {len(per_twin[labels[0]]):>4} {cells}")
    return 0


def _prepare(http: requests.Session, base: str, nodes: list[str], args: argparse.Namespace, label: str,
             settle_timeout_s: float) -> None:
    """Load the bench's nodes and pods into one twin and wait until its controllers have settled."""
    template = http.get(f"{base}/api/v1/nodes/gpu-train-01", timeout=30).json()
    http.post(f"{base}/api/v1/namespaces", json={"metadata": {"name": NS}}, timeout=30).raise_for_status()
    t0 = time.perf_counter()
    _load(http, base, [_node(template, name, i) for i, name in enumerate(nodes)])
    t_nodes = time.perf_counter() - t0
    t0 = time.perf_counter()
    _load(http, base, [_pod(f"train-{i:05d}", nodes[i % len(nodes)]) for i in range(args.pods)])
    t_pods = time.perf_counter() - t0
    t_create = _concurrent_creates(base, 200)
    print(f"[{label}] loaded {args.nodes} nodes in {t_nodes:.2f}s and {args.pods} pods in {t_pods:.2f}s "
          f"(bulk /twin/v1/load); 200 concurrent single pod creates: {t_create:.2f}s")
    # The GPU DaemonSets (device plugin, DCGM exporter, network agent) start a pod on every new GPU node:
    # measure the settled cluster, not its controllers' start-up work
    settled = _settle(http, base, settle_timeout_s)
    print(f"[{label}] settled (no pod Pending) after {settled:.1f}s" if settled is not None
          else f"[{label}] not settled after {settle_timeout_s:.0f}s: measuring anyway")
    sizes = {what: len(http.get(f"{base}/api/v1/{what}", timeout=120).content) for what in ("nodes", "pods")}
    stats = http.get(f"{base}/twin/v1/stats", timeout=30).json()
    count = stats["objects"]
    print(f"[{label}] objects: {count['nodes']} nodes, {count['pods']} pods, open watches {stats['watches']}; "
          f"a full list is {sizes['nodes'] / 1e6:.1f} MB of nodes ({sizes['nodes'] / count['nodes']:.0f} B each), "
          f"{sizes['pods'] / 1e6:.1f} MB of pods ({sizes['pods'] / count['pods']:.0f} B each)")


def _operations(http: requests.Session, base: str, kubeconfig: str, nodes: list[str],
                cache: Path) -> dict[str, tuple[Callable[[], None], int]]:
    """name -> (one timed call, rounds per twin as a multiple of --rounds / 10)."""
    ops: dict[str, tuple[Callable[[], None], int]] = {
        "list nodes (all, JSON)": (lambda: _get(http, f"{base}/api/v1/nodes"), 10),
        # the server's part alone: the bytes, without the client's JSON decode (which grows with each object's
        # fidelity: managedFields, container states, the DaemonSet pods' specs)
        "list nodes (all, bytes only)": (lambda: _get(http, f"{base}/api/v1/nodes", decode=False), 10),
        "list pods by field selector": (lambda: _get(
            http, f"{base}/api/v1/pods", fieldSelector=f"spec.nodeName={random.choice(nodes)}"), 40),
        "list pods (all, JSON)": (lambda: _get(http, f"{base}/api/v1/pods"), 2),
        "list pods (all, bytes only)": (lambda: _get(http, f"{base}/api/v1/pods", decode=False), 2),
        # the bench's own 5,200 pods: the same objects, byte for byte, in any twin that stores them (the list above
        # also holds what the twin runs besides: the GPU DaemonSets' pods on every node)
        "list pods of the bench namespace": (lambda: _get(http, f"{base}/api/v1/namespaces/{NS}/pods"), 2),
        "list nodes as Table": (lambda: _get(http, f"{base}/api/v1/nodes", headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}), 2),
    }
    if shutil.which("kubectl"):
        env = dict(os.environ, KUBECONFIG=kubeconfig)
        cmd = ["kubectl", "--cache-dir", str(cache), "get", "nodes"]
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the discovery cache
        ops["kubectl get nodes (wall)"] = (lambda: subprocess.run(cmd, env=env, capture_output=True, check=True), 2)
    return ops


def _measure(per_twin: dict[str, dict[str, tuple[Callable[[], None], int]]],
             args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Each operation's samples per twin; with two twins, their rounds alternate (the machine's load is shared)."""
    figures: dict[str, dict[str, list[float]]] = {}
    first = next(iter(per_twin.values()))
    for name, (_, weight) in first.items():
        rounds = max(args.rounds * weight // 10, 5)
        if name.startswith("kubectl"):
            rounds = args.kubectl_rounds
        samples: dict[str, list[float]] = {label: [] for label in per_twin}
        for _ in range(rounds):
            for label, ops in per_twin.items():
                if name in ops:
                    samples[label] += _time(ops[name][0], 1)
        figures[name] = {label: got for label, got in samples.items() if got}
    return figures


def _start_other(tree: Path, state: Path) -> tuple[subprocess.Popen, str, str]:
    """A twin from another source tree (e.g. `git worktree add /tmp/old 58e4671`): same command, its own code."""
    state.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "drills.cli", "twin", "up", "--profile", "minimal", "--port", "0",
                             "--state-dir", str(state)], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(state / "stderr.log", "wb"), start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = state / "twin.json"
        if info.exists() and proc.poll() is None:
            try:
                doc = json.loads(info.read_text())
                return proc, doc["url"], str(state / "kubeconfig")
            except (ValueError, KeyError):
                pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the twin of {tree} did not start: see {state / 'stderr.log'}")


def _short(label: str) -> str:
    return label if len(label) <= 10 else "…" + label[-9:]


def _settle(http: requests.Session, base: str, timeout_s: float) -> float | None:
    """Seconds until no pod is Pending (None at the timeout)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        pending = http.get(f"{base}/api/v1/pods", params={"fieldSelector": "status.phase=Pending", "limit": 1},
                           timeout=60).json().get("items")
        if not pending:
            return time.perf_counter() - t0
        time.sleep(0.5)
    return None


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--kubectl-rounds", type=int, default=10)
    parser.add_argument("--settle-timeout-s", type=float, default=300.0)
    parser.add_argument("--against", metavar="TREE", help="also measure the twin of another source tree (a git "
                        "worktree of an older commit), rounds alternating with this tree's")
    return parser.parse_args(argv)


def _node(template: dict, name: str, i: int) -> dict:
    node = copy.deepcopy(template)
    meta = node["metadata"]
    node["metadata"] = {"name": name, "labels": dict(meta.get("labels", {}), **{"kubernetes.io/hostname": name}),
                        "annotations": meta.get("annotations", {})}
    node["spec"].pop("podCIDR", None)
    node["spec"].pop("podCIDRs", None)
    node["spec"]["providerID"] = f"twin://bench/{name}"
    node["status"]["addresses"] = [{"type": "InternalIP", "address": f"10.{64 + i // 250}.{i % 250}.10"},
                                   {"type": "Hostname", "address": name}]
    return node


def _pod(name: str, node: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "bench", "node": node}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.local/trainer:1",
                                                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _load(http: requests.Session, base: str, objs: list[dict], batch: int = 500) -> None:
    for i in range(0, len(objs), batch):
        http.post(f"{base}/twin/v1/load", data=json.dumps({"items": objs[i:i + batch]}),
                  timeout=120).raise_for_status()


def _concurrent_creates(base: str, count: int) -> float:
    def create(i: int) -> None:
        pod = _pod(f"single-{i:04d}", "bench-gpu-0000")
        requests.post(f"{base}/api/v1/namespaces/{NS}/pods", json=pod, timeout=60).raise_for_status()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(count)))
    return time.perf_counter() - t0


def _get(http: requests.Session, url: str, headers: dict | None = None, decode: bool = True, **params) -> None:
    resp = http.get(url, params=params, headers=headers, timeout=120)
    resp.raise_for_status()
    if decode:
        resp.json()


def _time(fn, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def _percentile(samples: list[float], pct: float) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[min(int(pct), 99) - 1]


if __name__ == "__main__":
    sys.exit(main())
