"""Namespace lifecycle: a deleted namespace is Terminating until its contents are gone, as on a real cluster.

The API server only marks the namespace (deletionTimestamp, phase Terminating, spec.finalizers
["kubernetes"]) and refuses new content in it; this controller deletes every namespaced object in it
(pods terminate gracefully, finalizers hold their objects), requeues until nothing is left, then
clears spec.finalizers through `PUT namespaces/{name}/finalize`, which removes the namespace.
A live namespace gets its `default` ServiceAccount (the serviceaccounts controller's job).
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import RESOURCES, by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError

__all__ = ["NamespaceController"]

log = logging.getLogger(__name__)

NAMESPACES = by_kind("v1", "Namespace")
SERVICE_ACCOUNTS = by_kind("v1", "ServiceAccount")
_RECHECK_S = 1.0  # twin seconds between sweeps of a namespace still holding objects


class NamespaceController(Controller):
    name = "namespace"

    def setup(self) -> None:
        self.namespaces = self.ctx.informers.informer(NAMESPACES)
        self.namespaces.add_handler(self._on_namespace)

    def _on_namespace(self, etype: str, ns: dict, old: dict | None) -> None:
        if etype == "ADDED" or (etype == "MODIFIED" and ns["metadata"].get("deletionTimestamp")):
            self.enqueue(ns["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        ns = await self.ctx.client.get(NAMESPACES, None, name)
        if ns is None:
            return
        if not ns["metadata"].get("deletionTimestamp"):
            await self._default_account(name)
            return
        left = 0
        for rt in RESOURCES:
            if not rt.namespaced or "list" not in rt.verbs:
                continue
            items, _ = await self.ctx.client.list(rt, name)
            left += len(items)
            for obj in items:
                if not obj["metadata"].get("deletionTimestamp"):
                    await self.ctx.client.delete(rt, name, obj["metadata"]["name"])
        if left:
            self.enqueue_after(name, _RECHECK_S)
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                "spec": {"finalizers": [f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != "kubernetes"]}}
        try:
            await self.ctx.client.replace(NAMESPACES, None, name, body, sub="finalize")
        except ApiError as err:
            if err.status != 404:
                raise
        log.info("namespace %s is empty: finalized", name)

    async def _default_account(self, namespace: str) -> None:
        if await self.ctx.client.get(SERVICE_ACCOUNTS, namespace, "default") is not None:
            return
        try:
            await self.ctx.client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "default", "namespace": namespace}})
        except ApiError as err:
            if err.status not in (403, 409):  # 403: it began terminating meanwhile
                raise
