"""The objects a twin starts with, built from its profile: infrastructure first (namespaces, nodes,
leases, queues, priority classes), then workloads (the Volcano Job, Deployments, Services, PDBs)
that the controllers bring to life.

Objects carry what the real components would have written (kubelet labels, GPU feature discovery
labels, capacity with `nvidia.com/gpu`, nodeInfo from the profile); the API server's defaulting
(`drills.twin.api.defaults.apply_defaults`) completes the rest, timestamps included.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from pathlib import Path

from drills.core import datafiles
from drills.twin.api.rbac import DEFAULT_POLICY
from drills.twin.profile_model import InferenceDeployment, NodePool, NodeSpec, TrainingJob, TwinProfile

__all__ = [
    "seed_objects", "seed_cluster", "seed_workloads", "node_object", "training_job_object",
    "inference_objects", "LEAF_LABEL", "ROLE_LABEL", "POOL_LABEL",
]

log = logging.getLogger(__name__)

LEAF_LABEL = "network.gpu-drills.io/leaf"
ROLE_LABEL = "gpu-drills.io/role"
POOL_LABEL = "gpu-drills.io/pool"
SYSTEM_DAEMONSETS = Path(__file__).parent / "system" / "gpu-daemonsets.yaml"
SYSTEM_MONITORING = Path(__file__).parent / "system" / "monitoring.yaml"
_SYSTEM_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def seed_objects(profile: TwinProfile, now: str | None = None) -> list[dict]:
    """Everything the twin starts with: `seed_cluster` then `seed_workloads`."""
    return [*seed_cluster(profile, now), *seed_workloads(profile)]


def seed_cluster(profile: TwinProfile, now: str | None = None) -> list[dict]:
    """Infrastructure: namespaces, priority classes, queues, nodes and their Leases, the kubernetes Service.

    `now` (RFC 3339) stamps heartbeats; when None the server's defaulting stamps them on create.
    """
    out: list[dict] = [_namespace(ns) for ns in profile.namespaces]
    for name, value in _SYSTEM_PRIORITY.items():
        out.append(_priority_class(name, value, "Used for system critical pods that must run in the cluster.",
                                   "PreemptLowerPriority", False))
    for pc in profile.priority_classes.values():
        out.append(_priority_class(pc.name, pc.value, pc.description, pc.preemption_policy, pc.global_default))
    queues = dict(profile.queues)
    out.extend(_queue(q.name, q.weight, q.reclaimable, q.capability, q.guarantee) for q in queues.values())
    if "default" not in queues:  # Volcano always has its default queue
        out.append(_queue("default", 1, True, {}, {}))
    for node in profile.nodes():
        out.append(node_object(profile, node, now))
    for node in profile.nodes():
        out.append(_lease(node.name, profile.timings.lease_duration, now))
    if any(pool.gpus for pool in profile.node_pools.values()):
        out.extend(_system_daemonsets(set(profile.namespaces), exporter=profile.dcgm_exporter))
    out.extend(copy.deepcopy(DEFAULT_POLICY))
    out.append({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
    })
    return out


def seed_workloads(profile: TwinProfile) -> list[dict]:
    """Workload objects: one Volcano Job per training job, Deployment + Service (+ PDB) per inference one, and
    the exporters (kube-state-metrics, snmp_exporter, node_exporter) when the profile has a system (CPU) pool to run
    them; node_exporter without `--collector.mountstats` when the profile says so (defect node-exporter-defaults)."""
    out: list[dict] = []
    for job in profile.workloads.training.values():
        out.append(training_job_object(profile, job))
    for dep in profile.workloads.inference.values():
        out.extend(inference_objects(profile, dep))
    if any(pool.role == "cpu" for pool in profile.node_pools.values()):
        system = datafiles.load_file(SYSTEM_MONITORING)  # kube-state-metrics, snmp_exporter: on the system pool
        daemonsets = system.get("daemonsets", [])
        if not profile.node_exporter_mountstats:
            daemonsets = [_without_arg(d, "--collector.mountstats") for d in daemonsets]
        out.extend([*system["deployments"], *daemonsets, *system.get("services", [])])
    return out


def node_object(profile: TwinProfile, node: NodeSpec, now: str | None = None) -> dict:
    """A Node as its kubelet, GPU feature discovery and the cloud provider would have registered it."""
    pool = profile.node_pools[node.pool]
    info = profile.node_info
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": info.operating_system,
        "kubernetes.io/arch": info.architecture,
        "beta.kubernetes.io/os": info.operating_system,
        "beta.kubernetes.io/arch": info.architecture,
        "node.kubernetes.io/instance-type": _instance_type(pool),
        f"node-role.kubernetes.io/{node.role}": "",
        ROLE_LABEL: node.role,
        POOL_LABEL: pool.name,
    }
    if pool.gpus:
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": pool.gpu_product,
            "nvidia.com/gpu.count": str(pool.gpus),
            "nvidia.com/gpu.memory": str(pool.gpu_memory_mib),
            "nvidia.com/gpu.family": pool.gpu_family,
            "nvidia.com/cuda.driver.major": str(info.cuda_driver_major),
            "nvidia.com/gpu.deploy.dcgm-exporter": "true",  # the GPU Operator's state label (pool labels may override)
        })
    if node.leaf:
        labels[LEAF_LABEL] = node.leaf
    labels.update(pool.labels)
    capacity = {
        "cpu": str(pool.cpu),
        "memory": f"{pool.memory_gib}Gi",
        "pods": str(pool.max_pods),
        "ephemeral-storage": f"{pool.ephemeral_storage_gib}Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    allocatable = {**capacity, "cpu": f"{pool.cpu * 1000 - 500}m", "memory": f"{pool.memory_gib * 1024 - 8192}Mi"}
    if pool.gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(_advertised_gpus(profile, node.name, pool.gpus))
    if pool.rdma_devices:
        capacity["rdma/rdma_shared_device_a"] = allocatable["rdma/rdma_shared_device_a"] = "1k"
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    if now:
        ready.update(lastHeartbeatTime=now, lastTransitionTime=now)
    cidr = _pod_cidr(node.internal_ip)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                **({"network.gpu-drills.io/leaf-port": node.leaf_port} if node.leaf_port else {}),
            },
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "providerID": f"twin://{pool.name}/{node.name}",
            **({"taints": [t.to_k8s() for t in pool.taints]} if pool.taints else {}),
        },
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [ready],
            "addresses": [{"type": "InternalIP", "address": node.internal_ip},
                          {"type": "Hostname", "address": node.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": info.architecture,
                "bootID": _uuidish(f"boot-{node.name}"),
                "containerRuntimeVersion": info.container_runtime_version,
                "kernelVersion": info.kernel_version,
                "kubeProxyVersion": info.kubelet_version or profile.kubernetes_version,
                "kubeletVersion": info.kubelet_version or profile.kubernetes_version,
                "machineID": _uuidish(f"machine-{_machine(profile, node.name)}").replace("-", ""),
                "operatingSystem": info.operating_system,
                "osImage": info.os_image,
                "systemUUID": _uuidish(f"system-{_machine(profile, node.name)}"),
            },
            "images": [{"names": [image], "sizeBytes": 8_000_000_000} for image in pool.cached_images],
        },
    }


CHECKPOINT_CLAIM = "checkpoints"  # the shared store's PVC the training jobs mount (every PVC is the twin's store)


def training_job_object(profile: TwinProfile, job: TrainingJob) -> dict:
    """The Volcano Job (batch.volcano.sh/v1alpha1) a platform team would submit for `job`."""
    nccl = job.nccl
    env = [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "NCCL_SOCKET_IFNAME", "value": nccl.socket_ifname},
        {"name": "CHECKPOINT_DIR", "value": job.checkpoint.path.format(job=job.name)},
        {"name": "CHECKPOINT_INTERVAL_STEPS", "value": str(job.checkpoint.interval_steps)},
    ]
    if nccl.transport == "socket":
        env.append({"name": "NCCL_IB_DISABLE", "value": "1"})
    else:
        env.append({"name": "NCCL_IB_HCA", "value": ",".join(nccl.hcas)})
    limits = {"nvidia.com/gpu": str(job.gpus_per_worker), "cpu": str(job.cpu_per_worker),
              "memory": f"{job.memory_gib_per_worker}Gi"}
    labels = {"app": job.name}
    pod_spec: dict = {
        "schedulerName": "volcano",
        "restartPolicy": job.restart_policy,
        "nodeSelector": dict(job.node_selector),
        "tolerations": [t.to_k8s() for t in job.tolerations],
        "containers": [{
            "name": "trainer",
            "image": job.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["torchrun", "--nnodes", str(job.replicas), "--nproc-per-node", str(job.gpus_per_worker),
                        "train.py", "--resume-from-latest"],
            "env": env,
            "resources": {"limits": limits, "requests": dict(limits)},
            # the job's checkpoint directory: its own folder of the shared store (store.py), or node-local scratch
            "volumeMounts": [{"name": "checkpoints", "mountPath": job.checkpoint.path.format(job=job.name),
                              **({"subPath": f"{job.namespace}/{job.name}"} if job.checkpoint.persistent else {})}],
        }],
        "volumes": [{"name": "checkpoints", **({"persistentVolumeClaim": {"claimName": CHECKPOINT_CLAIM}}
                                               if job.checkpoint.persistent else {"emptyDir": {}})}],
    }
    if job.priority_class:
        pod_spec["priorityClassName"] = job.priority_class
    meta: dict = {"labels": labels}
    if job.cuda != "ok":  # twin-private, like startup-s: what the worker's process meets (container_exec's nvidia-smi)
        meta["annotations"] = {"twin.gpu-drills.io/cuda": job.cuda}
    task = {"name": job.task, "replicas": job.replicas,
            "template": {"metadata": meta, "spec": pod_spec}}
    if job.task_policies:
        task["policies"] = [p.to_k8s() for p in job.task_policies]
    spec: dict = {
        "schedulerName": "volcano",
        "minAvailable": job.effective_min_available,
        "queue": job.queue,
        "maxRetry": job.max_retry,
        "policies": [p.to_k8s() for p in job.policies],
        "plugins": {k: list(v) for k, v in job.plugins.items()},
        "tasks": [task],
    }
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": dict(labels)}, "spec": spec}


def inference_objects(profile: TwinProfile, dep: InferenceDeployment) -> list[dict]:
    """Deployment, Service and (unless disabled) PodDisruptionBudget for one model server."""
    labels = {"app": dep.name}
    meta = {"name": dep.name, "namespace": dep.namespace, "labels": dict(labels)}
    # The kubelet holds readiness back for the model load (vLLM loading weights before /health answers).
    pod_meta: dict = {"labels": dict(labels),
                      "annotations": {"twin.gpu-drills.io/startup-s": f"{profile.model_load_seconds(dep):g}",
                                      # vLLM's own /metrics on its API port, for a Prometheus that reads these
                                      "prometheus.io/scrape": "true", "prometheus.io/port": str(dep.port)}}
    if dep.queue:
        pod_meta["annotations"]["scheduling.volcano.sh/queue-name"] = dep.queue
    pod_spec: dict = {
        "schedulerName": dep.scheduler_name,
        "nodeSelector": dict(dep.node_selector),
        "tolerations": [t.to_k8s() for t in dep.tolerations],
        "containers": [{
            "name": "vllm",
            "image": dep.image,
            "args": ["--model", dep.model, "--served-model-name", dep.model_name, "--port", str(dep.port),
                     "--max-num-seqs", str(dep.max_concurrency)],
            "ports": [{"name": "http", "containerPort": dep.port, "protocol": "TCP"}],
            "resources": {"limits": {"nvidia.com/gpu": str(dep.gpus), "cpu": str(dep.cpu),
                                     "memory": f"{dep.memory_gib}Gi"},
                          "requests": {"nvidia.com/gpu": str(dep.gpus), "cpu": str(dep.cpu),
                                       "memory": f"{dep.memory_gib}Gi"}},
        }],
        "terminationGracePeriodSeconds": int(dep.termination_grace),
    }
    container = pod_spec["containers"][0]
    if dep.readiness_probe:
        container["readinessProbe"] = {"httpGet": {"path": dep.readiness_path, "port": dep.port},
                                       "periodSeconds": int(profile.timings.readiness_period), "failureThreshold": 3}
    if dep.pre_stop:  # the native sleep action (KEP-3960, on by default since 1.30)
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": int(dep.pre_stop)}}}
    if dep.priority_class:
        pod_spec["priorityClassName"] = dep.priority_class
    out = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": dict(meta),
         "spec": {"replicas": dep.replicas, "selector": {"matchLabels": dict(labels)},
                  "strategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxSurge": dep.max_surge, "maxUnavailable": dep.max_unavailable}},
                  "template": {"metadata": pod_meta, "spec": pod_spec}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "name": dep.service_name},
         "spec": {"selector": dict(labels), "type": "ClusterIP",
                  "ports": [{"name": "http", "port": dep.port, "targetPort": dep.port, "protocol": "TCP"}]}},
    ]
    if dep.pdb_min_available is not None:
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": dict(meta),
                    "spec": {"minAvailable": dep.pdb_min_available, "selector": {"matchLabels": dict(labels)}}})
    return out


# -- helpers ------------------------------------------------------------------------------------
def _system_daemonsets(namespaces: set[str], exporter: bool = True) -> list[dict]:
    """The GPU node agents (device plugin, DCGM host engine, DCGM exporter, RDMA device plugin) and their
    namespaces; without the exporter when the profile says none is deployed (defect no-dcgm-exporter)."""
    data = datafiles.load_file(SYSTEM_DAEMONSETS)
    daemonsets = [d for d in data["daemonsets"] if exporter or d["metadata"]["name"] != "nvidia-dcgm-exporter"]
    return [*(_namespace(ns) for ns in data["namespaces"] if ns not in namespaces), *daemonsets]


def _without_arg(obj: dict, arg: str) -> dict:
    """A copy of a workload object whose containers do not pass `arg`."""
    out = copy.deepcopy(obj)
    for c in out["spec"]["template"]["spec"]["containers"]:
        c["args"] = [a for a in c.get("args") or [] if a != arg]
    return out


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


def _priority_class(name: str, value: int, description: str, policy: str, global_default: bool) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": global_default, "preemptionPolicy": policy,
            "description": description}


def _queue(name: str, weight: int, reclaimable: bool, capability: dict, guarantee: dict) -> dict:
    spec: dict = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = dict(capability)
    if guarantee:
        spec["guarantee"] = {"resource": dict(guarantee)}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": spec, "status": {"state": "Open"}}


def _lease(node: str, duration: float, now: str | None) -> dict:
    spec: dict = {"holderIdentity": node, "leaseDurationSeconds": int(duration)}
    if now:
        spec["renewTime"] = _micro(now)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"}, "spec": spec}


def _micro(ts: str) -> str:
    """RFC 3339 with microseconds, as MicroTime fields (Lease renewTime, Event eventTime) are written."""
    return ts if "." in ts else ts.replace("Z", ".000000Z")


def _advertised_gpus(profile: TwinProfile, node: str, gpus: int) -> int:
    """What the device plugin advertises: every GPU, unless an acceptance fault says it lost some too."""
    fault = profile.new_nodes.faults.get(node) if profile.new_nodes is not None else None
    if fault is not None and fault.advertised_lost and fault.visible_gpus is not None:
        return min(gpus, fault.visible_gpus)
    return gpus


def _machine(profile: TwinProfile, node: str) -> str:
    """The machine behind a Node object: itself, unless it fronts another's (`new_nodes.faults[…].machine`) —
    then its kubelet reports that machine's DMI system UUID and /etc/machine-id, as a real one reads them."""
    fault = profile.new_nodes.faults.get(node) if profile.new_nodes is not None else None
    return (fault.machine if fault is not None else None) or node


def _instance_type(pool: NodePool) -> str:
    if not pool.gpus:
        return f"cpu-{pool.cpu}c"
    model = pool.gpu_product.split("-")[1].lower() if "-" in pool.gpu_product else "gpu"
    return f"gpu-{model}x{pool.gpus}"


def _pod_cidr(node_ip: str) -> str:
    """A /24 per node inside 10.128.0.0/9, derived from its (unique) internal IP."""
    _, _, a, b = (int(x) for x in node_ip.split("."))
    seq = a * 250 + b
    return f"10.{128 + seq // 256}.{seq % 256}.0/24"


def _uuidish(seed: str) -> str:
    h = hashlib.sha1(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
