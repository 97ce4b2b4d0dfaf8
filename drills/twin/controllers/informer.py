"""Informers: list + watch one resource over HTTP into a local cache, and tell handlers.

Like client-go's: list, then watch from the list's resourceVersion; a 410 Gone (history too old)
or a dropped stream relists and reports the difference, so handlers never miss a change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from drills.core.gatedclock import GatedClock
from drills.twin.api.compact import interned
from drills.twin.api.resources import ResourceType
from drills.twin.controllers.client import ApiError, TwinClient, key_of
from drills.twin.health import Health

__all__ = ["Informer", "InformerFactory", "Handler"]

log = logging.getLogger(__name__)

# handler(event_type, new_or_last_obj, old_obj_or_None); event_type in ADDED, MODIFIED, DELETED
Handler = Callable[[str, dict, dict | None], Awaitable[None] | None]


class Informer:
    """A cache of one resource type (optionally one namespace) kept current by a watch."""

    def __init__(self, client: TwinClient, rt: ResourceType, namespace: str | None = None,
                 health: Health | None = None, clock: GatedClock | None = None):
        self.client, self.rt, self.namespace = client, rt, namespace
        # the twin's gated clock waits for the writes this informer has not handed to its handlers yet (a
        # namespaced informer never sees the other namespaces' writes: it does not hold the clock)
        self._gate = clock if namespace is None else None
        self.health = health or Health()
        self.cache: dict[tuple[str, str], dict] = {}
        self._by_ns: dict[str, dict[tuple[str, str], dict]] = {}  # client-go's namespace index
        self.synced = asyncio.Event()
        self._handlers: list[Handler] = []
        self._task: asyncio.Task | None = None

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str, name: str) -> dict | None:
        return self.cache.get((namespace or "", name))

    def items(self) -> list[dict]:
        return list(self.cache.values())

    def in_namespace(self, namespace: str) -> list[dict]:
        """The cached objects of one namespace (the namespace index: no walk over the whole cache)."""
        return list(self._by_ns.get(namespace or "", {}).values())

    def start(self) -> asyncio.Task:
        if self._task is None:
            if self._gate is not None:
                self._gate.watch(self.rt, id(self))
            self._task = asyncio.create_task(self._run(), name=f"informer:{self.rt.plural}")
        return self._task

    async def stop(self) -> None:
        if self._gate is not None:
            self._gate.unwatch(self.rt, id(self))
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            try:
                rv = await self._relist()
                self.synced.set()
                backoff = 0.05
                while True:
                    rv = await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except _Gone:
                continue
            except Exception as err:  # connection dropped, server restarting: relist after a pause
                log.debug("informer %s: %s; relisting", self.rt.plural, err)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _relist(self) -> str:
        items, rv = await self.client.list(self.rt, self.namespace)
        fresh = {key_of(o): interned(o) for o in items}  # cached compactly (shared keys and strings)
        old = self.cache
        self.cache = fresh
        self._by_ns = {}
        for key, obj in fresh.items():
            self._by_ns.setdefault(key[0], {})[key] = obj
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                await self._emit("ADDED", obj, None)
            elif prev.get("metadata", {}).get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                await self._emit("MODIFIED", obj, prev)
        for key, prev in old.items():
            if key not in fresh:
                await self._emit("DELETED", prev, prev)
        self._delivered(rv)
        return rv

    async def _watch(self, rv: str) -> str:
        async for etype, obj in self.client.watch(self.rt, rv, self.namespace):
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise ApiError(obj.get("code", 500), obj.get("reason", ""), obj.get("message", ""))
            rv = obj.get("metadata", {}).get("resourceVersion", rv)
            if etype == "BOOKMARK":
                self._delivered(rv)
                continue
            key = key_of(obj)
            obj = interned(obj)  # cached compactly: one copy of each key and short string across the cache
            prev = self.cache.get(key)
            if etype == "DELETED":
                self.cache.pop(key, None)
                space = self._by_ns.get(key[0])
                if space is not None:
                    space.pop(key, None)
                    if not space:
                        del self._by_ns[key[0]]
            else:
                self.cache[key] = obj
                self._by_ns.setdefault(key[0], {})[key] = obj
            await self._emit(etype, obj, prev)
            self._delivered(rv)
        return rv

    def _delivered(self, rv: str) -> None:
        if self._gate is not None and rv.isdigit():
            self._gate.delivered(self.rt, id(self), int(rv))

    async def _emit(self, etype: str, obj: dict, old: dict | None) -> None:
        for handler in self._handlers:
            try:
                result = handler(etype, obj, old)
                if asyncio.iscoroutine(result):
                    await result
            except Exception as err:  # noqa: BLE001 — a handler bug: reported loudly, the other handlers still run
                self.health.report(f"informer {self.rt.plural} handler", f"{etype} {key_of(obj)}", err)


class _Gone(Exception):
    """The watch's resourceVersion fell out of the server's history: relist."""


class InformerFactory:
    """One shared informer per (resource, namespace), as in client-go."""

    def __init__(self, client: TwinClient, health: Health | None = None, clock: GatedClock | None = None):
        self.client = client
        self.health = health or Health()
        self.clock = clock if isinstance(clock, GatedClock) else None
        self._informers: dict[tuple[str, str, str, str | None], Informer] = {}

    def informer(self, rt: ResourceType, namespace: str | None = None) -> Informer:
        key = (rt.group, rt.version, rt.plural, namespace)
        if key not in self._informers:
            self._informers[key] = Informer(self.client, rt, namespace, self.health, self.clock)
        return self._informers[key]

    def start(self) -> None:
        for informer in self._informers.values():
            informer.start()

    async def wait_synced(self, timeout_s: float = 10.0) -> None:
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self._informers.values())), timeout_s)

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
