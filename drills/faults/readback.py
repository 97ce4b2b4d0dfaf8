"""A revert verified by reading, not by the API's "OK" (DESIGN §5b): what a fault kind's `verify` returns.

A revert's answer says the write was accepted; it does not say the platform stayed that way. A node-health
agent cordons the node again a few seconds after the drill's uncordon, a switch's config agent shuts the
port again after `no shutdown`: the drill must not print "↺ reverted" over that. So every fault kind reads
back what it undid (`verify(target, undo, record) -> Reading`), after a settle period in cluster time
(`safety.revert_settle_s`) and again at the end of the scenario; a fault that is back keeps its journal
entry open and makes the record `revert_failed`, citing each reading (object, value, source).

`Reading.undone` is three-valued on purpose: True (read, and nothing of ours is in place), False (read, and
the fault is back or still there), None (could not be read): unknown is not healthy, so None fails too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Observation", "Reading", "read", "nothing_to_undo", "unreadable", "wait_until_clock", "SETTLE_POLL_WALL_S"]

log = logging.getLogger(__name__)

SETTLE_POLL_WALL_S = 0.05  # wall seconds between two looks at the clock while a settle period runs


@dataclass(frozen=True)
class Observation:
    """One value read from the platform: of which object, what it was, and where it was read."""

    object: str  # "node gpu-train-01", "leaf-1 Ethernet0", "locust pid 4242"
    value: Any  # JSON-serialisable: what was read ("unschedulable=true", {"admin": "up", "oper": "down"})
    source: str  # "nodes/gpu-train-01 @ rv 1234", "ssh leaf-1: show interfaces status Ethernet0"
    ok: bool = True  # this value is as the revert left it (False: it is the fault, back)

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.object, "value": self.value, "source": self.source, "ok": self.ok}

    def sentence(self) -> str:
        value = ", ".join(f"{k} {v}" for k, v in self.value.items()) if isinstance(self.value, dict) else self.value
        return f"{self.object}: {value} (read from {self.source})"


@dataclass(frozen=True)
class Reading:
    """A fault kind's read-back of one revert: every observation, and whether the fault is gone."""

    kind: str
    target: str
    observations: tuple[Observation, ...] = ()
    error: str | None = None  # why it could not be read (then `undone` is None)
    at: str | None = None  # cluster time of the reading (ISO), set by whoever reads it on a clock
    when: str = ""  # "settled" (after the settle period) | "end" (end of the scenario) | "revert" (drills revert)
    left: tuple[str, ...] = field(default=())  # what of ours is still in place (pids, pods, files), for the diff

    @property
    def undone(self) -> bool | None:
        if self.error is not None:
            return None
        return all(o.ok for o in self.observations)

    @property
    def back(self) -> tuple[Observation, ...]:
        """The observations that show the fault (or part of it) in place."""
        return tuple(o for o in self.observations if not o.ok)

    def sentence(self) -> str:
        """One line for people: what was read that shows the fault back (or why nothing could be read)."""
        if self.error is not None:
            return f"{self.kind} on {self.target}: the revert could not be verified ({self.error})"
        if not self.back:
            return f"{self.kind} on {self.target}: verified undone"
        after = {"settled": " after the settle period", "end": " at the end of the scenario"}.get(self.when, "")
        return f"{self.kind} on {self.target} is back{after}: " + "; ".join(o.sentence() for o in self.back)

    def stamped(self, at: str, when: str) -> "Reading":
        return Reading(self.kind, self.target, self.observations, self.error, at, when, self.left)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "undone": self.undone, "when": self.when, "at": self.at,
                "observations": [o.to_dict() for o in self.observations], "error": self.error,
                "left": list(self.left)}


def read(kind: str, target: str, reader: Callable[[], tuple[list[Observation], tuple[str, ...]]],
         attempts: int = 2) -> Reading:
    """Run a fault module's `reader` (→ observations, what is left); a read that raises is tried once more,
    then the Reading says it could not be read (undone None), never that the fault is gone."""
    last: BaseException | None = None
    for attempt in range(attempts):
        try:
            observations, left = reader()
            return Reading(kind, target, tuple(observations), left=tuple(left))
        except Exception as err:  # noqa: BLE001 — an unread state is reported as such, never as undone
            last = err
            log.debug("read-back of %s on %s failed (attempt %d): %s", kind, target, attempt + 1, err)
    status = getattr(last, "status", None)
    why = f"{status} {getattr(last, 'reason', '')}".strip() if status is not None else (str(last) or type(last).__name__)
    return Reading(kind, target, error=why)


def nothing_to_undo(kind: str, target: str, why: str) -> Reading:
    """A kind whose revert has nothing to put back (a pod kill: the ReplicaSet replaces the pods)."""
    return Reading(kind, target, (Observation(target, "nothing of the drill's in place", why),))


def unreadable(kind: str, target: str, why: str) -> Reading:
    return Reading(kind, target, error=why)


def wait_until_clock(clock, deadline_ts: float, stop: Callable[[], bool] | None = None) -> None:
    """Wait until the cluster `clock` reaches `deadline_ts` (a settle period is cluster time: one minute on a
    60× twin is one wall second), looking at the clock, not sleeping a computed wall time; `stop()` ends it early."""
    while clock.timestamp() < deadline_ts:
        if stop is not None and stop():
            return
        remaining_wall = clock.wall_seconds(deadline_ts - clock.timestamp())
        time.sleep(max(0.0, min(SETTLE_POLL_WALL_S, remaining_wall)))
