"""batch/v1 Job controller, minimal: run up to `parallelism` pods until `completions` succeed, or
fail the Job once more than `backoffLimit` pods failed (conditions Complete / Failed as upstream)."""

from __future__ import annotations

import logging

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.podutil import OwnerIndex, is_ready, pod_from_template, set_condition

__all__ = ["BatchJobController"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
JOBS = by_kind("batch/v1", "Job")
_COMPONENT = "job-controller"


class BatchJobController(Controller):
    name = "job"

    def setup(self) -> None:
        self.jobs = self.ctx.informers.informer(JOBS)
        self.pods = self.ctx.informers.informer(PODS)
        self.index = OwnerIndex()
        self.created: dict[str, int] = {}  # job uid → pods created but not yet seen (expectations)
        self.jobs.add_handler(lambda e, o, _old: e != "DELETED" and self.enqueue(
            (o["metadata"]["namespace"], o["metadata"]["name"])))
        self.pods.add_handler(self._on_pod)

    def _on_pod(self, etype: str, obj: dict, old: dict | None) -> None:
        uid = self.index.update(etype, obj)
        if not uid:
            return
        ref = next(r for r in obj["metadata"]["ownerReferences"] if r.get("controller"))
        if ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
            if etype == "ADDED" and self.created.get(uid):
                self.created[uid] -= 1
            self.enqueue((obj["metadata"]["namespace"], ref["name"]))

    async def reconcile(self, key) -> None:
        ns, name = key
        job = self.jobs.get(ns, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec, cur = job.get("spec") or {}, job.get("status") or {}
        pods = [p for p in (self.pods.get(*k) for k in self.index.keys(job["metadata"]["uid"])) if p]
        phase = lambda p: (p.get("status") or {}).get("phase")  # noqa: E731
        active = [p for p in pods
                  if phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")]
        succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
        failed = sum(1 for p in pods if phase(p) == "Failed")
        now = to_iso(self.ctx.clock.now())
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                       for c in cur.get("conditions") or ())
        completions = spec.get("completions")
        status = {"active": len(active), "succeeded": succeeded, "failed": failed,
                  "ready": sum(1 for p in active if is_ready(p)), "terminating": 0,
                  "startTime": cur.get("startTime") or now, "uncountedTerminatedPods": {}}
        conds = list(cur.get("conditions") or ())
        if not finished and not spec.get("suspend"):
            if failed > int(spec.get("backoffLimit", 6)):
                for pod in active:
                    await self.ctx.client.delete(PODS, ns, pod["metadata"]["name"])
                status["active"] = 0
                for ctype in ("FailureTarget", "Failed"):
                    conds = set_condition(conds, {"type": ctype, "status": "True", "reason": "BackoffLimitExceeded",
                                                  "message": "Job has reached the specified backoff limit",
                                                  "lastProbeTime": now}, now)
                await record_event(self.ctx.client, job, "BackoffLimitExceeded",
                                   "Job has reached the specified backoff limit", "Warning", _COMPONENT,
                                   clock=self.ctx.clock)
            elif (completions is not None and succeeded >= int(completions)) or (completions is None and succeeded):
                for ctype in ("SuccessCriteriaMet", "Complete"):
                    conds = set_condition(conds, {"type": ctype, "status": "True", "reason": "CompletionsReached",
                                                  "message": "Reached expected number of succeeded pods",
                                                  "lastProbeTime": now}, now)
                status["completionTime"] = now
                await record_event(self.ctx.client, job, "Completed", "Job completed", component=_COMPONENT,
                                   clock=self.ctx.clock)
            else:
                await self._start_pods(job, len(active), succeeded)
        if conds:
            status["conditions"] = conds
        if cur.get("completionTime"):
            status["completionTime"] = cur["completionTime"]
        if any(cur.get(k) != v for k, v in status.items()):
            await self.ctx.client.patch(JOBS, ns, name, {"status": status}, sub="status")

    async def _start_pods(self, job: dict, active: int, succeeded: int) -> None:
        spec, uid = job["spec"], job["metadata"]["uid"]
        parallelism = int(spec.get("parallelism", 1) or 0)
        completions = spec.get("completions")
        want = parallelism if completions is None else min(parallelism, int(completions) - succeeded)
        missing = want - active - self.created.get(uid, 0)
        if missing <= 0:
            return
        name = job["metadata"]["name"]
        extra = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
        self.created[uid] = self.created.get(uid, 0) + missing
        for i in range(missing):
            pod = pod_from_template(spec.get("template") or {}, job, extra_labels=extra)
            try:
                created = await self.ctx.client.create(PODS, pod)
            except ApiError:
                self.created[uid] -= missing - i
                raise
            await record_event(self.ctx.client, job, "SuccessfulCreate", f'Created pod: {created["metadata"]["name"]}',
                               component=_COMPONENT, clock=self.ctx.clock)
