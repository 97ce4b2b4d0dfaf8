"""The reconcile loop every twin controller shares: a de-duplicating work queue of object keys,
delayed requeues in cluster time, and errors that requeue with backoff instead of killing the loop.

Errors a real controller lives with (an API answer, a dropped connection, a timeout, failed file I/O)
requeue quietly.
Any other exception is a bug in the twin: it is reported to the twin's Health (logged with its
traceback, served at /twin/v1/health, failing the e2e test whose twin it broke) and the key requeues.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Hashable

import aiohttp

from drills.core.clock import DilatedClock
from drills.core.gatedclock import GatedClock, Hold
from drills.twin.controllers.client import ApiError, TwinClient
from drills.twin.controllers.informer import InformerFactory
from drills.twin.health import Health

__all__ = ["Controller", "ControllerContext", "EXPECTED_ERRORS"]

# What a controller meets in ordinary life: answers of the API server, connections that drop, timeouts.
# OSError: a workload's file I/O (the checkpoint store) fails as a real one can (defects make it so).
EXPECTED_ERRORS = (ApiError, aiohttp.ClientError, asyncio.TimeoutError, OSError)

log = logging.getLogger(__name__)

# A requeue on the gated clock runs this long after its time (cluster seconds), as a real timer fires after its
# delay, never at it: the clock then reads just past the moment the work was due, not exactly it (a training
# step due then reads as 7959.9999999 at exactly its time, and the job never printed it: it stopped).
TIMER_SLACK_S = 1e-3


@dataclass
class ControllerContext:
    """What every controller gets: the API client, shared informers, the twin clock and the profile."""

    client: TwinClient
    informers: InformerFactory
    clock: DilatedClock
    profile: Any = None
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    health: Health = field(default_factory=Health)

    def wall(self, cluster_seconds: float) -> float:
        return max(0.0, cluster_seconds) / self.clock.scale

    def hold(self, what: str) -> Hold | None:
        """Work to do now: the twin's clock waits until `release(hold)` (gatedclock.py); None on a plain clock."""
        return self.clock.hold(None, what) if isinstance(self.clock, GatedClock) else None

    def release(self, hold: Hold | None) -> None:
        if hold is not None:
            self.clock.release(hold)  # type: ignore[attr-defined]

    def jittered(self, seconds: float, jitter: float) -> float:
        """`seconds` ± `jitter` (a fraction), never negative."""
        if jitter <= 0:
            return seconds
        return max(0.0, seconds * (1 + self.rng.uniform(-jitter, jitter)))


class Controller:
    """Subclasses set `name`, wire informers in `setup()` and implement `reconcile(key)`."""

    name = "controller"
    # Reconciles in flight at once (controller-runtime's MaxConcurrentReconciles); never two of one key: a key
    # enqueued while it is being reconciled runs again after, as client-go's work queue does.
    workers = 1

    def __init__(self, ctx: ControllerContext):
        self.ctx = ctx
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._pending: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._timers: dict[Hashable, asyncio.TimerHandle | Hold] = {}
        self._holds: dict[Hashable, Hold | None] = {}  # key → the hold keeping the twin's clock until it is reconciled
        self._tasks: list[asyncio.Task] = []

    def setup(self) -> None:
        """Register informer handlers (called before informers start)."""

    async def reconcile(self, key: Hashable) -> None:
        raise NotImplementedError

    def enqueue(self, key: Hashable) -> None:
        if key not in self._pending:
            self._pending.add(key)
            if key not in self._holds:
                self._holds[key] = self.ctx.hold(f"{self.name} reconcile of {key}")
            if key not in self._processing:
                self._queue.put_nowait(key)

    @property
    def backlog(self) -> int:
        """Keys waiting for a reconcile (timers not counted)."""
        return len(self._pending)

    def enqueue_after(self, key: Hashable, cluster_seconds: float) -> None:
        """Reconcile `key` after `cluster_seconds` of twin time (an earlier request wins); on the twin's gated
        clock, when cluster time reaches it (never early after a stall), and the clock waits for it."""
        clock = self.ctx.clock
        if isinstance(clock, GatedClock):
            due = clock.timestamp() + max(0.0, cluster_seconds) + TIMER_SLACK_S
            held = self._timers.get(key)
            if isinstance(held, Hold) and held.live and held.due <= due:
                return
            clock.release(held if isinstance(held, Hold) else None)
            self._timers[key] = clock.call_at(due, lambda: self._fire(key), f"{self.name} requeue of {key}")
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + self.ctx.wall(cluster_seconds)
        timer = self._timers.get(key)
        if timer is not None and not timer.cancelled() and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def start(self) -> list[asyncio.Task]:
        self._tasks = [asyncio.create_task(self._run(), name=f"controller:{self.name}:{i}")
                       for i in range(max(1, self.workers))]
        return self._tasks

    async def stop(self) -> None:
        for timer in self._timers.values():
            if isinstance(timer, Hold):
                self.ctx.release(timer)
            else:
                timer.cancel()
        for hold in self._holds.values():
            self.ctx.release(hold)
        self._holds.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def _run(self) -> None:
        failures = self._failures
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            self._processing.add(key)
            try:
                await self.reconcile(key)
                failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except EXPECTED_ERRORS as err:
                n = failures[key] = failures.get(key, 0) + 1
                log.log(logging.WARNING if n > 3 else logging.DEBUG,
                        "%s: reconcile %s failed (%d): %s", self.name, key, n, err)
                asyncio.get_running_loop().call_later(min(0.02 * 2 ** n, 1.0), self.enqueue, key)
            except Exception as err:  # noqa: BLE001 — a bug: reported loudly (Health), never swallowed
                n = failures[key] = failures.get(key, 0) + 1
                self.ctx.health.report(f"controller {self.name}", key, err)
                asyncio.get_running_loop().call_later(min(0.02 * 2 ** n, 1.0), self.enqueue, key)
            finally:
                self._processing.discard(key)
                done = self._holds.pop(key, None)
                if key in self._pending:  # enqueued again while it ran: due again from now
                    self._holds[key] = self.ctx.hold(f"{self.name} reconcile of {key}")
                    self._queue.put_nowait(key)
                self.ctx.release(done)  # last: the clock may move on now
