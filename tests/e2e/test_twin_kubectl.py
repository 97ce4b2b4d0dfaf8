"""The twin through the real kubectl: what an operator types during a drill."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from drills.twin.launcher import TwinHandle, start_twin

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH"),
]

NS = "drill"
# pods bound to node names the twin does not have: no kubelet touches them, so they stay as the test made them
GHOST_A, GHOST_B = "ghost-node-a", "ghost-node-b"

VCJOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: llm-pretrain
  namespace: drill
spec:
  minAvailable: {min_available}
  schedulerName: volcano
  queue: training
  maxRetry: 3
  policies:
  - event: PodEvicted
    action: RestartJob
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: trainer
          image: registry.local/trainer:1
          resources:
            limits:
              nvidia.com/gpu: 8
"""


class Kubectl:
    """kubectl against one twin, with its own discovery cache (nothing shared with the user's ~/.kube)."""

    def __init__(self, handle: TwinHandle, cache: Path):
        self.env = dict(os.environ, KUBECONFIG=handle.kubeconfig)
        self.cache = str(cache)

    def run(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
            ) -> subprocess.CompletedProcess:
        proc = subprocess.run(["kubectl", "--cache-dir", self.cache, *args], input=input, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def __call__(self, *args: str, **kw) -> str:
        return self.run(*args, **kw).stdout

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(["kubectl", "--cache-dir", self.cache, *args], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def apply(self, manifest: str) -> str:
        return self("apply", "-f", "-", input=manifest)


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory) -> Kubectl:
    handle = start_twin(tmp_path_factory.mktemp("twin-kubectl"), profile="minimal")
    try:
        k = Kubectl(handle, tmp_path_factory.mktemp("kube-cache"))
        k.url = handle.url  # type: ignore[attr-defined]
        k("create", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n")
        yield k
    finally:
        handle.stop()


def _pod(name: str, node: str, labels: str = "app: web", owner: str = "", volumes: str = "",
         containers: tuple[str, ...] = ("main",), finalizers: str = "") -> str:
    body = "".join(f"  - name: {c}\n    image: busybox\n" for c in containers)
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {NS}\n  labels: {{{labels}}}\n"
            f"{owner}{finalizers}spec:\n  nodeName: {node}\n  containers:\n{body}{volumes}")


def _make_ready(kubectl: Kubectl, *pods: str) -> None:
    patch = ('{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},'
             '{"type":"ContainersReady","status":"True"}]}}')
    for pod in pods:
        kubectl("-n", NS, "patch", "pod", pod, "--subresource=status", "--type=merge", "-p", patch)


def _owned_by(kubectl: Kubectl, kind: str, name: str, api_version: str = "apps/v1") -> str:
    uid = kubectl("-n", NS, "get", kind.lower(), name, "-o", "jsonpath={.metadata.uid}")
    return (f"  ownerReferences:\n  - apiVersion: {api_version}\n    kind: {kind}\n    name: {name}\n"
            f"    uid: {uid}\n    controller: true\n")


def test_api_resources_resolves_short_names(kubectl):
    out = kubectl("api-resources")
    # nodes and pods are also served by metrics.k8s.io (without short names), listed after the core group
    rows = {line.split()[0]: line.split() for line in reversed(out.splitlines()[1:])}
    assert "no" in rows["nodes"][1] and "po" in rows["pods"][1]
    assert any(line.split()[:4] == ["nodes", "metrics.k8s.io/v1beta1", "false", "NodeMetrics"]
               for line in out.splitlines())
    assert "pdb" in rows["poddisruptionbudgets"][1]
    assert any("vcjob" in line and "batch.volcano.sh/v1alpha1" in line for line in out.splitlines())
    assert kubectl("get", "no", "-o", "name").count("node/") == 8  # 6 GPU nodes and the 2 of the system pool


def test_get_nodes_shows_gpu_columns(kubectl):
    lines = kubectl("get", "nodes").splitlines()
    header = lines[0].split()
    assert header[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert "GPU" in header and "GPU-MODEL" in header
    train = next(line.split() for line in lines if line.startswith("gpu-train-01"))
    assert train[1] == "Ready"
    assert train[header.index("GPU")] == "8/8"
    assert train[header.index("GPU-MODEL")] == "NVIDIA-H100-80GB-HBM3"


def test_get_pods_all_namespaces_wide_labels_and_field_selectors(kubectl):
    kubectl.apply(_pod("sel-a", GHOST_A, labels="app: sel, tier: a"))
    kubectl.apply(_pod("sel-b", GHOST_B, labels="app: sel, tier: b"))
    wide = kubectl("get", "pods", "-A", "-o", "wide").splitlines()
    header = wide[0].split()
    assert header[:2] == ["NAMESPACE", "NAME"] and "NODE" in header and "READY" in header
    row = next(line.split() for line in wide if " sel-a " in f" {line} ")
    assert row[header.index("NODE")] == GHOST_A
    assert kubectl("-n", NS, "get", "pods", "-l", "app=sel,tier!=a", "-o", "name").split() == ["pod/sel-b"]
    assert kubectl("-n", NS, "get", "po", "-l", "tier in (a,b)", "-o", "name").split() == ["pod/sel-a", "pod/sel-b"]
    assert kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={GHOST_B}", "-o", "name"
                   ).split() == ["pod/sel-b"]
    assert "No resources found" in kubectl.run("-n", NS, "get", "pods", "-l", "app=none").stderr
    kubectl("-n", NS, "delete", "pod", "sel-a", "sel-b")


def test_cordon_and_uncordon(kubectl):
    assert "cordoned" in kubectl("cordon", "gpu-train-04")
    assert kubectl("get", "node", "gpu-train-04").splitlines()[1].split()[1] == "Ready,SchedulingDisabled"
    assert kubectl("get", "node", "gpu-train-04", "-o", "jsonpath={.spec.unschedulable}") == "true"
    assert "uncordoned" in kubectl("uncordon", "gpu-train-04")
    assert kubectl("get", "node", "gpu-train-04").splitlines()[1].split()[1] == "Ready"


def test_drain_evicts_but_a_pdb_blocks_it_with_a_clear_message(kubectl):
    node = "gpu-train-03"
    kubectl.apply(f"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web\n  namespace: {NS}\nspec:\n"
                  f"  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n"
                  f"      labels: {{app: web}}\n    spec:\n      nodeSelector: {{kubernetes.io/hostname: {node}}}\n"
                  f"      containers:\n      - {{name: main, image: busybox}}\n")  # its own pods: Pending (GPU taint)
    kubectl.apply(f"apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: {NS}\nspec:\n"
                  f"  selector:\n    matchLabels: {{app: agent}}\n  template:\n    metadata:\n"
                  f"      labels: {{app: agent}}\n    spec:\n      tolerations: [{{operator: Exists}}]\n"
                  f"      containers:\n      - {{name: main, image: busybox}}\n")
    owner = _owned_by(kubectl, "ReplicaSet", "web")
    scratch = "  volumes:\n  - name: scratch\n    emptyDir: {}\n"
    for name in ("web-1", "web-2"):
        kubectl.apply(_pod(name, node, owner=owner, volumes=scratch))
    # the DaemonSet controller runs its pod there (the agent tolerates every taint)
    agent = _until_output(kubectl, "-n", NS, "get", "pods", "-l", "app=agent", "--field-selector",
                          f"spec.nodeName={node}", "-o", "name")
    _make_ready(kubectl, "web-1", "web-2")
    kubectl.apply(f"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n  namespace: {NS}\n"
                  f"spec:\n  minAvailable: 2\n  selector:\n    matchLabels: {{app: web}}\n")

    blocked = kubectl.run("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2s",
                          check=False)
    assert blocked.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in blocked.stderr
    assert kubectl("-n", NS, "get", "pods", "-l", "app=web", "-o", "name").split() == ["pod/web-1", "pod/web-2"]

    kubectl("-n", NS, "patch", "pdb", "web", "--type=merge", "-p", '{"spec":{"minAvailable":0}}')
    drained = kubectl.run("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
    assert "evicted" in drained.stdout + drained.stderr and f"node/{node} drained" in drained.stdout
    assert kubectl("-n", NS, "get", "pods", "--field-selector", f"spec.nodeName={node}", "-o", "name").split() \
        == [agent]  # the DaemonSet pod stays, like on a real node
    assert "SchedulingDisabled" in kubectl("get", "node", node)
    kubectl("uncordon", node)
    kubectl("-n", NS, "delete", "pdb", "web")
    kubectl("-n", NS, "delete", "daemonset", "agent")


def _until_output(kubectl: Kubectl, *args: str, deadline_s: float = 30) -> str:
    deadline = time.monotonic() + deadline_s
    while not (out := kubectl(*args).strip()):
        assert time.monotonic() < deadline, f"kubectl {' '.join(args)} printed nothing"
        time.sleep(0.05)
    return out


def test_drain_refuses_unmanaged_pods_without_force(kubectl):
    kubectl.apply(_pod("bare", "gpu-train-02", labels="app: bare"))
    refused = kubectl.run("drain", "gpu-train-02", "--ignore-daemonsets", "--timeout=10s", check=False)
    assert refused.returncode != 0
    assert "cannot delete Pods that declare no controller (use --force to override)" in refused.stderr
    kubectl("drain", "gpu-train-02", "--ignore-daemonsets", "--force", "--timeout=30s")
    assert kubectl.run("-n", NS, "get", "pod", "bare", check=False).returncode != 0
    kubectl("uncordon", "gpu-train-02")


def test_delete_pod_and_wait_for_delete(kubectl):
    kubectl.apply(_pod("doomed", GHOST_A, labels="app: doomed"))
    assert 'pod "doomed" deleted' in kubectl("-n", NS, "delete", "pod", "doomed")
    missing = kubectl.run("-n", NS, "get", "pod", "doomed", check=False)
    assert missing.returncode != 0 and 'pods "doomed" not found' in missing.stderr

    # a finalizer keeps the pod until it is removed: `wait --for=delete` must see the deletion happen
    kubectl.apply(_pod("held", GHOST_A, labels="app: held", finalizers="  finalizers: [drills/hold]\n"))
    kubectl("-n", NS, "delete", "pod", "held", "--wait=false")
    assert kubectl("-n", NS, "get", "pod", "held", "-o", "jsonpath={.metadata.deletionTimestamp}")
    waiter = kubectl.popen("-n", NS, "wait", "--for=delete", "pod/held", "--timeout=60s")
    try:
        _until_watched(kubectl.url, "pods", NS, "metadata.name=held")
        kubectl("-n", NS, "patch", "pod", "held", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    assert "pod/held condition met" in out


def _until_watched(url: str, resource: str, namespace: str, field_selector: str, deadline_s: float = 30) -> None:
    """Block until kubectl holds a watch on that one object (the twin's controllers always hold watches of
    their own, so "any watch is open" proves nothing); kubectl resumes it from the resourceVersion it listed."""
    import requests

    def kubectl_watching() -> bool:
        watchers = requests.get(f"{url}/twin/v1/stats", timeout=5).json()["watchers"]
        return any(w["userAgent"].startswith("kubectl") and w["resource"] == resource and w["namespace"] == namespace
                   and w["fieldSelector"] == field_selector for w in watchers)

    deadline = time.monotonic() + deadline_s
    while not kubectl_watching():
        assert time.monotonic() < deadline, "kubectl never started watching"
        time.sleep(0.05)


def test_logs(kubectl):
    import requests

    kubectl.apply(_pod("trainer", GHOST_A, labels="app: trainer", containers=("main", "sidecar")))
    lines = ["NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE", "step 100 loss 2.10", "step 200 loss 1.90"]
    resp = requests.post(f"{kubectl.url}/twin/v1/namespaces/{NS}/pods/trainer/log", params={"container": "main"},
                         data="\n".join(lines) + "\n", timeout=5)
    assert resp.json() == {"appended": 3}
    assert kubectl("-n", NS, "logs", "trainer", "-c", "main").splitlines() == lines
    assert kubectl("-n", NS, "logs", "trainer", "-c", "main", "--tail=1").splitlines() == lines[-1:]
    stamped = kubectl("-n", NS, "logs", "trainer", "-c", "main", "--timestamps").splitlines()
    assert stamped[0].endswith(" " + lines[0]) and stamped[0][:2] == "20"
    # no -c on a two-container pod: kubectl picks the first container, as on a real cluster
    assert kubectl("-n", NS, "logs", "trainer").splitlines() == lines
    kubectl("-n", NS, "delete", "pod", "trainer")


def test_apply_and_get_volcano_job(kubectl):
    def rv() -> str:  # the spec's version: the Volcano controller's status writes (its pods starting) bump the
        # resourceVersion at any moment, and on a loaded machine between two reads (seen with 4 test workers)
        return kubectl("-n", NS, "get", "vcjob", "llm-pretrain", "-o", "jsonpath={.metadata.generation}")

    assert "job.batch.volcano.sh/llm-pretrain created" in kubectl.apply(VCJOB.format(min_available=2))
    first = rv()
    # the same manifest again: like Volcano's webhook the twin defaults tasks[].minAvailable, so kubectl may
    # send a patch ("configured"), but the object does not change
    assert "job.batch.volcano.sh/llm-pretrain" in kubectl.apply(VCJOB.format(min_available=2))
    assert rv() == first
    assert "job.batch.volcano.sh/llm-pretrain configured" in kubectl.apply(VCJOB.format(min_available=1))
    assert int(rv()) > int(first)
    assert kubectl("-n", NS, "get", "vcjob", "llm-pretrain", "-o", "jsonpath={.spec.minAvailable}") == "1"
    lines = kubectl("-n", NS, "get", "vcjob").splitlines()
    assert lines[0].split()[0] == "NAME" and lines[1].split()[0] == "llm-pretrain"
    assert "MINAVAILABLE" in lines[0].replace(" ", "") or "MIN" in lines[0]
    assert kubectl("get", "vcjob", "-A", "-o", "name").count("job.batch.volcano.sh/") >= 1
    kubectl("-n", NS, "delete", "vcjob", "llm-pretrain")


def test_create_deployment_sends_protobuf_and_the_twin_reads_all_of_it(kubectl):
    """`kubectl create deployment` posts a protobuf body (issue 34): the Deployment stored is the one asked for,
    as a real API server stores it (no empty fields, the defaults filled); a field the twin cannot read would be
    refused, never dropped."""
    out = kubectl("-n", NS, "create", "deployment", "pb-web", "--image=nginx:1.27", "--replicas=3", "--port=8080",
                  "--", "nginx", "-g", "daemon off;")
    assert "deployment.apps/pb-web created" in out
    spec = json.loads(kubectl("-n", NS, "get", "deployment", "pb-web", "-o", "json"))["spec"]
    container = spec["template"]["spec"]["containers"][0]
    assert spec["replicas"] == 3 and spec["selector"] == {"matchLabels": {"app": "pb-web"}}
    assert spec["template"]["metadata"] == {"labels": {"app": "pb-web"}}
    assert (container["name"], container["image"], container["command"]) == \
        ("nginx", "nginx:1.27", ["nginx", "-g", "daemon off;"])
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    zero = kubectl("-n", NS, "create", "deployment", "pb-zero", "--image=nginx:1.27", "--replicas=0")
    assert "created" in zero and kubectl("-n", NS, "get", "deployment", "pb-zero",
                                         "-o", "jsonpath={.spec.replicas}") == "0"
