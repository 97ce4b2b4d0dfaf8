"""The twin's object store: what etcd plus the generic registry are to a real API server.

One global, monotonically increasing resourceVersion; objects as dicts indexed by resource,
namespace and name; a bounded per-resource event history so watches can resume (older → 410 Gone);
watchers fed through asyncio queues; per-pod log buffers. Single-threaded: call it from the loop.
Stored dicts are never mutated after they are stored — every write stores a new dict — so readers
may keep references, but must not change them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from drills.core.clock import Clock, DilatedClock, to_iso
from drills.twin.api import status as st
from drills.twin.api.defaults import apply_defaults
from drills.twin.api.logs import PodLogs
from drills.twin.api.resources import RESOURCES, ResourceType, by_path
from drills.twin.api.validation import validate, validate_name

__all__ = ["Store", "Entry", "WatchEvent", "Watcher", "DEFAULT_HISTORY"]

log = logging.getLogger(__name__)

DEFAULT_HISTORY = 20000  # events kept per resource for watch resume
_NAMESPACES = by_path("", "v1", "namespaces")
_PODS = by_path("", "v1", "pods")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the real generateName suffix uses
_UNCHANGED_META = ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "generation", "resourceVersion")


class Entry:
    """One stored version of an object and its JSON encoding, computed once and reused by every reader."""

    __slots__ = ("obj", "_raw")

    def __init__(self, obj: dict):
        self.obj = obj
        self._raw: bytes | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = json.dumps(self.obj, separators=(",", ":")).encode()
        return self._raw


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    entry: Entry
    old: Entry | None = None


@dataclass(eq=False)
class Watcher:
    """A subscription: events for one resource (one namespace or all) that pass `predicate`."""

    rt: ResourceType
    namespace: str | None
    predicate: Callable[[dict], bool]
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def offer(self, ev: WatchEvent) -> None:
        """Translate a store event into what this watcher sees (selector transitions become ADDED/DELETED)."""
        meta = ev.entry.obj.get("metadata", {})
        if self.namespace and meta.get("namespace") != self.namespace:
            return
        now = self.predicate(ev.entry.obj)
        if ev.type == "MODIFIED" and ev.old is not None:
            before = self.predicate(ev.old.obj)
            if now and not before:
                self.queue.put_nowait(("ADDED", ev.entry))
            elif before and not now:
                self.queue.put_nowait(("DELETED", ev.entry))
            elif now:
                self.queue.put_nowait(("MODIFIED", ev.entry))
        elif now:
            self.queue.put_nowait((ev.type, ev.entry))


class Store:
    """In-memory objects of every resource type the twin serves."""

    def __init__(self, clock: Clock | None = None, history: int = DEFAULT_HISTORY):
        self.clock = clock or DilatedClock()
        self._rv = 0
        self._objects: dict[ResourceType, dict[str, dict[str, Entry]]] = {rt: {} for rt in RESOURCES}
        self._history: dict[ResourceType, deque[WatchEvent]] = {rt: deque(maxlen=history) for rt in RESOURCES}
        self._compacted: dict[ResourceType, int] = {rt: 0 for rt in RESOURCES}
        self._watchers: dict[ResourceType, set[Watcher]] = {rt: set() for rt in RESOURCES}
        self.logs = PodLogs(self.clock)
        # Off: pods go at once. A kubelet component that finishes deletions (DELETE with grace 0) turns it on.
        self.graceful_pods = False
        # Off: a deleted namespace takes its contents at once. A namespace controller that empties it and
        # finalizes it (PUT namespaces/{name}/finalize) turns it on: the namespace is Terminating meanwhile.
        self.graceful_namespaces = False

    # -- reads -------------------------------------------------------------------------------------
    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def now_iso(self) -> str:
        return to_iso(self.clock.now())

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        return self.get_entry(rt, namespace, name).obj

    def get_entry(self, rt: ResourceType, namespace: str | None, name: str) -> Entry:
        entry = self._objects[rt].get(_ns(rt, namespace), {}).get(name)
        if entry is None:
            raise st.not_found(rt.plural, name, rt.group)
        return entry

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> dict | None:
        entry = self._objects[rt].get(_ns(rt, namespace), {}).get(name)
        return entry.obj if entry else None

    def list_entries(self, rt: ResourceType, namespace: str | None = None,
                     predicate: Callable[[dict], bool] | None = None) -> list[Entry]:
        """Matching entries sorted by namespace then name, like etcd's key order."""
        by_ns = self._objects[rt]
        if rt.namespaced and namespace:
            spaces: Iterable[str] = [namespace] if namespace in by_ns else []
        else:
            spaces = sorted(by_ns)
        out: list[Entry] = []
        for ns in spaces:
            names = by_ns[ns]
            for name in sorted(names):
                entry = names[name]
                if predicate is None or predicate(entry.obj):
                    out.append(entry)
        return out

    def list(self, rt: ResourceType, namespace: str | None = None,
             predicate: Callable[[dict], bool] | None = None) -> tuple[list[dict], str]:
        """(objects, collection resourceVersion)."""
        return [e.obj for e in self.list_entries(rt, namespace, predicate)], self.resource_version

    def count(self, rt: ResourceType) -> int:
        return sum(len(names) for names in self._objects[rt].values())

    # -- writes ------------------------------------------------------------------------------------
    def create(self, rt: ResourceType, obj: dict, namespace: str | None = None, *, dry_run: bool = False) -> dict:
        """Store a new object (generic metadata + kind defaults); 409 if it exists, 404 if its namespace does not."""
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise st.bad_request("metadata must be an object")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        ns = self._namespace_for_create(rt, meta, namespace)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = self._generate_name(rt, ns, meta["generateName"])
            else:
                raise st.invalid(rt.kind, "", [("metadata.name", "Required value: name or generateName is required")],
                                 rt.group)
        name = meta["name"]
        validate_name(rt, name)
        if name in self._objects[rt].get(ns, {}):
            raise st.already_exists(rt.plural, name, rt.group)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now_iso()
        if "spec" in obj:
            meta["generation"] = 1
        apply_defaults(rt, obj, meta["creationTimestamp"])
        validate(rt, obj)
        if dry_run:
            meta["resourceVersion"] = self.resource_version
            return obj
        meta["resourceVersion"] = self._next_rv()
        self._put(rt, ns, name, Entry(obj), "ADDED", None)
        return obj

    def replace(self, rt: ResourceType, namespace: str | None, name: str, obj: dict, *,
                subresource: str | None = None, dry_run: bool = False) -> dict:
        """PUT semantics: optimistic concurrency on metadata.resourceVersion, status kept apart from spec.

        `subresource`: None (the main resource: status changes ignored), "status" (only status changes
        kept), or another subresource name (e.g. "binding": spec and status both taken).
        """
        old_entry = self.get_entry(rt, namespace, name)
        old = old_entry.obj
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            obj["metadata"] = meta = {}
        if meta.get("name") not in (None, name):
            raise st.bad_request(f'the name of the object ({meta["name"]}) does not match the name on the URL ({name})')
        body_ns = meta.get("namespace")
        if rt.namespaced and body_ns and body_ns != _ns(rt, namespace):
            raise st.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
            raise st.conflict(rt.plural, name, rt.group)
        if meta.get("uid") not in (None, "", old["metadata"]["uid"]):
            raise st.conflict(rt.plural, name, rt.group, "Precondition failed: UID in object meta does not match")
        if subresource == "finalize":  # a namespace's spec.finalizers, and nothing else
            new = copy.copy(old)
            new["metadata"] = dict(old["metadata"])
            new["spec"] = dict(old.get("spec") or {}, finalizers=list((obj.get("spec") or {}).get("finalizers") or []))
        elif subresource == "status":
            new = copy.copy(old)
            new["metadata"] = dict(old["metadata"])
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
        else:
            new = obj
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            for key in _UNCHANGED_META:
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            if "status" in rt.subresources and subresource is None:  # status only through /status
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            apply_defaults(rt, new, self.now_iso())
            validate(rt, new)
            if _spec_of(new) != _spec_of(old) and "generation" in old["metadata"]:
                meta["generation"] = old["metadata"]["generation"] + 1
        return self._commit_update(rt, old_entry, new, dry_run)

    def update(self, rt: ResourceType, namespace: str | None, name: str, change: Callable[[dict], dict], *,
               subresource: str | None = None, dry_run: bool = False) -> dict:
        """Read-modify-write in one step (atomic: the loop is single-threaded); `change` returns a new dict."""
        current = copy.deepcopy(self.get(rt, namespace, name))
        new = change(current)
        new.setdefault("metadata", {})
        return self.replace(rt, namespace, name, new, subresource=subresource, dry_run=dry_run)

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
            self._delete_dependents(old["metadata"]["uid"], _ns(rt, namespace), propagation)
        return gone

    # -- watch -------------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, namespace: str | None, predicate: Callable[[dict], bool],
              since: int | None) -> Watcher:
        """Subscribe; `since` None/0 starts with ADDED for every current match, else replays history (410 if gone)."""
        watcher = Watcher(rt, namespace if rt.namespaced else None, predicate)
        if not since:
            for entry in self.list_entries(rt, watcher.namespace, predicate):
                watcher.queue.put_nowait(("ADDED", entry))
        else:
            if since < self._compacted[rt]:
                raise st.gone(f"too old resource version: {since} ({self._compacted[rt] + 1})")
            for ev in self._history[rt]:
                if ev.rv > since:
                    watcher.offer(ev)
        self._watchers[rt].add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers[watcher.rt].discard(watcher)

    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())

    # -- internals ---------------------------------------------------------------------------------
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _namespace_for_create(self, rt: ResourceType, meta: dict, namespace: str | None) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise st.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        ns = namespace or body_ns or "default"
        meta["namespace"] = ns
        space = self.find(_NAMESPACES, None, ns)
        if space is None:
            raise st.not_found("namespaces", ns)
        if space["metadata"].get("deletionTimestamp"):
            raise st.ApiError(403, "Forbidden", f'{rt.plural} "{meta.get("name") or meta.get("generateName", "")}" '
                              f"is forbidden: unable to create new content in namespace {ns} because it is being "
                              f"terminated", {"name": meta.get("name", ""), "kind": rt.plural,
                                              "causes": [{"reason": "NamespaceTerminating",
                                                          "message": f"namespace {ns} is being terminated",
                                                          "field": "metadata.namespace"}]})
        return ns

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

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix + "".join(random.choices(_NAME_CHARS, k=5))
            if name not in self._objects[rt].get(ns, {}):
                return name
        raise st.ApiError(500, "AlreadyExists", f"could not generate a unique name from {prefix!r}")

    def _commit_update(self, rt: ResourceType, old_entry: Entry, new: dict, dry_run: bool) -> dict:
        old = old_entry.obj
        meta = new["metadata"]
        if _same(old, new):
            return old  # a no-op write keeps its resourceVersion and makes no event, like the real server
        if meta.get("deletionTimestamp") and not _finalizers(rt, new) and not meta.get("deletionGracePeriodSeconds"):
            if dry_run:
                return new
            if rt is _NAMESPACES:
                self._delete_namespace_contents(meta["name"])
            return self._remove(rt, old_entry)
        if dry_run:
            return new
        meta["resourceVersion"] = self._next_rv()
        self._put(rt, _ns(rt, meta.get("namespace")), meta["name"], Entry(new), "MODIFIED", old_entry)
        return new

    def _put(self, rt: ResourceType, ns: str, name: str, entry: Entry, etype: str, old: Entry | None) -> None:
        self._objects[rt].setdefault(ns, {})[name] = entry
        self._record(rt, WatchEvent(self._rv, etype, entry, old))

    def _remove(self, rt: ResourceType, entry: Entry) -> dict:
        meta = entry.obj["metadata"]
        ns = _ns(rt, meta.get("namespace"))
        names = self._objects[rt].get(ns, {})
        names.pop(meta["name"], None)
        if not names:
            self._objects[rt].pop(ns, None)
        gone = dict(entry.obj, metadata=dict(meta, resourceVersion=self._next_rv()))
        self._record(rt, WatchEvent(self._rv, "DELETED", Entry(gone)))
        if rt.plural == "pods" and not rt.group:
            self.logs.drop(ns, meta["name"])
        return gone

    def _record(self, rt: ResourceType, ev: WatchEvent) -> None:
        history = self._history[rt]
        if len(history) == history.maxlen:
            self._compacted[rt] = history[0].rv
        history.append(ev)
        for watcher in self._watchers[rt]:
            watcher.offer(ev)

    def _delete_dependents(self, uid: str, ns: str, propagation: str | None) -> None:
        for rt in RESOURCES:
            for entry in list(self._objects[rt].get(ns, {}).values()):
                refs = entry.obj["metadata"].get("ownerReferences") or ()
                if any(ref.get("uid") == uid for ref in refs):
                    meta = entry.obj["metadata"]
                    if self.find(rt, meta.get("namespace"), meta["name"]) is not None:
                        self.delete(rt, meta.get("namespace"), meta["name"], propagation=propagation)

    def _delete_namespace_contents(self, ns: str) -> None:
        for rt in RESOURCES:
            if rt.namespaced:
                for entry in list(self._objects[rt].get(ns, {}).values()):
                    self._remove(rt, entry)


def _ns(rt: ResourceType, namespace: str | None) -> str:
    return (namespace or "") if rt.namespaced else ""


def _finalizers(rt: ResourceType, obj: dict) -> list:
    """What still holds a deleted object: metadata.finalizers, and a namespace's spec.finalizers."""
    held = list(obj["metadata"].get("finalizers") or ())
    if rt is _NAMESPACES:
        held += (obj.get("spec") or {}).get("finalizers") or ()
    return held


def _spec_of(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _same(old: dict, new: dict) -> bool:
    def strip(o: dict) -> dict:
        return dict(o, metadata={k: v for k, v in o.get("metadata", {}).items() if k != "resourceVersion"})
    return strip(old) == strip(new)
