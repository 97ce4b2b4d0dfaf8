"""Benchmark of the twin's API server at cluster scale (a benchmark, not a test: prints figures).

Loads 1,024 GPU nodes and 5,000 pods into a fresh `minimal` twin, then measures p50/p99 of
list nodes, list pods by field selector (spec.nodeName=…), and `kubectl get nodes` wall time, once no pod is
Pending (the GPU DaemonSets start a pod on every new GPU node).

    .venv/bin/python bench/twin_api.py [--nodes 1024] [--pods 5000] [--rounds 50]
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
    with tempfile.TemporaryDirectory(prefix="twin-bench-") as tmp, start_twin(Path(tmp) / "state") as twin:
        http = requests.Session()
        base = twin.url
        template = http.get(f"{base}/api/v1/nodes/gpu-train-01", timeout=30).json()
        http.post(f"{base}/api/v1/namespaces", json={"metadata": {"name": NS}}, timeout=30).raise_for_status()

        t0 = time.perf_counter()
        nodes = [f"bench-gpu-{i:04d}" for i in range(args.nodes)]
        _load(http, base, [_node(template, name, i) for i, name in enumerate(nodes)])
        t_nodes = time.perf_counter() - t0
        t0 = time.perf_counter()
        _load(http, base, [_pod(f"train-{i:05d}", nodes[i % len(nodes)]) for i in range(args.pods)])
        t_pods = time.perf_counter() - t0
        t_create = _concurrent_creates(base, 200)
        print(f"loaded {args.nodes} nodes in {t_nodes:.2f}s and {args.pods} pods in {t_pods:.2f}s "
              f"(bulk /twin/v1/load); 200 concurrent single pod creates: {t_create:.2f}s")
        # The GPU DaemonSets (device plugin, DCGM exporter, network agent) start a pod on every new GPU node:
        # measure the settled cluster, not its controllers' start-up work
        settled = _settle(http, base, args.settle_timeout_s)
        print(f"settled (no pod Pending) after {settled:.1f}s" if settled is not None
              else f"not settled after {args.settle_timeout_s:.0f}s: measuring anyway")

        sizes = {what: len(http.get(f"{base}/api/v1/{what}", timeout=120).content) for what in ("nodes", "pods")}
        # the bench's own heap (the objects it built to load) out of its collector's sight: the figures are the
        # twin's and the client's decoding, not this process's full collections (70 ms each at this size)
        gc.collect()
        gc.freeze()
        figures = {
            "list nodes (all, JSON)": _time(lambda: _get(http, f"{base}/api/v1/nodes"), args.rounds),
            # the server's part alone: the bytes, without the client's JSON decode (which grows with each object's
            # fidelity: managedFields, container states, the DaemonSet pods' specs)
            "list nodes (all, bytes only)": _time(lambda: _get(http, f"{base}/api/v1/nodes", decode=False), args.rounds),
            "list pods by field selector": _time(lambda: _get(
                http, f"{base}/api/v1/pods", fieldSelector=f"spec.nodeName={random.choice(nodes)}"), args.rounds * 4),
            "list pods (all, JSON)": _time(lambda: _get(http, f"{base}/api/v1/pods"), max(args.rounds // 5, 5)),
            "list pods (all, bytes only)": _time(lambda: _get(http, f"{base}/api/v1/pods", decode=False),
                                                 max(args.rounds // 5, 5)),
            "list nodes as Table": _time(lambda: _get(http, f"{base}/api/v1/nodes", headers={
                "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}), max(args.rounds // 5, 5)),
        }
        if shutil.which("kubectl"):
            env = dict(os.environ, KUBECONFIG=twin.kubeconfig)
            cache = Path(tmp) / "kube-cache"
            cmd = ["kubectl", "--cache-dir", str(cache), "get", "nodes"]
            subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the discovery cache
            figures["kubectl get nodes (wall)"] = _time(
                lambda: subprocess.run(cmd, env=env, capture_output=True, check=True), args.kubectl_rounds)
        stats = http.get(f"{base}/twin/v1/stats", timeout=30).json()
        print(f"objects: {stats['objects']['nodes']} nodes, {stats['objects']['pods']} pods, "
              f"open watches {stats['watches']}; a full list is {sizes['nodes'] / 1e6:.1f} MB of nodes "
              f"({sizes['nodes'] / stats['objects']['nodes']:.0f} B each), {sizes['pods'] / 1e6:.1f} MB of pods "
              f"({sizes['pods'] / stats['objects']['pods']:.0f} B each)")
        print(f"{'operation':34} {'n':>4} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
        for name, samples in figures.items():
            p50, p99 = _percentile(samples, 50), _percentile(samples, 99)
            print(f"{name:34} {len(samples):>4} {p50 * 1000:>9.1f} {p99 * 1000:>9.1f} {max(samples) * 1000:>9.1f}")
    return 0


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
