"""Watch: a chunked stream of newline-delimited events, as the real API server sends them.

Resumes from `resourceVersion` (410 Gone as an ERROR event when the history no longer reaches it),
ends after `timeoutSeconds` (wall seconds, like the real server), sends BOOKMARKs when asked; late by
`timings.watch_lag` when a profile says so (`watchlag.py`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from aiohttp import web

from drills.twin.api import status as st
from drills.twin.api.handlers import Target, selection_of
from drills.twin.api.selection import Selection
from drills.twin.api.store import Entry, Store
from drills.twin.api.tables import table_body, wants_table
from drills.twin.api.watchlag import WATCH_LAG, LaggedQueue, is_twin_component

__all__ = ["serve", "WATCH_QUEUES", "BOOKMARK_INTERVAL_S", "DEFAULT_TIMEOUT_S", "close_all"]

log = logging.getLogger(__name__)

BOOKMARK_INTERVAL_S = 10.0
DEFAULT_TIMEOUT_S = 1800.0
_STOP = ("STOP", None)
WATCH_QUEUES = web.AppKey("watch_queues", set)  # app key: the set of open watch queues (created by the server)


async def serve(request: web.Request, store: Store, target: Target) -> web.StreamResponse:
    """Stream events for `target` until timeout, client disconnect or server shutdown."""
    rt = target.rt
    selection = selection_of(request, rt)
    if target.name is not None:  # GET /pods/x?watch=1 is a watch with metadata.name=x
        selection = _named(selection, target.name)
    query = request.query
    since = _parse_rv(query.get("resourceVersion"))
    bookmarks = query.get("allowWatchBookmarks") in ("1", "true", "True")
    initial_end = query.get("sendInitialEvents") in ("1", "true", "True")
    timeout = _timeout(query.get("timeoutSeconds"))
    table = wants_table(request.headers.get("Accept"))
    include = query.get("includeObject", "Metadata")

    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    try:
        watcher = store.watch(rt, target.namespace, selection, None if initial_end else since)
    except st.ApiError as err:
        await resp.write(_line({"type": "ERROR", "object": err.body()}))
        await resp.write_eof()
        return resp
    queues: set = request.app[WATCH_QUEUES]
    queues.add(watcher.queue)
    if initial_end:  # watch-list: initial ADDED events, then a bookmark that marks their end
        watcher.queue.put_nowait(("INITIAL_END", None))
    lag_s = request.app.get(WATCH_LAG, 0.0) if not is_twin_component(request) else 0.0
    events = LaggedQueue(watcher.queue, lag_s / store.clock.scale) if lag_s > 0 else watcher.queue

    def encode(etype: str, entry: Entry) -> bytes:
        if table:
            body = table_body(rt, [entry], {"resourceVersion": entry.obj["metadata"].get("resourceVersion", "")},
                              now=store.clock.timestamp(), include_object=include)
            return b'{"type":"' + etype.encode() + b'","object":' + body + b"}\n"
        return b'{"type":"' + etype.encode() + b'","object":' + entry.raw + b"}\n"

    deadline = time.monotonic() + timeout
    next_bookmark = time.monotonic() + BOOKMARK_INTERVAL_S
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            if request.transport is None or request.transport.is_closing():
                break
            wait = min(deadline, next_bookmark) - now
            try:
                etype, entry = await asyncio.wait_for(events.get(), timeout=max(wait, 0.01))
            except asyncio.TimeoutError:
                if bookmarks and time.monotonic() >= next_bookmark:
                    await resp.write(_bookmark(rt, store.resource_version))
                next_bookmark = time.monotonic() + BOOKMARK_INTERVAL_S
                continue
            if etype == "STOP":
                break
            if etype == "INITIAL_END":
                await resp.write(_bookmark(rt, store.resource_version, initial_end=True))
                continue
            chunk = [encode(etype, entry)]
            while not events.empty() and len(chunk) < 512:  # batch a burst into one write
                etype, entry = events.get_nowait()
                if etype in ("STOP", "INITIAL_END"):
                    events.put_nowait((etype, entry))
                    break
                chunk.append(encode(etype, entry))
            await resp.write(b"".join(chunk))
        if bookmarks and request.transport is not None and not request.transport.is_closing():
            await resp.write(_bookmark(rt, store.resource_version))
    except ConnectionResetError:
        pass
    finally:
        if isinstance(events, LaggedQueue):
            events.close()
        store.unwatch(watcher)
        queues.discard(watcher.queue)
    try:
        await resp.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass
    return resp


def close_all(app: web.Application) -> None:
    """Server shutdown: end every open watch stream."""
    for queue in list(app.get(WATCH_QUEUES, ())):
        queue.put_nowait(_STOP)


def _named(selection: Selection, name: str) -> Selection:
    by_rest = selection.matches

    def predicate(obj: dict) -> bool:
        return obj["metadata"].get("name") == name and by_rest(obj)
    return Selection(predicate, name=name, namespace=selection.namespace, keys=selection.keys)


def _parse_rv(value: str | None) -> int | None:
    if value in (None, "", "0"):
        return None
    try:
        return int(value)
    except ValueError:
        raise st.bad_request(f'invalid resource version "{value}"') from None


def _timeout(value: str | None) -> float:
    if not value:
        return DEFAULT_TIMEOUT_S
    try:
        return max(float(value), 0.0)
    except ValueError:
        raise st.bad_request(f'invalid timeoutSeconds "{value}"') from None


def _bookmark(rt, rv: str, initial_end: bool = False) -> bytes:
    meta: dict = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _line({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}})


def _line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"
