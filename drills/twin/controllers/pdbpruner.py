"""A deploy tool that drops the serving PDB during an incident (the defect `pdb-pruned`).

A Helm upgrade or a GitOps sync that runs while replicas are being replaced, from a chart whose PodDisruptionBudget
was removed (or renamed), prunes the live PDB. For a drill that is the platform changed under it: every check of the
kill passes, the replicas come back — and the Deployment has no disruption budget any more, so the next node drain
takes every replica at once. The twin's pruner acts only through the API: on a pod's DELETED event, each PDB of the
pod's namespace whose selector matches the pod's labels is deleted `after` twin seconds later, with an Event.
Off unless the profile sets `pdb_pruner`.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event

__all__ = ["PdbPruner"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
PDBS = by_kind("policy/v1", "PodDisruptionBudget")


class PdbPruner(Controller):
    name = "pdb-pruner"

    def setup(self) -> None:
        spec = getattr(self.ctx.profile, "pdb_pruner", None)
        self.after_s = None if spec is None else float(spec.after)
        if self.after_s is not None:
            self.pdbs = self.ctx.informers.informer(PDBS)
            self.pods = self.ctx.informers.informer(PODS)
            self.pods.add_handler(self._on_pod)

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        if etype != "DELETED":
            return
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        for (ns, name), pdb in list(self.pdbs.cache.items()):
            wanted = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if ns == meta.get("namespace") and wanted and all(labels.get(k) == v for k, v in wanted.items()):
                self.enqueue_after(("prune", ns, name), self.after_s)

    async def reconcile(self, key: Hashable) -> None:
        _, namespace, name = key
        pdb = self.pdbs.get(namespace, name)
        if pdb is None:
            return
        try:
            await self.ctx.client.delete(PDBS, namespace, name)
        except ApiError as err:
            if err.status == 404:
                return
            raise
        await record_event(self.ctx.client, pdb, "Pruned", f"deploy sync: {namespace}/{name} is not in the chart; "
                           "deleted", type="Normal", component="deploy-sync", clock=self.ctx.clock)
        log.info("pdb-pruner: deleted %s/%s", namespace, name)
