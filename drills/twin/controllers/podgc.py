"""Pod garbage collection (the real kube-controller-manager's PodGC, in part): a pod terminating on a
node that does not exist has no kubelet to finish it, so it is force-deleted (grace 0).

The real PodGC also removes orphaned pods that are not terminating (after a 40 s quarantine); the
twin leaves those alone, since tests bind pods to node names the twin lacks to keep them still.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError, key_of

__all__ = ["PodGC"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")


class PodGC(Controller):
    name = "pod-garbage-collector"

    def setup(self) -> None:
        self.pods, self.nodes = self.ctx.informers.informer(PODS), self.ctx.informers.informer(NODES)
        self.pods.add_handler(self._on_pod)

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        if etype != "DELETED" and pod["metadata"].get("deletionTimestamp") and (pod.get("spec") or {}).get("nodeName"):
            self.enqueue(key_of(pod))

    async def reconcile(self, key: Hashable) -> None:
        pod = self.pods.get(*key)
        if pod is None or not pod["metadata"].get("deletionTimestamp"):
            return
        node_name = pod["spec"]["nodeName"]
        if self.nodes.get("", node_name) is not None or await self.ctx.client.get(NODES, None, node_name) is not None:
            return
        log.info("podgc: force-deleting %s/%s, terminating on node %s that does not exist", *key, node_name)
        try:
            await self.ctx.client.delete(PODS, *key, grace_period_s=0, uid=pod["metadata"].get("uid"))
        except ApiError as err:
            if err.status != 409:
                raise
