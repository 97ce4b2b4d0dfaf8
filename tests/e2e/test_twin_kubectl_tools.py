"""The twin through kubectl's operator tools: `top` (metrics.k8s.io), `exec` into a simulated container,
`explain` (OpenAPI) — what a newcomer types while a drill runs."""

from __future__ import annotations

import shutil

import pytest
import requests

from drills.twin.controllers.nodeutil import parse_quantity
from tests.e2e.test_twin_kubectl import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")]

SYSTEM_CPU_M, SYSTEM_MEMORY_MI = 250, 2048  # what the twin's kubelet and runtime use on every node (metrics.py)


@pytest.fixture
def twin(twin_factory):
    return twin_factory()


@pytest.fixture
def kubectl(twin, tmp_path) -> Kubectl:
    return Kubectl(twin, tmp_path / "kube-cache")


def test_top_nodes_shows_what_each_node_runs(twin, kubectl):
    pods = requests.get(f"{twin.url}/api/v1/pods", params={"fieldSelector": "status.phase=Running"},
                        timeout=10).json()["items"]
    asked: dict[str, list[float]] = {}
    for pod in pods:
        total = asked.setdefault(pod["spec"]["nodeName"], [0.0, 0.0])
        for container in pod["spec"]["containers"]:
            requests_ = (container.get("resources") or {}).get("requests") or {}
            total[0] += parse_quantity(requests_.get("cpu", "5m"))
            total[1] += parse_quantity(requests_.get("memory", "16Mi"))
    lines = kubectl("top", "nodes").splitlines()
    assert lines[0].split() == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    rows = {cells[0]: cells[1:] for cells in (line.split() for line in lines[1:])}
    nodes = requests.get(f"{twin.url}/api/v1/nodes", timeout=10).json()["items"]
    assert set(rows) == {n["metadata"]["name"] for n in nodes}
    for name, (cpu, cpu_pct, memory, memory_pct) in rows.items():
        want_cpu, want_memory = asked.get(name, [0.0, 0.0])
        assert cpu == f"{round(want_cpu * 1000) + SYSTEM_CPU_M}m", name
        assert memory == f"{round(want_memory / 2**20) + SYSTEM_MEMORY_MI}Mi", name
    trainer = next(p for p in pods if p["metadata"]["name"] == "llm-finetune-8b-worker-0")
    busy, idle = rows[trainer["spec"]["nodeName"]], min(rows.values(), key=lambda r: int(r[0][:-1]))
    assert int(busy[1].rstrip("%")) > int(idle[1].rstrip("%"))  # a training node is busier than an idle one

    top_pods = kubectl("top", "pods", "-n", "ai-platform", "llm-finetune-8b-worker-0").splitlines()
    assert top_pods[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    cpu = sum(parse_quantity(c["resources"]["requests"]["cpu"]) for c in trainer["spec"]["containers"])
    assert top_pods[1].split()[:2] == ["llm-finetune-8b-worker-0", f"{round(cpu * 1000)}m"]
