# WARNING: submits a burst of low-priority Volcano training jobs that ask for GPUs anywhere in the cluster (no node
# selector, the GPU taint tolerated), as a night's batch submissions do. `revert` deletes every job of the burst.
"""A noisy neighbour as an inject/revert pair (seed §5.4: a training burst at night takes the inference service
down): N one-worker Volcano Jobs of G GPUs each, in the site's training queue at the site's training priority (read
from its own training Job: the burst is more of what the site runs), placed wherever GPUs are free — the
inference nodes included, since batch work is rarely pinned away from them.

The journal entry names the burst by one label (`gpu-drills.io/burst=<id>`, chosen at plan time), so `revert`
(teardown, an interrupted run, `drills revert` after a SIGKILL) deletes every job of the burst and waits until none
of their pods is left, however far the run got; `verify` reads back that no job and no pod of the burst is left.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import asdict, dataclass

from drills.core.errors import InjectionFailed
from drills.core.kube import obj_get
from drills.core.watch import pod_names
from drills.faults import Plan, Reach
from drills.faults.delete_wait import delete_and_wait
from drills.faults.readback import Observation, Reading, read

__all__ = ["KIND", "BURST_LABEL", "BurstRecord", "plan", "inject", "revert", "verify"]

log = logging.getLogger(__name__)

KIND = "burst"
BURST_LABEL = "gpu-drills.io/burst"
VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")
DELETE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class BurstRecord:
    namespace: str
    selector: str
    injected_at: str  # cluster time: the middle of the first create
    jobs: tuple[str, ...]
    gpus: int  # per job (one worker)
    queue: str
    priority_class: str | None

    def to_dict(self) -> dict:
        return {**asdict(self), "jobs": list(self.jobs)}


def plan(target, profile, *, jobs: int, gpus: int) -> Plan:
    """Read-only: the site's training Job (its queue, priority class, image and tolerations) and the burst's names."""
    cluster, training = target.cluster, profile.workloads.training
    ns = training.namespace
    try:
        job = json.loads(cluster.custom.get_namespaced_custom_object(*VOLCANO[:2], ns, VOLCANO[2], training.job,
                                                                     _preload_content=False).data)
    except Exception as err:  # noqa: BLE001
        raise InjectionFailed(f"cannot read the training job {ns}/{training.job} the burst copies: {_reason(err)}; "
                              "nothing injected") from None
    burst_id = secrets.token_hex(4)
    names = tuple(f"burst-{burst_id}-{i}" for i in range(jobs))
    selector = f"{BURST_LABEL}={burst_id}"
    spec = (ns, selector, burst_id, names, gpus, job)
    queue = obj_get(job, "spec", "queue", default="default")
    return Plan(KIND, f"{ns}/{selector}", f"submit {jobs} low-priority Volcano jobs of {gpus} GPUs each (queue {queue}) "
                                         f"in {ns} on {cluster.name}",
                {"namespace": ns, "selector": selector, "jobs": list(names)}, Reach(namespaces=(ns,)), spec=spec)


def inject(target, plan: Plan) -> BurstRecord:
    cluster = target.cluster
    ns, selector, burst_id, names, gpus, job = plan.spec
    stamp = None
    for name in names:
        body = _job(job, name, burst_id, gpus)
        try:
            window = cluster.around(lambda: cluster.custom.create_namespaced_custom_object(
                *VOLCANO[:2], ns, VOLCANO[2], body, _preload_content=False))
        except Exception as err:  # noqa: BLE001 — the journal names the burst: revert deletes what was made
            raise InjectionFailed(f"could not submit burst job {ns}/{name}: {_reason(err)}") from None
        stamp = stamp if stamp is not None else sum(window) / 2
    spec = job.get("spec") or {}
    record = BurstRecord(ns, selector, cluster.clock.iso(stamp if stamp is not None else cluster.clock.timestamp()),
                         names, gpus, spec.get("queue", "default"), spec.get("priorityClassName"))
    log.info("submitted %d burst jobs (%s) in %s", len(names), selector, ns)
    return record


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Delete every job of the burst and wait until their pods are gone; idempotent."""
    cluster, ns, sel = target.cluster, undo["namespace"], undo["selector"]
    return delete_and_wait(cluster, ns, sel, lambda: _jobs(cluster, ns, sel),
                           lambda job: cluster.custom.delete_namespaced_custom_object(
                               *VOLCANO[:2], ns, VOLCANO[2], job, propagation_policy="Foreground",
                               grace_period_seconds=0),
                           "burst jobs", DELETE_TIMEOUT_S)


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read back that no job and no pod of the burst is left."""
    ns, sel = undo["namespace"], undo["selector"]

    def reader():
        jobs, pods = _jobs(target.cluster, ns, sel), pod_names(target.cluster, ns, sel)
        return [Observation(f"burst jobs {ns}/{sel}", f"{len(jobs)} left", f"GET jobs.batch.volcano.sh in {ns} ({sel})",
                            not jobs),
                Observation(f"burst pods {ns}/{sel}", f"{len(pods)} left", f"GET pods in {ns} ({sel})", not pods)], \
            tuple(jobs + pods)

    return read(KIND, f"{ns}/{sel}", reader)


def _job(site_job: dict, name: str, burst_id: str, gpus: int) -> dict:
    """One worker asking `gpus` GPUs, at the site job's queue and priority, its image and GPU tolerations, no
    node selector (batch work goes where GPUs are free)."""
    spec = site_job.get("spec") or {}
    task = (spec.get("tasks") or [{}])[0]
    container = dict(((task.get("template") or {}).get("spec") or {}).get("containers", [{}])[0])
    tolerations = ((task.get("template") or {}).get("spec") or {}).get("tolerations") or []
    labels = {BURST_LABEL: burst_id}
    pod_spec = {"restartPolicy": "Never", "tolerations": tolerations, "containers": [{
        "name": "trainer", "image": container.get("image", "busybox"), "command": ["python", "-m", "train"],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}]}
    body = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "labels": labels},
            "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": spec.get("queue", "default"),
                     "maxRetry": 1, "tasks": [{"name": "worker", "replicas": 1,
                                               "template": {"metadata": {"labels": labels}, "spec": pod_spec}}]}}
    if spec.get("priorityClassName"):
        body["spec"]["priorityClassName"] = spec["priorityClassName"]
    return body


def _jobs(cluster, ns: str, sel: str) -> list[str]:
    data = json.loads(cluster.custom.list_namespaced_custom_object(*VOLCANO[:2], ns, VOLCANO[2], label_selector=sel,
                                                                   _preload_content=False).data)
    return sorted(j["metadata"]["name"] for j in data.get("items", []))


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    if status is not None:
        return f"{status} {getattr(err, 'reason', '')}".strip()
    return str(err) or type(err).__name__
