"""The twin's clock waits for the twin (issue 32): cluster time never passes work the twin has not done.

A dilated clock alone runs on the wall clock: when the machine is busy (other processes, a twin still
starting thousands of pods) the controllers fall behind and cluster time keeps running, so a job is
"placed after 18 cluster minutes" that a real cluster places at once. Here the twin's work registers
itself as a *hold* — a due time in cluster time — and reports when it is done:

    cluster time = min(dilated wall time, the earliest due time of any hold not yet released)

and never goes back — for the twin and for its clients alike: a hold that lowers the earliest due is raised to what
a client could already have read (its due was read before the twin was preempted, and meanwhile the gate let
clients run on), and clients keep their last reading while the gate is being lowered. A quiet twin holds nothing
for long, so it runs as the dilated clock it was; a busy one runs slower on the wall clock, and what happens in
cluster time is what a fast machine would show.

What holds (one place each): a controller key enqueued and not yet reconciled (due: when it was
enqueued); a delayed requeue (`call_at`: due at its cluster time, fired only when the clock reaches it,
so a requeue never runs early in cluster time after a stall); a write the twin's own informers have not
yet handed to their handlers (`written`/`delivered`); the scheduler's binds in flight.

No deadlock: a hold first in line that keeps the clock back longer than `stall_bound_s` of wall time (a
controller that hangs) is dropped with a warning, and the clock goes on. A long honest backlog is no stall:
its first hold changes as the work is done.

Clients on the same host follow the same clock: the twin publishes the earliest due time in a small
shared file (`GATE_FILE` in its state dir, a seqlock of three doubles); `FollowingClock` (followclock.py)
reproduces the dilated clock from twin.json's epoch and monotonic anchor and applies the same min, so drills, their
deadlines and the twin's object timestamps agree.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import Any, Callable, Hashable

from drills.core.clock import DilatedClock

__all__ = ["GatedClock", "Hold", "GATE_FILE", "STALL_BOUND_S", "boot_id", "held_s"]

log = logging.getLogger(__name__)

GATE_FILE = "clock.gate"
# Wall seconds one hold first in line may keep the clock before it is dropped: a hung controller must not stop
# time. Longer than any one honest reconcile (a scheduling cycle over thousands of pending pods).
STALL_BOUND_S = 60.0
_LAYOUT = struct.Struct("<Qdd")  # seqlock counter, earliest due (cluster seconds; inf: none), first in line since
# Then the gate's history, so a wall stamp taken elsewhere (the load generator's) converts to the cluster time it
# had then: a count, then a ring of (monotonic instant, earliest due from then on), one entry per change.
_COUNT = struct.Struct("<Q")
_ENTRY = struct.Struct("<dd")
_RING = 65536
_RING_AT = _LAYOUT.size + _COUNT.size
_SIZE = _RING_AT + _RING * _ENTRY.size


def held_s(clock: DilatedClock, due: float, since: float) -> float:
    """Wall seconds a hold first in line since `since` (monotonic) has kept the clock at `due`: from when the
    dilated clock passed `due`, or from when it came first, whichever is later (a stall, when it is long)."""
    passed = clock.wall_anchor + (due - clock.epoch) / clock.scale
    return time.monotonic() - max(passed, since)


def boot_id() -> str:
    """This boot's id: monotonic clocks compare only within one boot of one host."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass(eq=False)
class Hold:
    """Work due at `due` (cluster seconds) that the clock must not pass until released."""

    due: float
    what: str
    on_due: Callable[[], None] | None = None  # a timer: run when the clock reaches `due`
    live: bool = True
    ready: bool = False  # a timer whose wall time has come (it fires as soon as nothing earlier holds)
    timer: Any = None


@dataclass
class GatedClock(DilatedClock):
    """The twin's clock: a DilatedClock that waits for the holds (see the module docstring)."""

    stall_bound_s: float = STALL_BOUND_S

    def __post_init__(self) -> None:
        self._heap: list[tuple[float, int, Hold]] = []
        self._seq = itertools.count()
        self._last = -inf
        self._readers: dict[Hashable, dict[int, int]] = {}  # watched key → reader → resourceVersion delivered
        self._unseen: dict[Hashable, list[tuple[int, Hold]]] = {}  # watched key → writes not delivered to all
        self._mm: mmap.mmap | None = None
        self._published = 0
        self._history_n, self._history_due = 0, -inf
        self._top_hold: Hold | None = None  # the hold first in line, first seen there at `_top_since` (monotonic)
        self._top_since = time.monotonic()
        self._shared: tuple[float, float] = (inf, self._top_since)  # (earliest due, since) for other threads' reads
        self._owner = threading.get_ident()  # the loop's thread: the only one that holds, releases and pops
        self._gate_path: Path | None = None
        self.stalls = 0  # holds dropped by the stall bound (a figure for tests and benches)

    # -- reading -----------------------------------------------------------------------------------
    def dilated(self) -> float:
        """Cluster time as the wall clock alone would have it."""
        return DilatedClock.timestamp(self)

    def timestamp(self) -> float:
        now = self.dilated()
        if threading.get_ident() != self._owner:  # another thread (the fabric's SSH servers): the published gate
            due, since = self._shared
            return due if due < now and held_s(self, due, since) <= self.stall_bound_s else now
        top = self._top(now)
        if top is not None and top.due < now:
            now = top.due
        if now < self._last:
            now = self._last
        self._last = now
        return now

    def _top(self, dilated: float) -> Hold | None:
        heap, dropped = self._heap, False
        while heap:
            hold = heap[0][2]
            if not hold.live:
                heapq.heappop(heap)
                continue
            if hold is not self._top_hold:
                self._publish()  # first in line from now on: its stall is measured from here
            held = held_s(self, hold.due, self._top_since)
            if held > self.stall_bound_s and not hold.ready:
                log.warning("twin clock: %s held cluster time for %.0f s of wall time (bound %.0f s): going on "
                            "without it", hold.what, held, self.stall_bound_s)
                hold.live, dropped = False, True
                self.stalls += 1
                heapq.heappop(heap)
                continue
            break
        top = heap[0][2] if heap else None
        if dropped or (top is not None and top.ready):  # a timer first in line fires (never from inside a read)
            self._publish()
            self._soon(self._advance)
        return top

    def first_hold(self) -> dict | None:
        """What keeps the clock now (served at /twin/v1/clock for diagnosis), or None."""
        top = self._top(self.dilated())
        if top is None:
            return None
        return {"what": top.what, "due": top.due, "ready": top.ready, "holds": sum(h.live for _, _, h in self._heap),
                "held_s": round(max(0.0, held_s(self, top.due, self._top_since)), 3), "stalls": self.stalls}

    # -- holding -----------------------------------------------------------------------------------
    def hold(self, due: float | None, what: str) -> Hold:
        """Keep the clock at or before `due` (default: now) until `release(hold)`."""
        h = Hold(self.timestamp() if due is None else due, what)
        self._push(h)
        return h

    def release(self, hold: Hold | None) -> None:
        if hold is None or not hold.live:
            return
        hold.live = False
        if hold.timer is not None:
            hold.timer.cancel()
        heap, popped = self._heap, False
        while heap and not heap[0][2].live:  # the earliest may have gone (this one, or ones before it)
            heapq.heappop(heap)
            popped = True
        if popped:
            self._advance()

    def call_at(self, due: float, on_due: Callable[[], None], what: str) -> Hold:
        """Run `on_due()` (in the running loop) when the clock reaches `due`; the clock waits for it."""
        h = Hold(due, what, on_due)
        self._push(h)
        self._arm(h)
        return h

    def _arm(self, h: Hold) -> None:
        import asyncio

        wall = max(0.0, h.due - self.dilated()) / self.scale
        h.timer = asyncio.get_running_loop().call_later(wall, self._wake, h)

    def _wake(self, h: Hold) -> None:
        if not h.live:
            return
        if self.dilated() < h.due:  # the loop may run a timer up to its clock resolution early
            self._arm(h)
            return
        h.ready = True
        if self._top(self.dilated()) is h:
            self._advance()

    def _advance(self) -> None:
        """The earliest hold went: a timer now first in line fires (from the loop, never inside the release that
        let it: a release must not run other work re-entrantly), holding the clock at its due time until its
        work is queued; then the new earliest is published."""
        top = self._top(self.dilated())
        if top is not None and top.ready and top.due <= self.dilated():
            top.ready = False
            self._soon(lambda: self._fire(top), inline=True)
        self._publish()

    def _fire(self, h: Hold) -> None:
        try:
            if h.live and h.on_due is not None:
                h.on_due()
        finally:
            self.release(h)

    def _push(self, h: Hold) -> None:
        first = not self._heap or h.due < self._heap[0][0]
        if first:
            # A hold that lowers the gate must not lower it below what a client may already have read: its due was
            # read some time before (a process preempted between reading the clock and pushing, on a busy host),
            # and until now the gate let clients run on to the dilated clock. The gate is marked as being written
            # first (clients then stay at their last reading), then the due is raised to what a client could read.
            self._begin_publish()
            floor = min(self.dilated(), self._shared[0])
            if h.due < floor:
                h.due = floor
        heapq.heappush(self._heap, (h.due, next(self._seq), h))
        if first:
            self._publish()

    @staticmethod
    def _soon(fn: Callable[[], None], inline: bool = False) -> None:
        import asyncio

        try:
            asyncio.get_running_loop().call_soon(fn)
        except RuntimeError:  # no loop (a unit test, a thread): now, or at the next release
            if inline:
                fn()

    # -- watches: a write holds until the twin's own informers delivered it -------------------------
    def watch(self, key: Hashable, reader: int) -> None:
        self._readers.setdefault(key, {})[reader] = 0

    def unwatch(self, key: Hashable, reader: int) -> None:
        readers = self._readers.get(key, {})
        readers.pop(reader, None)
        if not readers:
            self._readers.pop(key, None)
            for _, h in self._unseen.pop(key, []):
                self.release(h)
        else:
            self._settle(key)

    def written(self, key: Hashable, rv: int) -> None:
        """The store committed `rv` on `key`: held until every reader of `key` delivered it."""
        if self._readers.get(key):
            self._unseen.setdefault(key, []).append((rv, self.hold(None, f"watch event {rv} of {key}")))

    def delivered(self, key: Hashable, reader: int, rv: int) -> None:
        readers = self._readers.get(key)
        if readers is not None and reader in readers and rv > readers[reader]:
            readers[reader] = rv
            self._settle(key)

    def _settle(self, key: Hashable) -> None:
        unseen, readers = self._unseen.get(key), self._readers.get(key)
        if not unseen or not readers:
            return
        low = min(readers.values())
        n = 0
        while n < len(unseen) and unseen[n][0] <= low:
            self.release(unseen[n][1])
            n += 1
        if n:
            del unseen[:n]

    # -- publishing to clients on this host --------------------------------------------------------
    def publish_to(self, state_dir: str | Path) -> dict:
        """Share the earliest due time in `state_dir/GATE_FILE`; returns what twin.json says of this clock."""
        path = Path(state_dir) / GATE_FILE
        with open(path, "wb") as fh:
            fh.write(_LAYOUT.pack(0, inf, time.monotonic()) + bytes(_SIZE - _LAYOUT.size))
        fd = os.open(path, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, _SIZE)
        finally:
            os.close(fd)
        self._gate_path = path
        self._publish()
        return {"epoch": self.epoch, "anchor": self.wall_anchor, "scale": self.scale, "gate": str(path.resolve()),
                "boot": boot_id(), "stall_bound_s": self.stall_bound_s}

    def _begin_publish(self) -> None:
        """Mark the gate as being written (an odd count): from here until `_publish`, clients on this host keep their
        last reading, and this process's other threads the gate's due as it stood."""
        due, since = self._shared
        self._shared = (min(due, self.dilated()), since)
        if self._mm is None:
            return
        self._published += 1
        _COUNT.pack_into(self._mm, 0, 2 * self._published - 1)

    def _publish(self) -> None:
        """Note which hold is first in line (and since when), and share its due time with clients."""
        heap = self._heap
        while heap and not heap[0][2].live:
            heapq.heappop(heap)
        top = heap[0][2] if heap else None
        if top is not self._top_hold:
            self._top_hold, self._top_since = top, time.monotonic()
        due = heap[0][0] if heap else inf
        self._shared = (due, self._top_since)
        if self._mm is None:
            return
        self._published += 1
        _LAYOUT.pack_into(self._mm, 0, 2 * self._published - 1, due, self._top_since)
        _LAYOUT.pack_into(self._mm, 0, 2 * self._published, due, self._top_since)
        if due != self._history_due:  # the history: one entry per change of the earliest due
            self._history_due = due
            _ENTRY.pack_into(self._mm, _RING_AT + (self._history_n % _RING) * _ENTRY.size, time.monotonic(), due)
            self._history_n += 1
            _COUNT.pack_into(self._mm, _LAYOUT.size, self._history_n)

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
