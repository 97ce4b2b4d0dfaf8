"""A watch that delivers late, as an overloaded API server's watch cache does (`timings.watch_lag`).

Each event leaves `lag` twin seconds after it happened, in order, on the streams of clients (not of the
twin's own components: the cluster itself is not slower); the stream's end (server shutdown) is not
delayed. Lists and gets stay current, so a client that re-lists sees what its watch has not told it
yet: the `lagging-watch` defect proves a drill's verdict does not depend on how late its streams are.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from aiohttp import web

__all__ = ["LaggedQueue", "WATCH_LAG", "is_twin_component"]

WATCH_LAG = web.AppKey("watch_lag_s", float)  # app key: the lag in twin seconds (0: none)


def is_twin_component(request) -> bool:
    """The twin's own controllers, kubelets and gateway (User-Agent `twin-…`, `… twin`) are the cluster: the lag
    is what clients of the API server see, not a slower cluster."""
    agent = request.headers.get("User-Agent", "")
    return agent.startswith("twin-") or agent.endswith(" twin")


class LaggedQueue:
    """The watcher's queue as seen `lag_wall_s` later: get/get_nowait/empty/put_nowait like asyncio.Queue."""

    def __init__(self, source: asyncio.Queue, lag_wall_s: float, urgent: tuple[str, ...] = ("STOP",)):
        self._source, self._lag, self._urgent = source, lag_wall_s, urgent
        self._held: deque[tuple[float, Any]] = deque()
        self._arrived = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._take())

    async def _take(self) -> None:
        while True:
            item = await self._source.get()
            if item[0] in self._urgent:
                self._held.appendleft((0.0, item))
            else:
                self._held.append((self._loop.time() + self._lag, item))
            self._arrived.set()

    async def get(self) -> Any:
        while True:
            while not self._held:
                self._arrived.clear()
                await self._arrived.wait()
            due, _ = self._held[0]
            wait = due - self._loop.time()
            if wait <= 0:
                return self._held.popleft()[1]
            await asyncio.sleep(wait)

    def empty(self) -> bool:
        return not self._held or self._held[0][0] > self._loop.time()

    def get_nowait(self) -> Any:
        return self._held.popleft()[1]

    def put_nowait(self, item: Any) -> None:
        self._held.appendleft((0.0, item))

    def close(self) -> None:
        self._task.cancel()
