"""Per-container log buffers of the twin's pods: what the kubelet's log files are to a real cluster.

The twin's workloads append lines (`twin_routes.write_stdout`: in-process for those in the twin's own process, as a
container runtime writes a log file; `POST /twin/v1/namespaces/{ns}/pods/{name}/log` for the others); the
`pods/log` subresource reads them back with kubectl's options. Lines carry their twin timestamp.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import AsyncIterator

from drills.core.clock import Clock

__all__ = ["PodLogs", "LogLine", "MAX_LINES"]

log = logging.getLogger(__name__)

MAX_LINES = 20000  # per container instance; older lines are dropped like a rotated log


@dataclass(frozen=True)
class LogLine:
    ts: float  # twin epoch seconds
    text: str


@dataclass
class _Buffer:
    lines: deque = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    total: int = 0  # lines ever appended: followers track their position with it
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


class PodLogs:
    """Log lines by (namespace, pod, container), current and previous container instance."""

    def __init__(self, clock: Clock):
        self.clock = clock
        # (namespace, pod) → container → buffer, so deleting a pod is one lookup
        self._current: dict[tuple[str, str], dict[str, _Buffer]] = {}
        self._previous: dict[tuple[str, str], dict[str, _Buffer]] = {}

    def append(self, namespace: str, pod: str, container: str, lines: list[str], at: float | None = None) -> int:
        """Add lines (stamped `at`, default twin now); returns how many were added."""
        buf = self._current.setdefault((namespace, pod), {}).setdefault(container, _Buffer())
        ts = self.clock.timestamp() if at is None else at
        for text in lines:
            buf.lines.append(LogLine(ts, text))
        buf.total += len(lines)
        self._wake(buf)
        return len(lines)

    def restart(self, namespace: str, pod: str, container: str) -> None:
        """The container restarted: its log becomes `previous` and a fresh one starts."""
        old = self._current.get((namespace, pod), {}).pop(container, None)
        if old is not None:
            self._previous.setdefault((namespace, pod), {})[container] = old
            old.closed = True
            self._wake(old)

    def read(self, namespace: str, pod: str, container: str, previous: bool = False) -> list[LogLine]:
        buf = (self._previous if previous else self._current).get((namespace, pod), {}).get(container)
        return list(buf.lines) if buf else []

    async def follow(self, namespace: str, pod: str, container: str) -> AsyncIterator[LogLine]:
        """Lines appended from now on, until the pod is deleted or the container restarts — every line written
        before the end included, as a kubelet's stream delivers a container's last lines after it exits."""
        buf = self._current.setdefault((namespace, pod), {}).setdefault(container, _Buffer())
        seen = buf.total
        while True:
            new = buf.total - seen
            if new > 0:
                seen = buf.total
                for line in list(buf.lines)[-min(new, len(buf.lines)):]:
                    yield line
                continue  # more may have come, or the end, while the reader took those
            if buf.closed:
                return
            await buf.changed.wait()
            buf.changed.clear()

    def drop(self, namespace: str, pod: str) -> None:
        """The pod is gone: forget its logs and end every follower."""
        for table in (self._current, self._previous):
            for buf in table.pop((namespace, pod), {}).values():
                buf.closed = True
                self._wake(buf)

    def close_all(self) -> None:
        """Server shutdown: end every follower."""
        for table in (self._current, self._previous):
            for bufs in table.values():
                for buf in bufs.values():
                    buf.closed = True
                    self._wake(buf)

    @staticmethod
    def _wake(buf: _Buffer) -> None:
        buf.changed.set()
