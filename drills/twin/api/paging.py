"""Chunked lists (`limit` / `continue`) with the real API server's semantics.

The first page is read at the store's current resourceVersion; its continue token names that version
and the last key returned (`{"v":"meta.k8s.io/v1","rv":N,"start":"ns/name\\x00"}`, base64url, as
k8s.io/apiserver/pkg/storage does), and later pages read the same snapshot: the store rebuilds the state
at N from its event history (`Overlay`: each key changed since N → its entry at N). When the history no
longer reaches N — etcd would have compacted it — the page is 410 Expired with an inconsistent token
(rv -1) that continues at the same key over the current state, like the real server.
`remainingItemCount` is only given for lists without a selector, as there.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import logging
from dataclasses import dataclass
from typing import Iterator

from drills.twin.api import status as st
from drills.twin.api.keyspace import Key, Keyspace
from drills.twin.api.selection import ALL, Selection
from drills.twin.api.watchers import Entry

__all__ = ["Page", "Overlay", "read_page", "encode_continue", "decode_continue", "expired_continue",
           "INCONSISTENT"]

log = logging.getLogger(__name__)

INCONSISTENT = -1  # the rv of a token that continues over the current state
Overlay = dict[Key, "Entry | None"]  # keys changed since a snapshot → their entry then (None: absent then)

_CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can "
                     "start a new list without the continue parameter, or use the continue token in this response "
                     "to retrieve the remainder of the results. Continuing with the provided token results in an "
                     "inconsistent list - objects that were created, modified, or deleted between the time the "
                     "first chunk was returned and now may show up in the list.")


@dataclass(frozen=True)
class Page:
    entries: list[Entry]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None  # remainingItemCount (only without a selector, only when more remain)

    def list_meta(self) -> dict:
        meta: dict = {"resourceVersion": self.resource_version}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining is not None:
            meta["remainingItemCount"] = self.remaining
        return meta


def read_page(keyspace: Keyspace, scope: str | None, selection: Selection, *, limit: int, after: Key | None,
              rv: int, overlay: Overlay | None) -> Page:
    """Up to `limit` (0: all) matching entries after `after`, as of `rv` (`overlay`: how the state at `rv`
    differs from now; None when reading now)."""
    if not overlay and selection.empty and selection == ALL:  # a plain list now: slices, no per-key work
        out, last, more = keyspace.ordered(scope, after, limit)
        if not more or last is None:
            return Page(out, str(rv))
        return Page(out, str(rv), encode_continue(rv, last), keyspace.count_after(scope, last))
    keys: Iterator[Key] = keyspace.keys(scope, selection, after)
    if overlay:
        changed = sorted(k for k in overlay if (scope is None or k[0] == scope) and (after is None or k > after))
        keys = _unique(heapq.merge(keys, changed))
    out: list[Entry] = []
    last: Key | None = None
    more = False
    for key in keys:
        entry = overlay[key] if overlay and key in overlay else keyspace.get(*key)
        if entry is None or not selection.matches(entry.obj):
            continue
        if limit and len(out) == limit:
            more = True
            break
        out.append(entry)
        last = key
    if not more or last is None:
        return Page(out, str(rv))
    remaining = None
    if selection.empty:
        remaining = keyspace.count_after(scope, last)
        for key, then in (overlay or {}).items():
            if key > last and (scope is None or key[0] == scope):
                remaining += (then is not None) - (keyspace.get(*key) is not None)
    return Page(out, str(rv), encode_continue(rv, last), remaining)


def encode_continue(rv: int, key: Key) -> str:
    ns, name = key
    start = f"{ns}/{name}\x00" if ns else f"{name}\x00"
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str, namespaced: bool) -> tuple[int, Key]:
    """(resourceVersion, the last key served) from a token; 400 when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError(f'unsupported continue token version {data.get("v")!r}')
        rv, start = int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as err:
        raise st.bad_request(f"continue key is not valid: {err}") from None
    if rv == 0 or rv < INCONSISTENT or not start:
        raise st.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    start = start[:-1] if start.endswith("\x00") else start
    ns, _, name = start.rpartition("/") if namespaced else ("", "", start)
    return rv, (ns, name)


def expired_continue(key: Key) -> st.ApiError:
    """410 Expired for a token whose snapshot is gone, carrying a token that continues inconsistently."""
    return st.ApiError(410, "Expired", _CONTINUE_EXPIRED, metadata={"continue": encode_continue(INCONSISTENT, key)})


def _unique(keys: Iterator[Key]) -> Iterator[Key]:
    previous = None
    for key in keys:
        if key != previous:
            yield key
            previous = key
