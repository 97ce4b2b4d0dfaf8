"""What the Volcano job controller builds and computes, as pure functions: pods per task (names,
labels, annotations Volcano sets), the PodGroup, policy matching, pod counts and Go-style durations.

Mirrors volcano-sh/volcano pkg/controllers/job (createJobPod, applyPolicies, classifyAndAddUpPodBaseOnPhase).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from drills.twin.controllers.podutil import owner_ref

__all__ = ["JOB_NAME", "JOB_VERSION", "TASK_SPEC", "GROUP_NAME", "SYNC", "Request", "pod_name", "podgroup_name",
           "job_pod", "podgroup", "apply_policies", "PodCounts", "count_pods", "go_duration", "total_replicas",
           "max_retry", "min_available", "pod_request"]

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
JOB_VERSION = "volcano.sh/job-version"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
QUEUE_NAME = "volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
SYNC = "SyncJob"
DEFAULT_MAX_RETRY = 3


@dataclass(frozen=True)
class Request:
    """Why a job is being reconciled (apis.Request): an event, its task, exit code and the pod's job version."""

    event: str = "OutOfSync"
    task: str = ""
    exit_code: int | None = None
    version: int = -1  # -1: not from a pod (job changes): never outdated
    pod: str = ""


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def podgroup_name(job: dict) -> str:
    """`<job>-<uid>` as Volcano ≥ 1.8 names it (jobhelpers.GenPGName)."""
    return f'{job["metadata"]["name"]}-{job["metadata"]["uid"]}'


def total_replicas(job: dict) -> int:
    return sum(int(t.get("replicas", 0) or 0) for t in (job.get("spec") or {}).get("tasks") or ())


def min_available(job: dict) -> int:
    spec = job.get("spec") or {}
    value = spec.get("minAvailable")
    return total_replicas(job) if value is None else int(value)


def max_retry(job: dict) -> int:
    value = (job.get("spec") or {}).get("maxRetry")
    return DEFAULT_MAX_RETRY if value is None else int(value)


def job_pod(job: dict, task: dict, index: int) -> dict:
    """The pod Volcano creates for replica `index` of `task` (createJobPod + env/svc plugins)."""
    spec, meta = job["spec"], job["metadata"]
    template = copy.deepcopy(task.get("template") or {})
    tmeta = template.get("metadata") or {}
    pspec = template.get("spec") or {}
    name = pod_name(meta["name"], task["name"], index)
    status = job.get("status") or {}
    queue = spec.get("queue", "default")
    labels = {**(tmeta.get("labels") or {}), JOB_NAME: meta["name"], JOB_NAMESPACE: meta["namespace"],
              QUEUE_NAME: queue, TASK_SPEC: task["name"], TASK_INDEX: str(index)}
    annotations = {**(tmeta.get("annotations") or {}), TASK_SPEC: task["name"], GROUP_NAME: podgroup_name(job),
                   JOB_NAME: meta["name"], JOB_VERSION: str(status.get("version", 0) or 0), QUEUE_NAME: queue,
                   TASK_INDEX: str(index)}
    if not pspec.get("schedulerName"):
        pspec["schedulerName"] = spec.get("schedulerName") or "volcano"
    if spec.get("priorityClassName") and not pspec.get("priorityClassName"):
        pspec["priorityClassName"] = spec["priorityClassName"]
    plugins = spec.get("plugins") or {}
    if "env" in plugins:
        for container in pspec.get("containers") or ():
            env = container.setdefault("env", [])
            env += [{"name": "VK_TASK_INDEX", "value": str(index)}, {"name": "VC_TASK_INDEX", "value": str(index)}]
    if "svc" in plugins:
        pspec.setdefault("hostname", name)
        pspec.setdefault("subdomain", meta["name"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations, "ownerReferences": [owner_ref(job)]},
            "spec": pspec}


def podgroup(job: dict) -> dict:
    """The PodGroup (scheduling.volcano.sh/v1beta1) gang-scheduling the job's pods."""
    spec, meta = job["spec"], job["metadata"]
    tasks = spec.get("tasks") or ()
    min_task = {t["name"]: int(t["minAvailable"] if t.get("minAvailable") is not None else t.get("replicas", 0))
                for t in tasks}
    resources: dict[str, float] = {}
    left = min_available(job)
    for task in tasks:
        take = min(left, int(task.get("replicas", 0) or 0))
        left -= take
        for name, qty in pod_request(task.get("template") or {}).items():
            resources[name] = resources.get(name, 0) + qty * take
    pg_spec = {"minMember": min_available(job), "minTaskMember": min_task, "queue": spec.get("queue", "default"),
               "minResources": {k: _fmt_qty(k, v) for k, v in resources.items()}}
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": podgroup_name(job), "namespace": meta["namespace"],
                         "labels": dict(meta.get("labels") or {}),
                         "annotations": {JOB_NAME: meta["name"]}, "ownerReferences": [owner_ref(job)]},
            "spec": pg_spec, "status": {"phase": "Pending"}}


def apply_policies(job: dict, req: Request) -> str:
    """The action for `req`: task policies first, then job policies, else SyncJob (applyPolicies)."""
    status = job.get("status") or {}
    if req.event == "OutOfSync":
        return SYNC
    if 0 <= req.version < int(status.get("version", 0) or 0):
        return SYNC  # a request from pods of a killed generation
    spec = job.get("spec") or {}
    if req.task:
        for task in spec.get("tasks") or ():
            if task.get("name") == req.task:
                action = _match(task.get("policies") or (), req)
                if action:
                    return action
                break
    return _match(spec.get("policies") or (), req) or SYNC


@dataclass
class PodCounts:
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    terminating: int = 0

    def add(self, pod: dict, tasks: dict[str, dict[str, int]]) -> None:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        attr = phase.lower() if phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown") else "unknown"
        setattr(self, attr, getattr(self, attr) + 1)
        task = (pod["metadata"].get("annotations") or {}).get(TASK_SPEC, "")
        if task:
            per = tasks.setdefault(task, {})
            per[phase] = per.get(phase, 0) + 1


def count_pods(pods: list[dict]) -> tuple[PodCounts, dict]:
    counts, tasks = PodCounts(), {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            counts.terminating += 1
        else:
            counts.add(pod, tasks)
    return counts, {t: {"phase": p} for t, p in tasks.items()}


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String() writes it (metav1.Duration): `1h2m3.5s`, `45s`, `0s`."""
    if seconds <= 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


def pod_request(template: dict) -> dict[str, float]:
    """Summed container requests of a pod template (cpu in cores, memory in bytes, others as counts)."""
    out: dict[str, float] = {}
    for container in (template.get("spec") or {}).get("containers") or ():
        res = container.get("resources") or {}
        for name, qty in (res.get("requests") or res.get("limits") or {}).items():
            out[name] = out.get(name, 0) + _parse_qty(str(qty))
    return out


def _match(policies, req: Request) -> str | None:
    for policy in policies:
        events = list(policy.get("events") or ()) + ([policy["event"]] if policy.get("event") else [])
        if events and req.event and (req.event in events or "*" in events):
            return policy.get("action")
        if policy.get("exitCode") is not None and req.exit_code is not None and policy["exitCode"] == req.exit_code:
            return policy.get("action")
    return None


_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "m": 1e-3}


def _parse_qty(text: str) -> float:
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIX[suffix]
    return float(text)


def _fmt_qty(name: str, value: float) -> str:
    if name == "memory" and value >= 2 ** 30 and value % 2 ** 30 == 0:
        return f"{int(value // 2 ** 30)}Gi"
    if name == "cpu" and value != int(value):
        return f"{int(round(value * 1000))}m"
    return str(int(value)) if value == int(value) else str(value)
