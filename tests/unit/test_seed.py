"""Seed objects: complete after defaulting (the kubernetes client parses them) and shaped like the
real cluster's (GPU labels, leaf topology, Volcano job fields, PDB)."""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes.client import ApiClient

from drills.twin.api.defaults import apply_defaults
from drills.twin.api.resources import by_kind
from drills.twin.profile import load_profile
from drills.twin.seed import LEAF_LABEL, seed_cluster, seed_objects, seed_workloads

NOW = "2026-01-02T03:04:05Z"
CLIENT_CLASS = {
    "Namespace": "V1Namespace", "Node": "V1Node", "Lease": "V1Lease", "PriorityClass": "V1PriorityClass",
    "Service": "V1Service", "Deployment": "V1Deployment", "PodDisruptionBudget": "V1PodDisruptionBudget",
}


@pytest.fixture(scope="module")
def minimal():
    return load_profile("minimal")


def _complete(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    rt = by_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None, f"{obj['apiVersion']} {obj['kind']} is not served"
    obj["metadata"].update(uid="u", creationTimestamp=NOW, resourceVersion="1")
    return apply_defaults(rt, obj, NOW)


def _parse(obj: dict, klass: str):
    return ApiClient().deserialize(json.dumps(obj), klass, "application/json")


def test_every_seed_object_is_served_defaulted_and_parses(minimal):
    objs = seed_objects(minimal, now=NOW)
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "Node", "Lease", "PriorityClass", "Queue", "Service", "Job", "Deployment",
            "PodDisruptionBudget"} <= kinds
    for obj in objs:
        done = _complete(obj)
        if done["kind"] in CLIENT_CLASS:
            parsed = _parse(done, CLIENT_CLASS[done["kind"]])
            assert parsed.metadata.name == obj["metadata"]["name"]
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(names) == len(set(names)), "seed objects must be unique"


def test_cluster_comes_before_workloads(minimal):
    assert seed_objects(minimal) == [*seed_cluster(minimal), *seed_workloads(minimal)]
    assert all(o["kind"] not in ("Job", "Deployment") for o in seed_cluster(minimal))


def test_nodes_carry_gpu_and_topology_labels(minimal):
    nodes = [o for o in seed_cluster(minimal, now=NOW) if o["kind"] == "Node"]
    assert len(nodes) == 8  # 6 GPU nodes and the system pool's 2 CPU nodes: no GPU label, no taint
    system = [n for n in nodes if n["metadata"]["labels"]["gpu-drills.io/role"] == "cpu"]
    assert [n["metadata"]["name"] for n in system] == ["cpu-system-01", "cpu-system-02"]
    assert not any("nvidia.com/gpu.present" in n["metadata"]["labels"] or n["spec"].get("taints")
                   or "nvidia.com/gpu" in n["status"]["capacity"] for n in system)
    training = [n for n in nodes if n["metadata"]["labels"]["gpu-drills.io/role"] == "training"]
    assert [n["metadata"]["name"] for n in training] == ["gpu-train-01", "gpu-train-02", "gpu-train-03", "gpu-train-04"]
    labels = training[0]["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8" and labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["kubernetes.io/hostname"] == "gpu-train-01" and "node-role.kubernetes.io/training" in labels
    assert [n["metadata"]["labels"][LEAF_LABEL] for n in training] == ["leaf-1", "leaf-2", "leaf-1", "leaf-2"]
    node = _parse(_complete(training[0]), "V1Node")
    assert node.status.capacity["nvidia.com/gpu"] == "8" and node.status.allocatable["nvidia.com/gpu"] == "8"
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert node.status.node_info.kubelet_version == minimal.kubernetes_version
    assert node.spec.taints[0].key == "nvidia.com/gpu"
    ips = [n["status"]["addresses"][0]["address"] for n in nodes]
    assert len(set(ips)) == len(ips)


def test_queues_priority_classes_and_leases(minimal):
    objs = seed_cluster(minimal, now=NOW)
    queues = {o["metadata"]["name"] for o in objs if o["kind"] == "Queue"}
    assert queues == {"training", "inference", "default"}
    values = {o["metadata"]["name"]: o["value"] for o in objs if o["kind"] == "PriorityClass"}
    assert values["training-low"] == 1000 and values["inference-high"] == 100000
    leases = [o for o in objs if o["kind"] == "Lease"]
    assert {o["metadata"]["namespace"] for o in leases} == {"kube-node-lease"} and len(leases) == 8
    assert _parse(_complete(leases[0]), "V1Lease").spec.renew_time is not None


def test_volcano_job_matches_the_profile(minimal):
    job = next(o for o in seed_workloads(minimal) if o["kind"] == "Job")
    spec = job["spec"]
    assert job["metadata"] == {"name": "llm-finetune-8b", "namespace": "ai-platform", "labels": {"app": "llm-finetune-8b"}}
    assert (spec["minAvailable"], spec["queue"], spec["maxRetry"]) == (2, "training", 3)
    assert {"event": "PodEvicted", "action": "RestartJob"} in spec["policies"]
    task = spec["tasks"][0]
    assert task["replicas"] == 2
    container = task["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1,mlx5_2,mlx5_3"} in container["env"]
    # a pod the job controller would create from the template is complete after defaulting
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llm-finetune-8b-worker-0", "namespace": "ai-platform"},
           "spec": copy.deepcopy(task["template"]["spec"])}
    parsed = _parse(_complete(pod), "V1Pod")
    assert parsed.spec.scheduler_name == "volcano" and parsed.spec.restart_policy == "Never"
    assert {t.key for t in parsed.spec.tolerations} >= {"nvidia.com/gpu", "node.kubernetes.io/not-ready"}


def test_inference_deployment_service_and_pdb(minimal):
    objs = {o["kind"]: o for o in seed_workloads(minimal)
            if o["kind"] != "Job" and o["metadata"]["namespace"] == "ai-platform"}  # kube-state-metrics is kube-system's
    dep = _parse(_complete(objs["Deployment"]), "V1Deployment")
    assert dep.spec.replicas == 2 and dep.spec.selector.match_labels == {"app": "llama-7b-infer"}
    assert dep.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    svc = _parse(_complete(objs["Service"]), "V1Service")
    assert svc.metadata.name == "llama-7b-infer" and svc.spec.ports[0].port == 8000
    assert _parse(_complete(objs["PodDisruptionBudget"]), "V1PodDisruptionBudget").spec.min_available == 1


def test_kube_state_metrics_runs_on_the_system_pool_only():
    dep = next(o for o in seed_workloads(load_profile("minimal")) if o["metadata"]["name"] == "kube-state-metrics")
    spec = dep["spec"]["template"]["spec"]
    assert dep["metadata"]["namespace"] == "kube-system" and not spec.get("tolerations")  # GPU nodes are tainted
    assert dep["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8080"
    assert not [o for o in seed_workloads(load_profile("large")) if o["metadata"]["name"] == "kube-state-metrics"]


def test_node_exporter_runs_mountstats_on_the_system_pool_unless_the_site_runs_its_defaults():
    def node_exporter(defects=()):
        [ds] = [o for o in seed_workloads(load_profile("minimal", list(defects))) if o["kind"] == "DaemonSet"
                and o["metadata"]["name"] == "node-exporter"]
        return ds["spec"]["template"]["spec"]

    spec = node_exporter()
    assert spec["nodeSelector"]["gpu-drills.io/role"] == "cpu" and not spec.get("tolerations")
    assert "--collector.mountstats" in spec["containers"][0]["args"]
    assert "--collector.mountstats" not in node_exporter(["node-exporter-defaults"])["containers"][0]["args"]
    assert "--collector.mountstats" in node_exporter()["containers"][0]["args"]  # the file itself is untouched


def test_no_pdb_defect_drops_the_pdb():
    kinds = [o["kind"] for o in seed_workloads(load_profile("minimal", ["no-pdb"]))]
    assert "PodDisruptionBudget" not in kinds and "Deployment" in kinds


def test_large_profile_seeds_1024_distinct_nodes():
    objs = seed_cluster(load_profile("large"))
    nodes = [o for o in objs if o["kind"] == "Node"]
    assert len(nodes) == 1024
    assert len({n["metadata"]["name"] for n in nodes}) == 1024
    assert len({n["spec"]["podCIDR"] for n in nodes}) == 1024
    assert len({n["status"]["addresses"][0]["address"] for n in nodes}) == 1024
