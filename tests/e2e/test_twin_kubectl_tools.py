"""The twin through kubectl's operator tools: `top` (metrics.k8s.io), `exec` into a simulated container,
`explain` (OpenAPI), `get -w` of a pod terminating — what a newcomer types while a drill runs."""

from __future__ import annotations

import queue
import re
import shutil
import threading
from pathlib import Path

import pytest
import requests

from drills.twin.controllers.nodeutil import parse_quantity
from drills.twin.workloads.accept_tools import nvidia_smi_list
from tests.e2e.test_twin_kubectl import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")]

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"
SYSTEM_CPU_M, SYSTEM_MEMORY_MI = 250, 2048  # what the twin's kubelet and runtime use on every node (metrics.py)


@pytest.fixture
def twin(twin_factory):
    return twin_factory()


@pytest.fixture
def kubectl(twin, tmp_path) -> Kubectl:
    return Kubectl(twin, tmp_path / "kube-cache")


def settled(kubectl: Kubectl) -> None:
    """Wait (on the twin's watches, through kubectl) until every DaemonSet is rolled out and the seeded
    workloads run: from then on no pod comes or goes on a healthy twin."""
    listing = "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"
    for ds in kubectl("get", "daemonsets", "-A", "-o", listing).split():
        ns, name = ds.split("/")
        kubectl("rollout", "status", f"daemonset/{name}", "-n", ns, "--timeout=300s", timeout=320)
    kubectl("rollout", "status", "deployment/llama-7b-infer", "-n", "ai-platform", "--timeout=300s", timeout=320)
    for worker in ("llm-finetune-8b-worker-0", "llm-finetune-8b-worker-1"):
        kubectl("wait", "--for=create", f"pod/{worker}", "-n", "ai-platform", "--timeout=300s", timeout=320)
        kubectl("wait", "--for=condition=Ready", f"pod/{worker}", "-n", "ai-platform", "--timeout=300s", timeout=320)


def test_top_nodes_shows_what_each_node_runs(twin, kubectl):
    settled(kubectl)
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


def test_exec_nvidia_smi_lists_the_gpus_the_container_was_given(twin, kubectl):
    settled(kubectl)
    real = (REAL / "nvidia-smi-L-2x-a100.txt").read_text().splitlines()[1:]  # the shape every line must have
    listed = kubectl("exec", "-n", "ai-platform", "llm-finetune-8b-worker-0", "--", "nvidia-smi", "-L").splitlines()
    assert len(listed) == 8  # the worker asks for nvidia.com/gpu: 8
    assert [_shape(line) for line in listed] == [_shape(real[0])] * 8
    assert [line.split(":")[0] for line in listed] == [f"GPU {i}" for i in range(8)]
    assert all(" NVIDIA H100 80GB HBM3 (UUID: " in line for line in listed)  # the node's GPU product
    assert len({line.rsplit("UUID: ", 1)[1] for line in listed}) == 8
    node = kubectl("get", "pod", "-n", "ai-platform", "llm-finetune-8b-worker-0", "-o", "jsonpath={.spec.nodeName}")
    # the same GPUs as the acceptance tools print for that node
    assert listed == nvidia_smi_list(node, "NVIDIA H100 80GB HBM3", 8)

    daemon = kubectl("get", "pods", "-n", "gpu-operator", "-o", "name").split()[0]  # asks for no GPU
    none = kubectl.run("exec", "-n", "gpu-operator", daemon, "--", "nvidia-smi", "-L", check=False)
    assert none.stdout == "No devices were found\n" and none.returncode == 6
    assert "command terminated with exit code 6" in none.stderr


def test_exec_answers_env_and_refuses_what_is_not_on_the_image(kubectl):
    settled(kubectl)
    env = dict(line.split("=", 1) for line in kubectl("exec", "-n", "ai-platform", "llm-finetune-8b-worker-0", "--",
                                                      "env").splitlines())
    assert env["HOSTNAME"] == "llm-finetune-8b-worker-0" and env["KUBERNETES_SERVICE_PORT"] == "443"
    missing = kubectl.run("exec", "-n", "ai-platform", "llm-finetune-8b-worker-0", "--", "bash", check=False)
    assert missing.returncode == 1
    assert 'exec: "bash": executable file not found in $PATH' in missing.stderr


def _shape(line: str) -> str:
    """`GPU n: <name> (UUID: GPU-8-4-4-4-12)` with the varying parts blanked."""
    return re.sub(r"GPU \d+: .+ \(UUID: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\)$",
                  "GPU n: NAME (UUID: GPU-uuid)", line)


def test_explain_pod_reads_the_served_openapi(kubectl):
    pod = kubectl("explain", "pod")
    assert pod.startswith("KIND:       Pod\nVERSION:    v1\n")
    assert "Pod is a collection of containers that can run on a host." in pod
    assert "  spec\t<PodSpec>" in pod and "  apiVersion\t<string>" in pod
    ports = kubectl("explain", "pod.spec.containers.ports")
    assert "FIELD: ports <[]ContainerPort>" in ports
    assert "  containerPort\t<integer> -required-" in ports
    deploy = kubectl("explain", "deployments.spec.replicas", "--api-version=apps/v1")
    assert "FIELD: replicas <integer>" in deploy
    unknown = kubectl.run("explain", "pod.spec.nope", check=False)
    assert unknown.returncode != 0 and 'field "nope" does not exist' in unknown.stderr


def test_get_pods_watch_shows_a_deleted_pod_terminating_for_its_grace_period(kubectl):
    kubectl.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: grace-watch\n")
    kubectl.apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: slow-stop\n  namespace: grace-watch\n"
                  "  annotations: {twin.gpu-drills.io/stop-s: \"100000\"}\n"  # ignores SIGTERM: killed at the end
                  "spec:\n  nodeName: gpu-infer-01\n  terminationGracePeriodSeconds: 120\n"
                  "  containers:\n  - name: main\n    image: vllm/vllm-openai:v0.6.3\n")
    kubectl("wait", "--for=condition=Ready", "pod/slow-stop", "-n", "grace-watch", "--timeout=300s", timeout=320)
    watch = kubectl.popen("get", "pods", "-n", "grace-watch", "-w", "--output-watch-events")
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in watch.stdout], daemon=True).start()
    try:
        assert lines.get(timeout=60).split()[:4] == ["EVENT", "NAME", "READY", "STATUS"]
        assert lines.get(timeout=60).split()[:4] == ["ADDED", "slow-stop", "1/1", "Running"]
        kubectl("delete", "pod", "slow-stop", "-n", "grace-watch", "--wait=false")
        after = [lines.get(timeout=60).split()]
        while after[-1][0] != "DELETED":  # SIGKILLed when its grace period ends (it ignores SIGTERM)
            after.append(lines.get(timeout=120).split())
        assert [line[:2] + line[3:4] for line in after] == [
            ["MODIFIED", "slow-stop", "Terminating"]] * (len(after) - 1) + [["DELETED", "slow-stop", "Terminating"]]
        assert len(after) >= 2
    finally:
        watch.kill()
        watch.communicate()
