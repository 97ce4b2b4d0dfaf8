"""One resource's stored objects in key order, with the indexes selective reads use.

Keys are (namespace, name) in etcd's order; sorted name lists are kept per namespace (insertion by
bisection, so a list never sorts); an inverted index maps each index key (a label, pods' spec.nodeName,
see selection.py) to the keys of the objects carrying it. Reads yield keys in order from any position,
which is what pagination needs.
"""

from __future__ import annotations

import bisect
import logging
from typing import Iterator

from drills.twin.api.resources import ResourceType
from drills.twin.api.selection import ALL, Selection, index_keys
from drills.twin.api.watchers import Entry

__all__ = ["Keyspace", "Key"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)
_EMPTY: frozenset = frozenset()
_SCAN_FRACTION = 4  # an index answer larger than 1/4 of the objects is slower than walking them in order


class Keyspace:
    """The objects of one resource type."""

    def __init__(self, rt: ResourceType):
        self.rt = rt
        self.by_ns: dict[str, dict[str, Entry]] = {}
        self._names: dict[str, list[str]] = {}  # namespace → its names, sorted
        self._spaces: list[str] = []  # namespaces holding objects, sorted
        self._index: dict[tuple, set[Key]] = {}
        self._keys_of: dict[Key, frozenset] = {}
        self._count = 0

    # -- reads -------------------------------------------------------------------------------------
    def get(self, ns: str, name: str) -> Entry | None:
        names = self.by_ns.get(ns)
        return names.get(name) if names else None

    def count(self, ns: str | None = None) -> int:
        if ns is None:
            return self._count
        return len(self.by_ns.get(ns, ()))

    def names(self, ns: str) -> dict[str, Entry]:
        return self.by_ns.get(ns, {})

    def keys(self, scope: str | None, selection: Selection = ALL, after: Key | None = None) -> Iterator[Key]:
        """Keys in order after `after`, in one namespace (`scope`) or all, narrowed by the selection's name,
        namespace and index keys (candidates only: the caller still applies the predicate)."""
        if selection.namespace is not None:
            if scope not in (None, selection.namespace):
                return iter(())
            scope = selection.namespace
        if selection.name is not None:
            return self._named(scope, selection.name, after)
        if selection.keys:
            sets = sorted((self._index.get(k, _EMPTY) for k in selection.keys), key=len)
            if len(sets[0]) * _SCAN_FRACTION <= max(self.count(scope), 1):
                return self._indexed(scope, sets, after)
        return self._walk(scope, after)

    def ordered(self, scope: str | None, after: Key | None, limit: int) -> tuple[list[Entry], Key | None, bool]:
        """Up to `limit` (0: all) entries in key order after `after`, the key of the last one, and whether more
        follow: the unselective list's path, slicing the sorted names instead of walking keys one by one (and
        making no object per entry, so a list of 60,000 pods sets off no garbage collection)."""
        out: list[Entry] = []
        last: Key | None = None
        if scope is not None:
            spaces = [scope] if scope in self._names else []
        else:
            spaces = self._spaces[bisect.bisect_left(self._spaces, after[0]):] if after else self._spaces
        for ns in spaces:
            names, objs = self._names[ns], self.by_ns[ns]
            start = 0
            if after is not None:
                if ns < after[0]:
                    continue
                if ns == after[0]:
                    start = bisect.bisect_right(names, after[1])
            room = limit - len(out) if limit else len(names)
            taken = names[start:start + room]
            if taken:
                out.extend([objs[name] for name in taken])
                last = (ns, taken[-1])
            if limit and len(out) == limit:
                more = start + room < len(names) or any(self._names[s] for s in spaces[spaces.index(ns) + 1:])
                return out, last, more
        return out, last, False

    def count_after(self, scope: str | None, after: Key) -> int:
        """How many keys in the scope come after `after`."""
        ns, name = after
        if scope is not None:
            return len(self._names.get(scope, ())) - bisect.bisect_right(self._names.get(scope, []), name) \
                if scope == ns else (self.count(scope) if scope > ns else 0)
        total = 0
        start = bisect.bisect_right(self._spaces, ns)
        for space in self._spaces[start:]:
            total += len(self._names[space])
        if ns in self._names:
            names = self._names[ns]
            total += len(names) - bisect.bisect_right(names, name)
        return total

    # -- writes ------------------------------------------------------------------------------------
    def put(self, ns: str, name: str, entry: Entry) -> None:
        names = self.by_ns.get(ns)
        if names is None:
            names = self.by_ns[ns] = {}
            self._names[ns] = []
            bisect.insort(self._spaces, ns)
        key = (ns, name)
        if name not in names:
            bisect.insort(self._names[ns], name)
            self._count += 1
        names[name] = entry
        new_keys = index_keys(self.rt, entry.obj)
        old_keys = self._keys_of.get(key, _EMPTY)
        if new_keys != old_keys:
            for k in old_keys - new_keys:
                self._unindex(k, key)
            for k in new_keys - old_keys:
                self._index.setdefault(k, set()).add(key)
            self._keys_of[key] = new_keys

    def remove(self, ns: str, name: str) -> Entry | None:
        names = self.by_ns.get(ns)
        if not names or name not in names:
            return None
        entry = names.pop(name)
        self._count -= 1
        sorted_names = self._names[ns]
        del sorted_names[bisect.bisect_left(sorted_names, name)]
        if not names:
            del self.by_ns[ns], self._names[ns]
            del self._spaces[bisect.bisect_left(self._spaces, ns)]
        key = (ns, name)
        for k in self._keys_of.pop(key, _EMPTY):
            self._unindex(k, key)
        return entry

    # -- helpers -----------------------------------------------------------------------------------
    def _unindex(self, k: tuple, key: Key) -> None:
        holders = self._index.get(k)
        if holders is not None:
            holders.discard(key)
            if not holders:
                del self._index[k]

    def _named(self, scope: str | None, name: str, after: Key | None) -> Iterator[Key]:
        for ns in ([scope] if scope is not None else list(self._spaces)):
            key = (ns, name)
            if name in self.by_ns.get(ns, ()) and (after is None or key > after):
                yield key

    def _indexed(self, scope: str | None, sets: list, after: Key | None) -> Iterator[Key]:
        smallest, others = sets[0], sets[1:]
        found = [key for key in smallest
                 if (scope is None or key[0] == scope) and (after is None or key > after)
                 and all(key in other for other in others)]
        found.sort()
        return iter(found)

    def _walk(self, scope: str | None, after: Key | None) -> Iterator[Key]:
        if scope is not None:
            spaces = [scope] if scope in self._names else []
        else:
            spaces = self._spaces[bisect.bisect_left(self._spaces, after[0]):] if after else list(self._spaces)
        for ns in spaces:
            names = self._names[ns]
            start = 0
            if after is not None and ns == after[0]:
                start = bisect.bisect_right(names, after[1])
            elif after is not None and ns < after[0]:
                continue
            for i in range(start, len(names)):
                yield (ns, names[i])
