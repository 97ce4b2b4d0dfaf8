# WARNING: restarts every replica of the serving Deployment (what `kubectl rollout restart` does): each pod is
# replaced by a new one as the Deployment's strategy allows. Users lose requests if the platform drains badly.
"""A rolling restart as an inject/revert pair (seed §5.3: periodic rolling restarts of inference are standard
practice, so the platform must do them without users noticing).

`inject` makes the API call `kubectl rollout restart` makes (kubectl/pkg/polymorphichelpers/objectrestarter.go):
a strategic-merge patch of the pod template's annotation `kubectl.kubernetes.io/restartedAt` to the time of the
restart (RFC 3339). The record keeps the Deployment's pods before it (names and uids: "every replica replaced" is
judged by uid), its generation after the patch and the annotation's value before and after.

What "revert" means here: the restart changes nothing a person must put back — the new pods run the same spec;
what must never be left behind is a rollout half done. So `revert` is "nothing to undo" once the rollout is
complete (kubectl rollout status' condition, drills/measure/rollout.py); while it is not — the run was
interrupted mid-rollout, or the new pods never became available — it rolls back as `kubectl rollout undo` does:
the template as it was (the annotation set back to its value before the drill), so the ReplicaSet that served
before the drill serves again. It never touches a template someone else changed since (another restartedAt:
not ours to undo). Idempotent: a complete rollout or a rolled-back template stays as it is. `verify` reads the
Deployment back: the rollout complete, whichever template it ended on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from drills.core.errors import InjectionFailed, RevertFailed
from drills.core.kube import obj_get
from drills.faults import NOTHING_TO_UNDO, Plan, Reach
from drills.faults.readback import Observation, Reading, read
from drills.measure.rollout import rollout_status

__all__ = ["KIND", "ANNOTATION", "RolloutRecord", "plan", "inject", "revert", "verify"]

log = logging.getLogger(__name__)

KIND = "rollout"
ANNOTATION = "kubectl.kubernetes.io/restartedAt"
ROLLED_BACK = "rolled back"


@dataclass(frozen=True)
class RolloutRecord:
    """Exactly what `inject` did; JSON-serialisable for the journal and the report."""

    namespace: str
    deployment: str
    injected_at: str  # cluster time (ISO, ms): the middle of the patch request
    restarted_at: str  # the annotation's value the patch wrote
    previous: str | None  # its value before (None: the template had none)
    generation: int  # the Deployment's generation after the patch (the controller must observe it)
    pods: tuple[str, ...]  # the Deployment's running pods at the restart
    uids: tuple[str, ...]
    strategy: dict  # the Deployment's strategy, as read (what the rollout was allowed to do)

    def to_dict(self) -> dict:
        return {**asdict(self), "pods": list(self.pods), "uids": list(self.uids)}


def plan(target, profile) -> Plan:
    """Read-only: the profile's inference Deployment, its template's restartedAt now and its running pods."""
    cluster, workload = target.cluster, profile.workloads.inference
    ns, name = workload.namespace, workload.deployment
    dep = _read(cluster, ns, name, f"cannot read deployment {ns}/{name}")
    replicas = int(obj_get(dep, "spec", "replicas", default=1) or 0)
    if replicas < 1:
        raise InjectionFailed(f"deployment {ns}/{name} has {replicas} replicas: nothing to restart; nothing injected")
    pods = _running(cluster, ns, workload.label_selector)
    previous = (obj_get(dep, "spec", "template", "metadata", "annotations", default=None) or {}).get(ANNOTATION)
    return Plan(KIND, f"{ns}/{name}", f"restart deployment {ns}/{name} as `kubectl rollout restart` does ({len(pods)} "
                                      f"running pods) on {cluster.name}",
                {"namespace": ns, "deployment": name, "previous": previous, "undo": "complete or roll back"},
                Reach(namespaces=(ns,), pods=len(pods)), spec=(ns, name, workload.label_selector, previous))


def inject(target, plan: Plan) -> RolloutRecord:
    """Patch the pod template's restartedAt (as kubectl does); the pods before it are read first."""
    cluster = target.cluster
    ns, name, selector, previous = plan.spec
    pods = _running(cluster, ns, selector)
    dep = _read(cluster, ns, name, f"cannot read deployment {ns}/{name}")
    stamp = datetime.fromtimestamp(cluster.clock.timestamp(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"spec": {"template": {"metadata": {"annotations": {ANNOTATION: stamp}}}}}
    try:
        window = cluster.around(lambda: _patch(cluster, ns, name, body))
    except Exception as err:  # noqa: BLE001 — one line for the user; nothing was changed
        raise InjectionFailed(f"could not restart deployment {ns}/{name}: {_reason(err)}; nothing injected") from None
    after = _read(cluster, ns, name, f"restarted deployment {ns}/{name} but cannot read it back")
    record = RolloutRecord(namespace=ns, deployment=name, injected_at=cluster.clock.iso(sum(window) / 2),
                           restarted_at=stamp, previous=previous,
                           generation=int(obj_get(after, "metadata", "generation", default=0) or 0),
                           pods=tuple(p["metadata"]["name"] for p in pods), uids=tuple(p["metadata"]["uid"] for p in pods),
                           strategy=dict(obj_get(dep, "spec", "strategy", default=None) or {}))
    log.info("restarted deployment %s/%s (restartedAt %s; %d pods before)", ns, name, stamp, len(pods))
    return record


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Nothing to undo once the rollout is complete; else roll back to the template before the drill (only if
    the template still carries our restart). Raises RevertFailed when the Deployment cannot be read or patched."""
    cluster, ns, name = target.cluster, undo["namespace"], undo["deployment"]
    dep = _read(cluster, ns, name, f"cannot read deployment {ns}/{name} to revert its restart", RevertFailed)
    done, _, sentence = rollout_status(dep)
    if done:
        log.info("deployment %s/%s: %s — nothing to undo", ns, name, sentence)
        return NOTHING_TO_UNDO
    ours = (record or {}).get("restarted_at")
    now = (obj_get(dep, "spec", "template", "metadata", "annotations", default=None) or {}).get(ANNOTATION)
    if ours is None or now != ours:  # not restarted by us (not injected, or someone restarted it since)
        log.info("deployment %s/%s: %s; its template is not the drill's (restartedAt %s): left as it is",
                 ns, name, sentence, now)
        return NOTHING_TO_UNDO
    previous = undo.get("previous")
    body = {"spec": {"template": {"metadata": {"annotations": {ANNOTATION: previous}}}}}  # None removes it
    try:
        _patch(cluster, ns, name, body)
    except Exception as err:  # noqa: BLE001
        raise RevertFailed(f"could not roll back deployment {ns}/{name} ({sentence}): {_reason(err)}; "
                           "run `drills revert` again, or `kubectl rollout undo`") from None
    log.warning("deployment %s/%s: %s — rolled back to the template before the drill", ns, name, sentence)
    return ROLLED_BACK


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read the Deployment back: its rollout (the drill's, or the roll-back) complete."""
    ns, name = undo["namespace"], undo["deployment"]

    def reader():
        dep = _read(target.cluster, ns, name, f"cannot read deployment {ns}/{name}")
        done, _, sentence = rollout_status(dep)
        rv = obj_get(dep, "metadata", "resourceVersion", default="?")
        return [Observation(f"deployment {ns}/{name}", sentence, f"deployments/{name} @ rv {rv} (status)", done)], \
            (() if done else (f"deployment {ns}/{name} rollout",))

    return read(KIND, f"{ns}/{name}", reader)


def _patch(cluster, ns: str, name: str, body: dict) -> None:
    """A strategic-merge patch (what kubectl sends); a null annotation value removes the key."""
    cluster.apps.patch_namespaced_deployment(name, ns, body, _preload_content=False)


def _read(cluster, ns: str, name: str, what: str, error=InjectionFailed) -> dict:
    try:
        return json.loads(cluster.apps.read_namespaced_deployment(name, ns, _preload_content=False).data)
    except Exception as err:  # noqa: BLE001
        raise error(f"{what}: {_reason(err)}") from None


def _running(cluster, ns: str, selector: str) -> list[dict]:
    try:
        resp = cluster.core.list_namespaced_pod(ns, label_selector=selector, _preload_content=False)
    except Exception as err:  # noqa: BLE001
        raise InjectionFailed(f"cannot list pods {selector} in {ns}: {_reason(err)}; nothing injected") from None
    pods = [p for p in json.loads(resp.data).get("items", [])
            if obj_get(p, "status", "phase") == "Running" and not obj_get(p, "metadata", "deletionTimestamp")]
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    if status is not None:
        return f"{status} {getattr(err, 'reason', '')}".strip()
    return str(err) or type(err).__name__
