"""A batch resubmitter that puts back a Volcano Job someone deleted before it finished (the defect `burst-resubmitted`).

Sites submit their night's batch through something that keeps it submitted: a workflow engine's retry (Argo
Workflows' `retryStrategy` on a resource template), a pipeline's "ensure submitted" loop, a cron script that
re-applies a directory of Job manifests. For a drill that is a revert that does not hold: the noisy-neighbour drill
deletes its burst, the API answers OK, and `resubmit_after` twin seconds later every job is back, asking for the
serving GPUs again. The twin's resubmitter acts only through the API: on a Job's DELETED event, unless the Job had
finished (Completed, Failed, Terminated, Aborted), it creates the same Job again — name, labels, annotations and
spec — and records an Event. Off unless the profile sets `batch_resubmitter`.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event

__all__ = ["BatchResubmitter", "FINISHED"]

log = logging.getLogger(__name__)

JOBS = by_kind("batch.volcano.sh/v1alpha1", "Job")
FINISHED = frozenset({"Completed", "Failed", "Terminated", "Aborted"})  # Volcano's final phases: nothing to redo


class BatchResubmitter(Controller):
    name = "batch-resubmitter"

    def setup(self) -> None:
        spec = getattr(self.ctx.profile, "batch_resubmitter", None)
        self.after_s = None if spec is None else float(spec.resubmit_after)
        self._deleted: dict[tuple[str, str], dict] = {}  # (namespace, name) → the Job as it was submitted
        if self.after_s is not None:
            self.jobs = self.ctx.informers.informer(JOBS)
            self.jobs.add_handler(self._on_job)

    def _on_job(self, etype: str, job: dict, old: dict | None) -> None:
        if etype != "DELETED":
            return
        phase = ((job.get("status") or {}).get("state") or {}).get("phase")
        if phase in FINISHED:
            return
        meta = job["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        self._deleted[key] = {"apiVersion": job.get("apiVersion", "batch.volcano.sh/v1alpha1"), "kind": "Job",
                              "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations")
                                           if meta.get(k)},
                              "spec": job.get("spec") or {}}
        self.enqueue_after(("resubmit", *key), self.after_s)

    async def reconcile(self, key: Hashable) -> None:
        _, namespace, name = key
        body = self._deleted.pop((namespace, name), None)
        if body is None or self.jobs.get(namespace, name) is not None:
            return
        try:
            made = await self.ctx.client.create(JOBS, body, namespace)
        except ApiError as err:
            if err.status == 409:  # someone submitted it again first
                return
            raise
        await record_event(self.ctx.client, made, "Resubmitted", f"batch-resubmitter: {namespace}/{name} was deleted "
                           "before it finished; submitted again", type="Normal", component="batch-resubmitter",
                           clock=self.ctx.clock)
        log.info("batch-resubmitter: submitted %s/%s again (%g s after its deletion)", namespace, name, self.after_s)
