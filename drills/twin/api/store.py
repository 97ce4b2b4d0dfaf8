"""The twin's object store: what etcd plus the generic registry are to a real API server.

One global, monotonically increasing resourceVersion; objects per resource in key order with indexes
(keyspace.py); a bounded per-resource event history so watches can resume and chunked lists read one
snapshot (older → 410, paging.py); watchers routed by what they select (watchers.py); deletion with
grace, finalizers and cascades (deletion.py); per-pod log buffers. Single-threaded: call it from the loop.
Stored dicts are never mutated after they are stored — every write stores a new dict — so readers
may keep references, but must not change them.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import uuid
from collections import deque
from pathlib import Path
from typing import Callable

from drills.core.clock import Clock, DilatedClock, to_iso
from drills.core.gatedclock import GatedClock
from drills.twin.api import status as st
from drills.twin.api.compact import interned
from drills.twin.api.defaults import apply_defaults
from drills.twin.api.deletion import Deletion
from drills.twin.api.keyspace import Key, Keyspace
from drills.twin.api.logs import PodLogs
from drills.twin.api.paging import INCONSISTENT, Overlay, Page, decode_continue, expired_continue, read_page
from drills.twin.api.resources import RESOURCES, ResourceType, by_path
from drills.twin.api.selection import Selection, of_predicate
from drills.twin.api.validation import validate, validate_name
from drills.twin.api.watchers import Entry, WatchEvent, Watcher, WatchHub

__all__ = ["Store", "Entry", "WatchEvent", "Watcher", "Page", "DEFAULT_HISTORY"]

log = logging.getLogger(__name__)

DEFAULT_HISTORY = 20000  # events kept per resource for watch resume and consistent pages
COMPACT_AFTER = 1000  # writes after which a superseded version keeps only its JSON (Entry.compact)
_NAMESPACES = by_path("", "v1", "namespaces")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the real generateName suffix uses
_UNCHANGED_META = ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "generation", "resourceVersion")
Predicate = Callable[[dict], bool] | Selection | None


class Store(Deletion):
    """In-memory objects of every resource type the twin serves (deletion: see deletion.py)."""

    def __init__(self, clock: Clock | None = None, history: int = DEFAULT_HISTORY):
        self.clock = clock or DilatedClock()
        self._gated = isinstance(self.clock, GatedClock)
        self._rv = 0
        self._tables: dict[ResourceType, Keyspace] = {rt: Keyspace(rt) for rt in RESOURCES}
        self._history: dict[ResourceType, deque[WatchEvent]] = {rt: deque(maxlen=history) for rt in RESOURCES}
        self._compacted: dict[ResourceType, int] = {rt: 0 for rt in RESOURCES}
        self._hubs: dict[ResourceType, WatchHub] = {rt: WatchHub(rt) for rt in RESOURCES}
        self._superseded: deque[Entry] = deque()  # past versions still held as dicts, oldest first
        self.logs = PodLogs(self.clock)
        # a pod volume → the host directory backing it, for exec's `find`/`cat` (the workloads set it: their
        # checkpoint store backs every PersistentVolumeClaim); None: no volume has files
        self.volume_dir: Callable[[dict], Path | None] | None = None
        self.unlink_denied = False  # the checkpoint store refuses unlinking (twin profile storage.unlink_denied)

    # -- reads -------------------------------------------------------------------------------------
    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def now_iso(self) -> str:
        return to_iso(self.clock.now())

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        return self.get_entry(rt, namespace, name).obj

    def get_entry(self, rt: ResourceType, namespace: str | None, name: str) -> Entry:
        entry = self._tables[rt].get(_ns(rt, namespace), name)
        if entry is None:
            raise st.not_found(rt.plural, name, rt.group)
        return entry

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> dict | None:
        entry = self._tables[rt].get(_ns(rt, namespace), name)
        return entry.obj if entry else None

    def list_entries(self, rt: ResourceType, namespace: str | None = None, predicate: Predicate = None) -> list[Entry]:
        """Matching entries sorted by namespace then name, like etcd's key order."""
        return self.list_page(rt, namespace, of_predicate(predicate)).entries

    def list(self, rt: ResourceType, namespace: str | None = None,
             predicate: Predicate = None) -> tuple[list[dict], str]:
        """(objects, collection resourceVersion)."""
        return [e.obj for e in self.list_entries(rt, namespace, predicate)], self.resource_version

    def list_page(self, rt: ResourceType, namespace: str | None, selection: Selection, *, limit: int = 0,
                  continue_token: str = "", exact_rv: int | None = None) -> Page:
        """A list or one chunk of it (paging.py): now, at the continue token's snapshot, or at `exact_rv`
        (resourceVersionMatch=Exact); 410 Expired when the history no longer reaches that version."""
        scope = namespace if rt.namespaced and namespace else None
        after: Key | None = None
        rv = self._rv
        if continue_token:
            rv, after = decode_continue(continue_token, rt.namespaced)
            if rv == INCONSISTENT:
                rv = self._rv
            elif rv < self._compacted[rt]:
                raise expired_continue(after)
        elif exact_rv is not None:
            if exact_rv < self._compacted[rt] or exact_rv > self._rv:
                raise st.gone("The resourceVersion for the provided list is too old.") if exact_rv <= self._rv \
                    else st.ApiError(504, "Timeout", f"Too large resource version: {exact_rv}, current: {self._rv}")
            rv = exact_rv
        overlay = self._overlay(rt, rv) if rv < self._rv else None
        return read_page(self._tables[rt], scope, selection, limit=max(limit, 0), after=after, rv=rv,
                         overlay=overlay)

    def count(self, rt: ResourceType) -> int:
        return self._tables[rt].count()

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
        if self._tables[rt].get(ns, name) is not None:
            raise st.already_exists(rt.plural, name, rt.group)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
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
        obj = interned(obj)  # stored compactly (compact.py); equal to what was asked for
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
            if "managedFields" not in meta and "managedFields" in old["metadata"]:  # omitted: kept, as the real server
                meta["managedFields"] = old["metadata"]["managedFields"]
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
        current = json.loads(self.get_entry(rt, namespace, name).raw)  # a private copy: 3-5x cheaper than deepcopy
        new = change(current)
        new.setdefault("metadata", {})
        return self.replace(rt, namespace, name, new, subresource=subresource, dry_run=dry_run)

    # -- watch -------------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, namespace: str | None, predicate: Predicate, since: int | None) -> Watcher:
        """Subscribe; `since` None/0 starts with ADDED for every current match, else replays history (410 if gone)."""
        watcher = Watcher(rt, namespace if rt.namespaced else None, of_predicate(predicate))
        if not since:
            for entry in self.list_page(rt, watcher.namespace, watcher.selection).entries:
                watcher.queue.put_nowait(("ADDED", entry))
        else:
            if since < self._compacted[rt]:
                raise st.gone(f"too old resource version: {since} ({self._compacted[rt] + 1})")
            for ev in self._history[rt]:
                if ev.rv > since:
                    watcher.offer(ev)
        self._hubs[rt].add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._hubs[watcher.rt].discard(watcher)

    def watcher_count(self) -> int:
        return sum(len(hub) for hub in self._hubs.values())

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

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix + "".join(random.choices(_NAME_CHARS, k=5))
            if self._tables[rt].get(ns, name) is None:
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
        new = interned(new)  # stored compactly (compact.py); equal to what was asked for
        self._put(rt, _ns(rt, meta.get("namespace")), meta["name"], Entry(new), "MODIFIED", old_entry)
        return new

    def _put(self, rt: ResourceType, ns: str, name: str, entry: Entry, etype: str, old: Entry | None) -> None:
        self._tables[rt].put(ns, name, entry)
        self._record(rt, WatchEvent(self._rv, etype, entry, old))

    def _remove(self, rt: ResourceType, entry: Entry) -> dict:
        meta = entry.obj["metadata"]
        ns = _ns(rt, meta.get("namespace"))
        self._tables[rt].remove(ns, meta["name"])
        gone = dict(entry.obj, metadata=dict(meta, resourceVersion=self._next_rv()))
        self._record(rt, WatchEvent(self._rv, "DELETED", Entry(gone), entry))
        if rt.plural == "pods" and not rt.group:
            self.logs.drop(ns, meta["name"])
        return gone

    def _record(self, rt: ResourceType, ev: WatchEvent) -> None:
        history = self._history[rt]
        if len(history) == history.maxlen:
            self._compacted[rt] = history[0].rv
        history.append(ev)
        self._hubs[rt].publish(ev)
        if self._gated:  # the twin's clock waits until its own informers delivered this write (gatedclock.py)
            self.clock.written(rt, ev.rv)  # type: ignore[attr-defined]
        self._retire(rt, ev)

    def _retire(self, rt: ResourceType, ev: WatchEvent) -> None:
        """Past versions stay in the history as JSON only, COMPACT_AFTER writes after they stopped being
        current: the history holds bytes, not a second dict per version (recent ones stay dicts, as the
        watches still being sent read them). Events are kept as JSON even while current: a 4,096-node twin
        holds 75,000 of them (six per daemon pod started), read as JSON by lists and watches, rarely as dicts."""
        superseded = self._superseded
        if ev.old is not None:
            superseded.append(ev.old)
        if ev.type != "DELETED" and rt.plural == "events":
            superseded.append(ev.entry)
        if ev.type == "DELETED":
            superseded.append(ev.entry)  # the last version of a deleted object is a past version too
        while len(superseded) > COMPACT_AFTER:
            superseded.popleft().compact()

    def _overlay(self, rt: ResourceType, rv: int) -> Overlay:
        """How the state at `rv` differs from now: each key changed since → its entry then (None: absent)."""
        overlay: Overlay = {}
        for ev in reversed(self._history[rt]):
            if ev.rv <= rv:
                break
            meta = ev.entry.obj["metadata"]
            overlay[(_ns(rt, meta.get("namespace")), meta["name"])] = None if ev.type == "ADDED" else ev.old
        return overlay

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
