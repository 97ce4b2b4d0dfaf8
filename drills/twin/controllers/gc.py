"""Garbage collector: delete dependents whose owners are all gone.

The twin's API server already cascades a delete to dependents at once; this catches what slips past
it, as the real garbage collector does: a dependent created after its owner was deleted (a controller
racing the delete), or one whose ownerReference uid no longer matches the named owner (re-created).
Owners are looked up in the shared informers of the kinds the workload controllers own.
"""

from __future__ import annotations

import logging

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller

__all__ = ["GarbageCollector"]

log = logging.getLogger(__name__)

# dependents watched → their possible owners (apiVersion, kind)
_DEPENDENTS = {
    ("v1", "Pod"): (("apps/v1", "ReplicaSet"), ("v1", "ReplicationController"), ("batch/v1", "Job"),
                    ("batch.volcano.sh/v1alpha1", "Job")),
    ("apps/v1", "ReplicaSet"): (("apps/v1", "Deployment"),),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): (("batch.volcano.sh/v1alpha1", "Job"),),
}


class GarbageCollector(Controller):
    name = "garbage-collector"

    def setup(self) -> None:
        inf = self.ctx.informers
        self.owners = {}
        for owners in _DEPENDENTS.values():
            for api_version, kind in owners:
                self.owners[(api_version, kind)] = inf.informer(by_kind(api_version, kind))
        self.dependents = {}
        for (api_version, kind) in _DEPENDENTS:
            rt = by_kind(api_version, kind)
            informer = inf.informer(rt)
            self.dependents[(api_version, kind)] = informer
            informer.add_handler(self._handler(api_version, kind))
        self.initial_delay = 1.0  # twin seconds: owners' informers may not have seen a brand-new owner yet

    def _handler(self, api_version: str, kind: str):
        def on_event(etype: str, obj: dict, old: dict | None) -> None:
            if etype != "DELETED" and obj["metadata"].get("ownerReferences"):
                key = (api_version, kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                self.enqueue_after(key, self.initial_delay)
        return on_event

    async def reconcile(self, key) -> None:
        api_version, kind, ns, name = key
        obj = self.dependents[(api_version, kind)].get(ns, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = obj["metadata"].get("ownerReferences") or ()
        if not refs:
            return
        for ref in refs:
            informer = self.owners.get((ref.get("apiVersion"), ref.get("kind")))
            if informer is None:
                return  # an owner kind we do not track: assume it exists
            owner = informer.get(ns, ref.get("name", ""))
            if owner is not None and owner["metadata"].get("uid") == ref.get("uid"):
                return
        # every owner is gone: confirm with a live read before deleting (informers may lag)
        for ref in refs:
            rt = by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            live = await self.ctx.client.get(rt, ns, ref.get("name", ""))
            if live is not None and live["metadata"].get("uid") == ref.get("uid"):
                return
        log.info("garbage collector: deleting %s %s/%s (owners gone)", kind, ns, name)
        await self.ctx.client.delete(by_kind(api_version, kind), ns, name)
