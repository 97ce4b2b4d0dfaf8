"""The reconcile loop every twin controller shares: a de-duplicating work queue of object keys,
delayed requeues in cluster time, and errors that requeue with backoff instead of killing the loop."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Hashable

from drills.core.clock import DilatedClock
from drills.twin.controllers.client import TwinClient
from drills.twin.controllers.informer import InformerFactory

__all__ = ["Controller", "ControllerContext"]

log = logging.getLogger(__name__)


@dataclass
class ControllerContext:
    """What every controller gets: the API client, shared informers, the twin clock and the profile."""

    client: TwinClient
    informers: InformerFactory
    clock: DilatedClock
    profile: Any = None
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def wall(self, cluster_seconds: float) -> float:
        return max(0.0, cluster_seconds) / self.clock.scale

    def jittered(self, seconds: float, jitter: float) -> float:
        """`seconds` ± `jitter` (a fraction), never negative."""
        if jitter <= 0:
            return seconds
        return max(0.0, seconds * (1 + self.rng.uniform(-jitter, jitter)))


class Controller:
    """Subclasses set `name`, wire informers in `setup()` and implement `reconcile(key)`."""

    name = "controller"

    def __init__(self, ctx: ControllerContext):
        self.ctx = ctx
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._pending: set[Hashable] = set()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._task: asyncio.Task | None = None

    def setup(self) -> None:
        """Register informer handlers (called before informers start)."""

    async def reconcile(self, key: Hashable) -> None:
        raise NotImplementedError

    def enqueue(self, key: Hashable) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def enqueue_after(self, key: Hashable, cluster_seconds: float) -> None:
        """Reconcile `key` after `cluster_seconds` of twin time (an earlier request wins)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + self.ctx.wall(cluster_seconds)
        timer = self._timers.get(key)
        if timer is not None and not timer.cancelled() and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._run(), name=f"controller:{self.name}")
        return self._task

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def _run(self) -> None:
        failures: dict[Hashable, int] = {}
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            try:
                await self.reconcile(key)
                failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                n = failures[key] = failures.get(key, 0) + 1
                log.log(logging.WARNING if n > 3 else logging.DEBUG,
                        "%s: reconcile %s failed (%d): %s", self.name, key, n, err)
                asyncio.get_running_loop().call_later(min(0.02 * 2 ** n, 1.0), self.enqueue, key)
