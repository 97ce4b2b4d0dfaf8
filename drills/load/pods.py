"""Distributed locust as Kubernetes objects: what the `pods` load generator applies (pure renderers).

The pattern of locust's own Kubernetes guides and of the locust-k8s-operator: a master Job (one pod, the
headless master that drives the run and counts), a worker Job of N pods (each a locust worker sending the
requests) and a ClusterIP Service naming the master, through which the workers reach it (port 5557). Every
object carries our labels (`drills/load: <name>`) so a revert finds them all, and Job deadlines bound a load
whose driver died (`activeDeadlineSeconds`, cluster seconds).

Results travel in the pods' logs, the one channel a pod has that needs no volume nor exec: each worker writes
its outcome buckets as JSONL to stdout (`--bucket-file /dev/stdout`), and the master prints locust's summary
(the `--json-file` document and the stats/failures CSVs) as one JSON line every second and when it quits
(`--report-stdout`). drills/load/podrunner.py follows those logs into the same files a local run writes.

The image is the drills image (deploy/Containerfile): the locustfile is the package's own, at
`IMAGE_LOCUSTFILE`, so the load in a pod is exactly the load a local run sends.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from drills.core.errors import InvalidProfile

__all__ = ["LoadPodsSpec", "render_load_objects", "load_name", "LABELS", "NAME_LABEL", "ROLE_LABEL",
           "IMAGE_APP_DIR", "IMAGE_LOCUSTFILE", "MASTER_PORT", "pod_selector", "SECURITY_CONTEXT"]

IMAGE_APP_DIR = "/opt/gpu-drills"  # WORKDIR of deploy/Containerfile: the source tree, installed editable
IMAGE_LOCUSTFILE = f"{IMAGE_APP_DIR}/drills/load/locustfile.py"
MASTER_PORT = 5557  # locust's default master port (workers connect to it)
NAME_LABEL = "drills/load"
ROLE_LABEL = "drills/load-role"
LABELS = {"app.kubernetes.io/name": "locust", "app.kubernetes.io/managed-by": "gpu-drills", "drills/fault": "load"}
# Pod Security "restricted": non-root, no privilege escalation, every capability dropped, RuntimeDefault seccomp.
SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                    "runAsUser": 10001, "runAsGroup": 10001, "readOnlyRootFilesystem": True,
                    "seccompProfile": {"type": "RuntimeDefault"}}
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$")


@dataclass(frozen=True)
class LoadPodsSpec:
    """One distributed load: who sends what to `host`, for how long at most, and where the pods run."""

    name: str  # the objects' base name (a DNS label): <name>-master Job, <name>-worker Job, <name> Service
    namespace: str
    image: str
    host: str
    workers: int
    users: int
    spawn_rate: float
    locust_args: tuple[str, ...]  # the shape options the locustfile takes (--model, --max-tokens, …)
    run_time_s: float  # locust's own --run-time (wall seconds in the pod)
    deadline_s: float  # the Jobs' activeDeadlineSeconds (cluster seconds): the cluster's own safety net
    expect_workers_wait_s: float = 300.0
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict, ...] = ()
    priority_class_name: str | None = None
    service_account: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    api_key_secret: tuple[str, str] | None = None  # (Secret, key) → DRILLS_LOAD_API_KEY, never on a command line

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.name):
            raise InvalidProfile(f"load pods name {self.name!r} is not a DNS label (a-z, 0-9, '-', ≤ 52 characters)")
        if self.workers < 1:
            raise InvalidProfile(f"the pods load generator needs at least one worker (got {self.workers})")
        object.__setattr__(self, "node_selector", tuple(dict(self.node_selector).items()))
        object.__setattr__(self, "tolerations", tuple(dict(t) for t in self.tolerations))


def load_name(out_dir: str) -> str:
    """The objects' base name for a load writing into `out_dir`: known before anything is created (the journal
    keeps it), unique per run and drill."""
    return "drills-load-" + hashlib.sha1(str(out_dir).encode()).hexdigest()[:10]


def pod_selector(name: str, role: str | None = None) -> str:
    return f"{NAME_LABEL}={name}" + (f",{ROLE_LABEL}={role}" if role else "")


def render_load_objects(spec: LoadPodsSpec) -> list[dict[str, Any]]:
    """The Service, the master Job and the worker Job, in the order they are created."""
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": _labels(spec)},
        "spec": {"selector": _labels(spec, "master"),
                 "ports": [{"name": "master", "port": MASTER_PORT, "targetPort": MASTER_PORT, "protocol": "TCP"}]},
    }
    run_time = f"{max(1, math.ceil(spec.run_time_s))}s"
    master = ["--headless", "-H", spec.host, "-u", str(spec.users), "-r", f"{spec.spawn_rate:g}", "-t", run_time,
              "--only-summary", "--exit-code-on-error", "0", "--report-stdout",
              "--master", "--master-bind-port", str(MASTER_PORT), "--expect-workers", str(spec.workers),
              "--expect-workers-max-wait", str(math.ceil(spec.expect_workers_wait_s))]
    worker = ["--worker", "--master-host", spec.name, "--master-port", str(MASTER_PORT),
              "--bucket-file", "/dev/stdout"]
    return [service, _job(spec, "master", 1, master), _job(spec, "worker", spec.workers, worker)]


# helpers

def _labels(spec: LoadPodsSpec, role: str | None = None) -> dict[str, str]:
    return {**LABELS, NAME_LABEL: spec.name, **({ROLE_LABEL: role} if role else {})}


def _job(spec: LoadPodsSpec, role: str, count: int, role_args: list[str]) -> dict[str, Any]:
    argv = ["/usr/bin/tini", "--", "python", "-m", "locust", "-f", IMAGE_LOCUSTFILE, *spec.locust_args, *role_args,
            "--loglevel", "WARNING"]
    container: dict[str, Any] = {
        "name": "locust", "image": spec.image, "command": argv,
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "HOME", "value": "/tmp"}],
        "securityContext": dict(SECURITY_CONTEXT),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if role == "master":
        container["ports"] = [{"name": "master", "containerPort": MASTER_PORT, "protocol": "TCP"}]
    if spec.api_key_secret and role == "worker":
        secret, key = spec.api_key_secret
        container["env"].append({"name": "DRILLS_LOAD_API_KEY",
                                 "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    if spec.resources:
        container["resources"] = spec.resources
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "automountServiceAccountToken": False,  # the pods call no API
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if role == "worker":  # spread: the point is load from more than one machine
        term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": _labels(spec, "worker")}}
        pod_spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}]}}
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in spec.tolerations]
    if spec.priority_class_name:
        pod_spec["priorityClassName"] = spec.priority_class_name
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{spec.name}-{role}", "namespace": spec.namespace, "labels": _labels(spec, role)},
        "spec": {"parallelism": count, "completions": count, "backoffLimit": 0,
                 "activeDeadlineSeconds": max(1, math.ceil(spec.deadline_s)), "ttlSecondsAfterFinished": 600,
                 "template": {"metadata": {"labels": _labels(spec, role)}, "spec": pod_spec}},
    }
