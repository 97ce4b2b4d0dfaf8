"""What watches see: stored entries, store events, and the watchers they are routed to.

An `Entry` is one stored version of an object with its JSON encoding cached. A `WatchEvent` is one
change in a resource's history. A `Watcher` turns events into what its selector sees (an object
entering or leaving the selection is ADDED/DELETED). The `WatchHub` routes each event only to the
watchers whose most selective index key the object carries (its name, spec.nodeName, a label, its
namespace), so the cost of one write does not grow with the number of open selective watches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from dataclasses import dataclass, field

from drills.twin.api.resources import ResourceType
from drills.twin.api.selection import ALL, Selection, route_keys

__all__ = ["Entry", "WatchEvent", "Watcher", "WatchHub"]

log = logging.getLogger(__name__)


_WBITS = -12  # raw deflate, 4 KiB window: one object's JSON compresses to about 40 %


class Entry:
    """One stored version of an object and its JSON encoding, computed once and reused by every reader.

    A past version (superseded, kept in the history for watch resumes and consistent pages) is compacted
    to its JSON alone, zlib-compressed: `obj` and `raw` then decompress on each read (rare: a watch resumed
    from the past, a page of an older snapshot), and the history holds a third of the bytes, not dicts.
    """

    __slots__ = ("_obj", "_raw", "_memo")

    def __init__(self, obj: dict):
        self._obj: dict | None = obj
        self._raw: bytes | None = None
        self._memo: dict | None = None

    def memo(self) -> dict:
        """What readers derived from this version (a Table row's cells...), kept with it: a version never changes."""
        if self._obj is None:  # a compacted past version: read rarely, not worth keeping anything for
            return {}
        if self._memo is None:
            self._memo = {}
        return self._memo

    @property
    def obj(self) -> dict:
        obj = self._obj
        return obj if obj is not None else json.loads(zlib.decompress(self._raw, _WBITS))  # type: ignore[arg-type]

    @property
    def raw(self) -> bytes:
        if self._obj is None:
            return zlib.decompress(self._raw, _WBITS)  # type: ignore[arg-type]
        if self._raw is None:
            self._raw = json.dumps(self._obj, separators=(",", ":")).encode()
        return self._raw

    def compact(self) -> None:
        """Keep only the compressed JSON (a version no longer current: read rarely, and never changed)."""
        if self._obj is not None:
            packer = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 4)  # a small window: set up in a tenth of the time
            self._raw = packer.compress(self.raw) + packer.flush()
            self._obj = None
            self._memo = None


@dataclass(frozen=True)
class WatchEvent:
    """One change: `entry` is the new version (the last one, for DELETED); `old` the version it replaced."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    entry: Entry
    old: Entry | None = None


@dataclass(eq=False)
class Watcher:
    """A subscription: events for one resource (one namespace or all) that pass `selection`."""

    rt: ResourceType
    namespace: str | None
    selection: Selection = ALL
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    @property
    def route(self) -> tuple | None:
        """The one key an object must carry for this watcher to hear of it (None: every object)."""
        return self.selection.route_key(self.namespace)

    def offer(self, ev: WatchEvent) -> None:
        """Translate a store event into what this watcher sees (selector transitions become ADDED/DELETED)."""
        meta = ev.entry.obj.get("metadata", {})
        if self.namespace and meta.get("namespace") != self.namespace:
            return
        matches = self.selection.matches
        now = matches(ev.entry.obj)
        if ev.type == "MODIFIED" and ev.old is not None:
            before = matches(ev.old.obj)
            if now and not before:
                self.queue.put_nowait(("ADDED", ev.entry))
            elif before and not now:
                self.queue.put_nowait(("DELETED", ev.entry))
            elif now:
                self.queue.put_nowait(("MODIFIED", ev.entry))
        elif now:
            self.queue.put_nowait((ev.type, ev.entry))


class WatchHub:
    """The open watchers of one resource, grouped by their route key."""

    def __init__(self, rt: ResourceType):
        self.rt = rt
        self._routes: dict[tuple | None, set[Watcher]] = {}

    def __len__(self) -> int:
        return sum(len(ws) for ws in self._routes.values())

    def add(self, watcher: Watcher) -> None:
        self._routes.setdefault(watcher.route, set()).add(watcher)

    def discard(self, watcher: Watcher) -> None:
        group = self._routes.get(watcher.route)
        if group is not None:
            group.discard(watcher)
            if not group:
                del self._routes[watcher.route]

    def publish(self, ev: WatchEvent) -> None:
        routes = self._routes
        if not routes:
            return
        targets = list(routes.get(None, ()))
        if len(routes) > (1 if None in routes else 0):
            keys = route_keys(self.rt, ev.entry.obj)
            if ev.old is not None:
                keys |= route_keys(self.rt, ev.old.obj)
            for key in keys:
                targets.extend(routes.get(key, ()))
        for watcher in targets:
            watcher.offer(ev)
