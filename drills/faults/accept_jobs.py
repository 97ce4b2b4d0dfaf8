# WARNING: runs acceptance Jobs (GPU, NCCL, RDMA, storage load) on new nodes. `revert` deletes every Job
# of the run with its pods.
"""The acceptance Jobs of one run as an inject/revert pair: the journal entry is opened before the first
Job is created, and names them all by one label (`gpu-drills.io/accept-run=<run id>`), so `revert`
(teardown, an interrupted run, `drills revert` after a SIGKILL) deletes every Job of the run and waits
until none of their pods is left, however far the run got. `inject` creates nothing: the run creates the
Jobs phase by phase (drills/acceptance/run.py) under this entry."""

from __future__ import annotations

import json
import logging

from drills.core.watch import pod_names
from drills.faults.delete_wait import delete_and_wait
from drills.faults import Plan, Reach

__all__ = ["KIND", "RUN_LABEL", "plan", "inject", "revert", "verify", "selector"]

log = logging.getLogger(__name__)

KIND = "accept-jobs"
RUN_LABEL = "gpu-drills.io/accept-run"
DELETE_TIMEOUT_S = 300.0


def selector(run_id: str) -> str:
    return f"{RUN_LABEL}={run_id}"


def plan(target, profile, *, namespace: str, run_id: str, nodes: list[str]) -> Plan:
    return Plan(KIND, f"{namespace}/{selector(run_id)}", f"run acceptance Jobs on {len(nodes)} node(s) in {namespace}",
                {"namespace": namespace, "selector": selector(run_id)},
                Reach(namespaces=(namespace,)), spec=None)


def inject(target, plan: Plan) -> dict:
    return {"namespace": plan.undo["namespace"], "selector": plan.undo["selector"],
            "injected_at": target.cluster.clock.iso(target.cluster.clock.now())}


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Delete every Job of the run (foreground) and wait until their pods are gone; idempotent."""
    from kubernetes import client

    cluster, ns, sel = target.cluster, undo["namespace"], undo["selector"]
    batch = client.BatchV1Api(cluster.api)

    def jobs() -> list[str]:
        data = json.loads(batch.list_namespaced_job(ns, label_selector=sel, _preload_content=False).data)
        return [job["metadata"]["name"] for job in data["items"]]

    return delete_and_wait(cluster, ns, sel, jobs,
                           lambda name: batch.delete_namespaced_job(name, ns, propagation_policy="Foreground",
                                                                    grace_period_seconds=0),
                           "acceptance Jobs", DELETE_TIMEOUT_S)


def verify(target, undo: dict, record: dict | None = None) -> "Reading":
    """Read back that no pod of the run's acceptance Jobs is left."""
    from drills.faults.readback import Observation, read

    ns, sel = undo["namespace"], undo["selector"]

    def reader():
        left = pod_names(target.cluster, ns, sel)
        return [Observation(f"acceptance pods {ns}/{sel}", f"{len(left)} left", f"GET pods in {ns} ({sel})",
                            not left)], tuple(left)

    return read(KIND, f"{ns}/{sel}", reader)
