# WARNING: saturates a shared store from several nodes: a batch/v1 Job's pods run fio against the store's
# PVC until reverted (or until fio's own time limit and the Job's activeDeadlineSeconds).
"""Storage saturation in `job` mode: the rendered fio Job applied through the Kubernetes API.

`inject_job(cluster, spec)` creates the Job from `render_fio_job(spec)` and waits (cluster time, watch,
until `start_timeout_s`) for its `parallelism` pods to be Running; it returns a frozen
`JobSaturationRecord`. `revert_job(cluster, namespace, name)` deletes the Job with its pods (foreground
propagation) and waits until no pod of it is left; it is idempotent (a missing Job is a no-op).
`wait_for_reports(cluster, namespace, name, deadline)` waits until every pod's fio has ended (its
time limit, in cluster time) and reads each pod's JSON report from its log — fio prints it when it ends,
so a log read while fio still runs has none — before the revert deletes the pods and their logs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from drills.core.clock import STOP_WALL_FLOOR_S
from drills.core.errors import DrillError, InjectionFailed, RevertFailed
from drills.faults.storage.remote import render_fio_job
from drills.faults.storage.spec import SaturationSpec
from drills.core.kube import Cluster, EventMerger, obj_get
from drills.faults.storage.fio import FioResult, parse_fio_output

__all__ = ["pods_of", "JobSaturationRecord", "PodReports", "selected_nodes", "inject_job", "revert_job", "wait_for_reports", "fio_results",
           "pod_selector"]

log = logging.getLogger(__name__)

DELETE_TIMEOUT_S = 300.0  # cluster seconds for the Job's pods to go after the delete


@dataclass(frozen=True)
class JobSaturationRecord:
    """The Job `inject_job` created and the pods that ran fio; JSON-serialisable for journal and report."""

    namespace: str
    job_name: str
    uid: str
    pods: tuple[str, ...]
    nodes: tuple[str, ...]
    injected_at: str  # cluster time, ISO: when every pod was Running
    mode: str = "job"
    max_seconds: float = 0.0  # fio's own time limit in each pod (cluster seconds)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pods": list(self.pods), "nodes": list(self.nodes)}


def pod_selector(spec_or_name: SaturationSpec | str) -> str:
    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.job_name
    return f"job-name={name}"


def selected_nodes(cluster: Cluster, spec: SaturationSpec) -> list[str]:
    """Per-node mode: the nodes that get one fio pod each — every node matching the spec's node_selector that is
    not cordoned (a taint it does not tolerate keeps its pod Pending, and the injection names the reason).
    InjectionFailed when none matches: nothing is created."""
    selector = ",".join(f"{k}={v}" for k, v in spec.node_selector)
    resp = cluster.core.list_node(label_selector=selector or None, _preload_content=False)
    nodes = sorted(n["metadata"]["name"] for n in json.loads(resp.data).get("items", [])
                   if not obj_get(n, "spec", "unschedulable", default=False))
    if not nodes:
        raise InjectionFailed(f"per-node storage saturation: no schedulable node matches node_selector "
                              f"{selector or '(none)'}; fix storage.saturation.node_selector; nothing injected",
                              changed=False)
    return nodes


def inject_job(cluster: Cluster, spec: SaturationSpec, start_timeout_s: float = 300.0) -> JobSaturationRecord:
    """Create the fio Job and wait for its pods to run; raises InjectionFailed (the caller reverts)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    body = render_fio_job(spec)
    batch = client.BatchV1Api(cluster.api)
    try:
        created = batch.create_namespaced_job(spec.namespace, body, _preload_content=False)
        uid = json.loads(created.data)["metadata"].get("uid", "")
    except ApiException as err:
        if err.status == 409:
            raise InjectionFailed(f"Job {spec.namespace}/{spec.job_name} already exists (a leftover saturation? "
                                  "run `drills revert`, or delete it); nothing injected") from None
        raise InjectionFailed(f"could not create the fio Job {spec.namespace}/{spec.job_name}: "
                              f"{err.status} {err.reason}") from None
    deadline = cluster.clock.timestamp() + start_timeout_s
    running: dict[str, str] = {}
    waiting: dict[str, str] = {}  # pod → why it is not running yet (the scheduler's message)
    with EventMerger(cluster.clock) as merger:
        merger.watch("pods", cluster.core.list_namespaced_pod, spec.namespace, label_selector=pod_selector(spec))
        for event in merger.events(deadline):
            if event is None or event.obj is None or event.type not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            pod = event.obj
            name = obj_get(pod, "metadata", "name")
            phase = obj_get(pod, "status", "phase")
            if phase == "Failed" or (event.type == "DELETED" and name in running):
                tail = _log_tail(cluster, spec.namespace, name) if phase == "Failed" else ""
                raise InjectionFailed(f"fio pod {spec.namespace}/{name} of the saturation Job "
                                      f"{'failed' if phase == 'Failed' else 'was deleted'} before saturating"
                                      + (f"; its log ends: {tail}" if tail else ""))
            if phase == "Running":
                running[name] = obj_get(pod, "spec", "nodeName", default="") or ""
            else:
                conds = obj_get(pod, "status", "conditions", default=None) or []
                waiting[name] = next((c.get("message") for c in conds if c.get("status") == "False"
                                      and c.get("message")), phase or "Pending")
            if len(running) >= spec.parallelism:
                break
    if len(running) < spec.parallelism:
        why = next((w for n, w in sorted(waiting.items()) if n not in running), "no pod was created")
        raise InjectionFailed(f"only {len(running)} of {spec.parallelism} fio pods of Job "
                              f"{spec.namespace}/{spec.job_name} were Running within {start_timeout_s:.0f} s: {why}")
    at = cluster.clock.iso(cluster.clock.now())
    log.info("saturating the store from %d fio pods of Job %s/%s", len(running), spec.namespace, spec.job_name)
    return JobSaturationRecord(namespace=spec.namespace, job_name=spec.job_name, uid=uid,
                               pods=tuple(sorted(running)), nodes=tuple(sorted(set(running.values()))),
                               injected_at=at, max_seconds=spec.max_seconds)


def revert_job(cluster: Cluster, namespace: str, name: str, timeout_s: float = DELETE_TIMEOUT_S) -> None:
    """Delete the Job and its pods; wait until none is left. Idempotent; raises RevertFailed."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    batch = client.BatchV1Api(cluster.api)
    try:
        batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground", grace_period_seconds=30)
    except ApiException as err:
        if err.status != 404:
            raise RevertFailed(f"could not delete the fio Job {namespace}/{name}: {err.status} {err.reason}; "
                               "run `drills revert` again") from None
    try:
        left = pods_of(cluster, namespace, name)
        if left:
            _wait_pods_gone(cluster, namespace, name, cluster.clock.deadline(timeout_s, STOP_WALL_FLOOR_S))
            left = pods_of(cluster, namespace, name)
    except ApiException as err:
        raise RevertFailed(f"could not check the fio pods of Job {namespace}/{name}: {err.status} {err.reason}") from None
    if left:
        waited = max(timeout_s, cluster.clock.cluster_seconds(STOP_WALL_FLOOR_S))
        raise RevertFailed(f"fio pods {', '.join(left)} of Job {namespace}/{name} still exist "
                           f"{waited:.0f} s after the delete")
    log.info("storage saturation Job %s/%s deleted", namespace, name)


@dataclass(frozen=True)
class PodReports:
    """fio's reports of a Job's pods: one result per pod that printed one, and the pods that did not."""

    results: tuple[FioResult, ...]
    pods: tuple[str, ...]  # the pods whose report was read, in the order of `results`
    missing: tuple[str, ...]  # "pod: why" for every pod without a report
    ended_at: str | None  # cluster time the last fio container finished (None: one never did)


def wait_for_reports(cluster: Cluster, namespace: str, name: str, deadline_ts: float) -> PodReports:
    """Wait (watch, cluster time) until every pod of the Job has ended or `deadline_ts`, then read each pod's
    fio report from its log. A pod still running at the deadline, or whose log holds no report, is missing."""
    from kubernetes.client.exceptions import ApiException

    pods = _pod_objects(cluster, namespace, name)
    if any(not _ended(p) for p in pods):
        with EventMerger(cluster.clock) as merger:
            merger.watch("pods", cluster.core.list_namespaced_pod, namespace, label_selector=pod_selector(name))
            for _event in merger.events(deadline_ts):
                pods = _pod_objects(cluster, namespace, name)
                if all(_ended(p) for p in pods):
                    break
    results, read, missing, finished = [], [], [], []
    for pod in pods:
        pod_name = obj_get(pod, "metadata", "name")
        if not _ended(pod):
            missing.append(f"{pod_name}: fio still running at the deadline")
            continue
        finished += [t for t in (_finished_at(s) for s in obj_get(pod, "status", "containerStatuses", default=None)
                                 or []) if t]
        try:
            text = cluster.core.read_namespaced_pod_log(pod_name, namespace)
        except ApiException as err:
            missing.append(f"{pod_name}: log not readable ({err.status} {err.reason})")
            continue
        try:
            results.append(parse_fio_output(text or ""))
            read.append(pod_name)
        except DrillError as err:
            missing.append(f"{pod_name}: {err}")
    return PodReports(tuple(results), tuple(read), tuple(missing), max(finished) if finished else None)


def fio_results(cluster: Cluster, namespace: str, name: str) -> list[FioResult]:
    """fio's JSON reports from the Job's pod logs (pods whose log has none are skipped)."""
    from kubernetes.client.exceptions import ApiException

    out = []
    for pod in pods_of(cluster, namespace, name):
        try:
            text = cluster.core.read_namespaced_pod_log(pod, namespace)
        except ApiException:
            continue
        if "{" in (text or ""):
            try:
                out.append(parse_fio_output(text))
            except Exception as err:  # noqa: BLE001 — a partial log is a missing figure, not a failed drill
                log.warning("fio report of pod %s unreadable: %s", pod, err)
    return out


# helpers

def _log_tail(cluster: Cluster, namespace: str, pod: str) -> str:
    """The last lines of a pod's log (why its container failed: fio's or the shell's error), or ""."""
    from kubernetes.client.exceptions import ApiException

    try:
        return _tail(cluster.core.read_namespaced_pod_log(pod, namespace, tail_lines=3) or "")
    except ApiException:
        return ""


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())[:400]


def _pod_objects(cluster: Cluster, namespace: str, name: str) -> list[dict]:
    resp = cluster.core.list_namespaced_pod(namespace, label_selector=pod_selector(name), _preload_content=False)
    return sorted(json.loads(resp.data).get("items", []), key=lambda p: p["metadata"]["name"])


def _ended(pod: dict) -> bool:
    return obj_get(pod, "status", "phase") in ("Succeeded", "Failed")


def _finished_at(status: dict) -> str | None:
    return ((status.get("state") or {}).get("terminated") or {}).get("finishedAt")


def pods_of(cluster: Cluster, namespace: str, name: str) -> list[str]:
    resp = cluster.core.list_namespaced_pod(namespace, label_selector=pod_selector(name), _preload_content=False)
    return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items", []))


def _wait_pods_gone(cluster: Cluster, namespace: str, name: str, deadline: float) -> None:
    with EventMerger(cluster.clock) as merger:
        merger.watch("pods", cluster.core.list_namespaced_pod, namespace, label_selector=pod_selector(name))
        for event in merger.events(deadline):
            if event is not None and event.type == "DELETED" and not pods_of(cluster, namespace, name):
                return
            if event is None and not pods_of(cluster, namespace, name):
                return
