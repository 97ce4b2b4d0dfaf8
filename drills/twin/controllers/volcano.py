"""Volcano Job controller (batch.volcano.sh/v1alpha1): PodGroup, pods per task, lifecycle policies,
phases and retries — the state machine of volcano-sh/volcano pkg/controllers/job/state.

Pod events become requests (PodEvicted when a pod is deleted or starts terminating, PodFailed,
TaskCompleted, else OutOfSync); `apply_policies` picks the action (no matching policy: SyncJob, as
upstream). RestartJob kills every pod (new uids on re-creation), bumps `status.version` (requests
from older pods then only sync) and `retryCount`; Restarting → Pending once the old pods are gone
(and `timings.volcano_restart_delay` has passed) → Running when minAvailable pods run; a restart
requested with retryCount ≥ maxRetry fails the job. Every phase change appends a condition.
"""

from __future__ import annotations

import logging

from drills.core.clock import parse_iso, to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.podutil import OwnerIndex
from drills.twin.controllers.volcano_objects import (JOB_VERSION, SYNC, TASK_SPEC, Request, apply_policies,
                                                     count_pods, go_duration, job_pod, max_retry, min_available,
                                                     pod_name, podgroup, podgroup_name, total_replicas)

__all__ = ["VolcanoJobController"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
JOBS = by_kind("batch.volcano.sh/v1alpha1", "Job")
PODGROUPS = by_kind("scheduling.volcano.sh/v1beta1", "PodGroup")
_COMPONENT = "vc-controller-manager"
_RETAIN_NONE: frozenset[str] = frozenset()
_RETAIN_SOFT = frozenset({"Succeeded", "Failed"})
_KILLING = {"RestartJob": "Restarting", "AbortJob": "Aborting", "TerminateJob": "Terminating",
            "CompleteJob": "Completing"}
_FINAL = {"Aborting": "Aborted", "Terminating": "Terminated", "Completing": "Completed"}


class VolcanoJobController(Controller):
    name = "volcano-job"

    def setup(self) -> None:
        self.jobs = self.ctx.informers.informer(JOBS)
        self.pods = self.ctx.informers.informer(PODS)
        self.pgs = self.ctx.informers.informer(PODGROUPS)
        self.index = OwnerIndex()
        self.requests: dict[tuple[str, str], list[Request]] = {}
        self.latest: dict[tuple[str, str], dict] = {}  # our own last write: the informer may lag behind it
        self.jobs.add_handler(self._on_job)
        self.pods.add_handler(self._on_pod)
        self.pgs.add_handler(self._on_podgroup)
        timings = getattr(self.ctx.profile, "timings", None)
        self.restart_delay = float(getattr(timings, "volcano_restart_delay", 0.0) or 0.0)

    # -- events → requests --------------------------------------------------------------------------
    def _on_job(self, etype: str, obj: dict, old: dict | None) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if etype == "DELETED":
            self.latest.pop(key, None)
            self.requests.pop(key, None)
            return
        if old is None or old.get("spec") != obj.get("spec") or _phase(old) != _phase(obj):
            self._request(key, Request())

    def _on_pod(self, etype: str, obj: dict, old: dict | None) -> None:
        self.index.update(etype, obj)
        meta = obj["metadata"]
        ann = meta.get("annotations") or {}
        refs = [r for r in meta.get("ownerReferences") or () if r.get("controller") and r.get("kind") == "Job"
                and r.get("apiVersion", "").startswith("batch.volcano.sh/")]
        if not refs or JOB_VERSION not in ann:
            return
        key = (meta["namespace"], refs[0]["name"])
        version = int(ann.get(JOB_VERSION) or 0)
        task = ann.get(TASK_SPEC, "")
        phase = (obj.get("status") or {}).get("phase")
        old_phase = ((old or {}).get("status") or {}).get("phase")
        if etype == "DELETED" or (meta.get("deletionTimestamp") and not (old or {}).get("metadata", {}).get(
                "deletionTimestamp")):
            self._request(key, Request("PodEvicted", task, None, version, meta["name"]))
        elif meta.get("deletionTimestamp"):
            self._request(key, Request())
        elif phase == "Failed" and old_phase != "Failed":
            self._request(key, Request("PodFailed", task, _exit_code(obj), version, meta["name"]))
        elif phase == "Succeeded" and old_phase != "Succeeded" and self._task_completed(key, refs[0]["uid"], task):
            self._request(key, Request("TaskCompleted", task, None, version, meta["name"]))
        else:
            self._request(key, Request())

    def _on_podgroup(self, etype: str, obj: dict, old: dict | None) -> None:
        if etype == "DELETED":
            for ref in obj["metadata"].get("ownerReferences") or ():
                if ref.get("controller") and ref.get("kind") == "Job":
                    self._request((obj["metadata"]["namespace"], ref["name"]), Request())

    def _request(self, key: tuple[str, str], req: Request) -> None:
        self.requests.setdefault(key, []).append(req)
        self.enqueue(key)

    def _task_completed(self, key: tuple[str, str], job_uid: str, task: str) -> bool:
        job = self._job(key)
        replicas = next((int(t.get("replicas", 0)) for t in (job or {}).get("spec", {}).get("tasks") or ()
                         if t.get("name") == task), 0)
        done = sum(1 for p in self._pods(job_uid) if (p["metadata"].get("annotations") or {}).get(TASK_SPEC) == task
                   and (p.get("status") or {}).get("phase") == "Succeeded")
        return replicas > 0 and done >= replicas

    # -- reconcile -----------------------------------------------------------------------------------
    async def reconcile(self, key) -> None:
        requests = self.requests.pop(key, []) or [Request()]
        job = self._job(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        if "version" not in (job.get("status") or {}):
            job = await self._initiate(job)
        action, cause = SYNC, None
        for req in requests:
            action = apply_policies(job, req)
            if action != SYNC:
                cause = req
                break
        if action != SYNC:
            await record_event(self.ctx.client, job, action, f"Start to execute action {action} ",
                               component=_COMPONENT, clock=self.ctx.clock)
        await self._execute(key, job, action, cause)

    async def _execute(self, key, job: dict, action: str, cause: Request | None) -> None:
        phase = _phase(job)
        if phase in ("Pending", "Running") and action in _KILLING:
            target = _KILLING[action]

            def update(status: dict) -> bool:
                if target == "Restarting":
                    status["retryCount"] = int(status.get("retryCount", 0) or 0) + 1
                status["state"] = _state(target, cause)
                return True

            retain = _RETAIN_NONE if action == "RestartJob" else _RETAIN_SOFT
            await self._kill(key, job, retain, update)
        elif phase == "Restarting":
            await self._kill(key, job, _RETAIN_NONE, lambda status: self._after_restart(key, job, status))
        elif phase in _FINAL:
            await self._kill(key, job, _RETAIN_SOFT, lambda status: _finish(phase, status))
        elif phase in ("Failed", "Aborted", "Completed", "Terminated"):
            await self._kill(key, job, _RETAIN_SOFT, None)
        else:
            await self._sync(key, job, phase)

    def _after_restart(self, key, job: dict, status: dict) -> bool:
        if int(status.get("retryCount", 0) or 0) >= max_retry(job):
            status["state"] = _state("Failed", None, "MaxRetryExceeded",
                                     f"job restarted {status.get('retryCount')} times (maxRetry {max_retry(job)})")
            return True
        if total_replicas(job) - int(status.get("terminating", 0)) < min_available(job):
            return False
        since = (job.get("status") or {}).get("state", {}).get("lastTransitionTime")
        waited = self.ctx.clock.timestamp() - parse_iso(since).timestamp() if since else self.restart_delay
        if waited < self.restart_delay:
            self.enqueue_after(key, self.restart_delay - waited)
            return False
        status["state"] = _state("Pending")
        return True

    # -- KillJob / SyncJob ---------------------------------------------------------------------------
    async def _kill(self, key, job: dict, retain: frozenset[str], update) -> None:
        status = dict(job.get("status") or {})
        last_retry = int(status.get("retryCount", 0) or 0) >= max_retry(job) - 1
        keep = _RETAIN_SOFT if last_retry else retain
        kept = []
        terminating = 0
        for pod in self._pods(job["metadata"]["uid"]):
            if pod["metadata"].get("deletionTimestamp"):
                terminating += 1
            elif (pod.get("status") or {}).get("phase") in keep:
                kept.append(pod)
            else:
                try:
                    await self.ctx.client.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
                except ApiError as err:
                    await record_event(self.ctx.client, job, "FailedDeletePod", f"Error deleting pods: {err}",
                                       "Warning", _COMPONENT, clock=self.ctx.clock)
                    raise
                terminating += 1
        counts, per_task = count_pods(kept)
        counts.terminating += terminating
        status.update(_counts(counts), taskStatusCount=per_task, version=int(status.get("version", 0) or 0) + 1)
        await self._write(key, job, status, update)
        try:
            await self.ctx.client.delete(PODGROUPS, job["metadata"]["namespace"], podgroup_name(job))
        except ApiError as err:
            log.debug("podgroup of %s not deleted: %s", key, err)

    async def _sync(self, key, job: dict, phase: str) -> None:
        await self._ensure_podgroup(job)
        pods = {p["metadata"]["name"]: p for p in self._pods(job["metadata"]["uid"])}
        wanted = set()
        for task in job["spec"].get("tasks") or ():
            for i in range(int(task.get("replicas", 0) or 0)):
                name = pod_name(job["metadata"]["name"], task["name"], i)
                wanted.add(name)
                if name not in pods:
                    try:
                        pods[name] = await self.ctx.client.create(PODS, job_pod(job, task, i))
                    except ApiError as err:
                        if err.status != 409:
                            await record_event(self.ctx.client, job, "FailedCreatePod",
                                               f"Error creating pods: {err.message}", "Warning", _COMPONENT,
                                               clock=self.ctx.clock)
                            raise
        for name, pod in pods.items():
            if name not in wanted and not pod["metadata"].get("deletionTimestamp"):
                await self.ctx.client.delete(PODS, pod["metadata"]["namespace"], name)
        counts, per_task = count_pods([p for n, p in pods.items() if n in wanted])
        status = dict(job.get("status") or {})
        status.update(_counts(counts), taskStatusCount=per_task, minAvailable=min_available(job))

        def update(st: dict) -> bool:
            return _sync_phase(job, phase, st)

        await self._write(key, job, status, update)
        await self._podgroup_status(job, counts)

    async def _write(self, key, job: dict, status: dict, update) -> None:
        now_iso = to_iso(self.ctx.clock.now())
        created = parse_iso(job["metadata"]["creationTimestamp"]).timestamp()
        status["runningDuration"] = go_duration(self.ctx.clock.timestamp() - created)
        status.setdefault("retryCount", 0)
        status.setdefault("version", 0)
        status.setdefault("minAvailable", min_available(job))
        before = _phase(job)
        if update is not None and update(status):
            status["state"] = dict(status["state"], lastTransitionTime=now_iso)
            status["conditions"] = list(status.get("conditions") or ()) + [
                {"status": status["state"]["phase"], "lastTransitionTime": now_iso}]
        old = job.get("status") or {}
        if all(old.get(k) == v for k, v in status.items() if k != "runningDuration"):
            return
        body = dict(status, state={"reason": None, "message": None, **status.get("state", {})})  # merge: clear
        patched = await self.ctx.client.patch(JOBS, key[0], key[1], {"status": body}, sub="status")
        if patched is not None:
            self.latest[key] = patched
            after = _phase(patched)
            if after != before:
                log.info("volcano job %s/%s: %s → %s (retryCount %s, version %s)", key[0], key[1], before, after,
                         status.get("retryCount"), status.get("version"))
                self.enqueue(key)

    async def _initiate(self, job: dict) -> dict:
        """initJobStatus: Pending with its condition (the API's defaulting may have set the phase already)."""
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        state = (job.get("status") or {}).get("state") or {}
        when = state.get("lastTransitionTime") or to_iso(self.ctx.clock.now())
        status = {"state": {"phase": "Pending", "lastTransitionTime": when},
                  "minAvailable": min_available(job), "retryCount": 0, "version": 0,
                  "conditions": [{"status": "Pending", "lastTransitionTime": when}]}
        patched = await self.ctx.client.patch(JOBS, key[0], key[1], {"status": status}, sub="status")
        if patched is not None:
            self.latest[key] = patched
            return patched
        return job

    async def _ensure_podgroup(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], podgroup_name(job)
        if self.pgs.get(ns, name) is not None:
            return
        try:
            await self.ctx.client.create(PODGROUPS, podgroup(job))
        except ApiError as err:
            if err.status != 409:
                raise

    async def _podgroup_status(self, job: dict, counts) -> None:
        """Volcano's scheduler writes these; the twin's scheduler only binds, so the job controller keeps them."""
        ns, name = job["metadata"]["namespace"], podgroup_name(job)
        pg = self.pgs.get(ns, name)
        if pg is None:
            return
        placed = counts.running + counts.succeeded + counts.failed
        phase = "Running" if placed >= min_available(job) and counts.running else (
            "Completed" if counts.succeeded >= total_replicas(job) > 0 else "Pending")
        want = {"phase": phase, "running": counts.running, "succeeded": counts.succeeded, "failed": counts.failed}
        cur = pg.get("status") or {}
        if any(cur.get(k) != v for k, v in want.items()):
            await self.ctx.client.patch(PODGROUPS, ns, name, {"status": want}, sub="status")

    # -- lookups -------------------------------------------------------------------------------------
    def _job(self, key) -> dict | None:
        cached = self.jobs.get(*key)
        mine = self.latest.get(key)
        if cached is None:
            return None
        if mine is not None and mine["metadata"]["uid"] == cached["metadata"]["uid"] and \
                int(mine["metadata"]["resourceVersion"]) > int(cached["metadata"]["resourceVersion"]):
            return mine
        return cached

    def _pods(self, job_uid: str) -> list[dict]:
        return [p for p in (self.pods.get(*k) for k in self.index.keys(job_uid)) if p is not None]


def _sync_phase(job: dict, phase: str, status: dict) -> bool:
    """Pending → Running at minAvailable placed pods; Running → Completed/Failed when all pods finished."""
    if phase == "Pending":
        placed = status["running"] + status["succeeded"] + status["failed"]
        if min_available(job) <= placed:
            status["state"] = _state("Running")
            return True
        return False
    if phase == "Running":
        replicas = total_replicas(job)
        if replicas and status["succeeded"] + status["failed"] == replicas:
            done = "Completed" if status["succeeded"] >= min_available(job) else "Failed"
            status["state"] = _state(done)
            return True
    return False


def _finish(phase: str, status: dict) -> bool:
    if status.get("terminating") or status.get("pending") or status.get("running"):
        return False
    status["state"] = _state(_FINAL[phase])
    return True


def _state(phase: str, cause: Request | None = None, reason: str = "", message: str = "") -> dict:
    out = {"phase": phase}
    if cause is not None:
        reason = reason or cause.event
        message = message or f"{cause.event} on pod {cause.pod}" + (
            f" (exit code {cause.exit_code})" if cause.exit_code is not None else "")
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _counts(counts) -> dict:
    return {"pending": counts.pending, "running": counts.running, "succeeded": counts.succeeded,
            "failed": counts.failed, "unknown": counts.unknown, "terminating": counts.terminating}


def _phase(job: dict | None) -> str:
    return (((job or {}).get("status") or {}).get("state") or {}).get("phase", "")


def _exit_code(pod: dict) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        term = (cs.get("state") or {}).get("terminated")
        if term is not None:
            return int(term.get("exitCode", 0))
    return None
