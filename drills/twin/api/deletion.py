"""DELETE as the real registry does it: preconditions, graceful pod termination, finalizers, namespaces
that terminate, and the garbage collector's cascade (done at once).

A mixin of Store: it reads and writes only through the store's own primitives (`get_entry`, `find`,
`_commit_update`, `_remove`, the keyspaces).
"""

from __future__ import annotations

import copy
import logging

from drills.core.clock import to_iso
from drills.twin.api import status as st
from drills.twin.api.resources import RESOURCES, ResourceType, by_path

__all__ = ["Deletion"]

log = logging.getLogger(__name__)

_NAMESPACES = by_path("", "v1", "namespaces")
_PODS = by_path("", "v1", "pods")


class Deletion:
    """Store.delete and what it sets in motion."""

    # Off: pods go at once. A kubelet component that finishes deletions (DELETE with grace 0) turns it on.
    graceful_pods = False
    # Off: a deleted namespace takes its contents at once. A namespace controller that empties it and
    # finalizes it (PUT namespaces/{name}/finalize) turns it on: the namespace is Terminating meanwhile.
    graceful_namespaces = False

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False,
               preconditions: dict | None = None, propagation: str | None = None,
               grace_seconds: int | None = None) -> dict:
        """Delete now, or mark for deletion while finalizers remain (or while a pod terminates gracefully).

        Unless `propagation` is "Orphan", dependents (ownerReferences to this uid) go too — the garbage
        collector's job, done at once; deleting a namespace deletes its contents. With `graceful_pods`
        on, a running pod on a node only gets deletionTimestamp = now + grace; its kubelet deletes it
        for good with grace 0, as on a real cluster.
        """
        entry = self.get_entry(rt, namespace, name)
        old = entry.obj
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise st.conflict(rt.plural, name, rt.group,
                              f'Precondition failed: UID in precondition: {pre["uid"]}, UID in object meta: '
                              f'{old["metadata"]["uid"]}')
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != old["metadata"]["resourceVersion"]:
            raise st.conflict(rt.plural, name, rt.group)
        grace = self._pod_grace(rt, old, grace_seconds)
        if grace:
            meta = old["metadata"]
            if meta.get("deletionTimestamp") and (meta.get("deletionGracePeriodSeconds") or 0) <= grace:
                return old
            new = copy.copy(old)
            new["metadata"] = dict(meta, deletionTimestamp=to_iso(self.clock.timestamp() + grace),
                                   deletionGracePeriodSeconds=grace)
            return self._commit_update(rt, entry, new, dry_run)
        if rt is _NAMESPACES and self.graceful_namespaces and (old.get("spec") or {}).get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.copy(old)
            new["metadata"] = dict(old["metadata"], deletionTimestamp=self.now_iso(), deletionGracePeriodSeconds=0)
            new["status"] = dict(old.get("status") or {}, phase="Terminating")
            return self._commit_update(rt, entry, new, dry_run)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionGracePeriodSeconds"):
                return old
            new = copy.copy(old)
            new["metadata"] = dict(old["metadata"], deletionTimestamp=self.now_iso(), deletionGracePeriodSeconds=0)
            return self._commit_update(rt, entry, new, dry_run)
        if dry_run:
            return old
        if rt is _NAMESPACES:
            self._delete_namespace_contents(name)
        gone = self._remove(rt, entry)
        if propagation != "Orphan" and rt.kind != "Pod":
            self._delete_dependents(old["metadata"]["uid"], old["metadata"].get("namespace") or "", propagation)
        return gone

    def _pod_grace(self, rt: ResourceType, pod: dict, requested: int | None) -> int:
        """Seconds of graceful termination this delete gets (0: delete now)."""
        if not self.graceful_pods or rt is not _PODS:
            return 0
        spec, phase = pod.get("spec") or {}, (pod.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if requested is None or requested < 0:
            requested = spec.get("terminationGracePeriodSeconds", 30)
        return max(int(requested or 0), 0)

    def _delete_dependents(self, uid: str, ns: str, propagation: str | None) -> None:
        for rt in RESOURCES:
            for entry in list(self._tables[rt].names(ns).values()):
                refs = entry.obj["metadata"].get("ownerReferences") or ()
                if any(ref.get("uid") == uid for ref in refs):
                    meta = entry.obj["metadata"]
                    if self.find(rt, meta.get("namespace"), meta["name"]) is not None:
                        self.delete(rt, meta.get("namespace"), meta["name"], propagation=propagation)

    def _delete_namespace_contents(self, ns: str) -> None:
        for rt in RESOURCES:
            if rt.namespaced:
                for entry in list(self._tables[rt].names(ns).values()):
                    self._remove(rt, entry)
