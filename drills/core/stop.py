"""Stop conditions (AWS FIS stop conditions, Chaos Mesh's abort on a status check): guards over the
steady state, watched while a fault is in place.

A profile declares them (`safety.stop_conditions: [{metric: not_ready_nodes, above: 1}, {metric:
inference_error_rate, above: 0.5, for_s: 30s}]`). Once the scenario's first fault is in, the guard
starts a `StopMonitor` thread that reads each metric every `poll_s` wall seconds; a value above its
limit for `for_s` cluster seconds is a breach: the monitor calls `on_breach(reading)` once — the guard
reverts every fault at once — and stops. The drill's next wait raises `StopConditionBreached` and the
record's verdict is `aborted`, with the reading as its reason.

Metrics (`METRICS`): `not_ready_nodes` and `unschedulable_nodes` read a node census (census.py: one
list, then a watch); `inference_error_rate` (failed / all requests of the window the load's results cover)
is provided by the inference load while it runs.

Windows are cluster time with data coverage: a condition is read over max(for_s, MIN_WINDOW_S, the reader's
`min_window_s`) — a reader whose source reports in flushes (the load generator's buckets) declares the
shortest window its flushes can fill, so a few cluster seconds at 60× are widened, never judged empty. A
reading is a number, None (nothing known yet: the source has not reported once — no change) or `NoResults`
(the source should have covered the window and did not: the load ran and no request completed, or its
reports stopped), which is not healthy: it never resets a guard, and holds like a reading above the limit —
a full outage trips the guard. Before the scenario's first fault the guard reads every condition once
(`breached_now`): one already above its limit refuses the injection (the platform is not in its steady state).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

__all__ = ["METRICS", "MIN_WINDOW_S", "NoResults", "StopReading", "StopMonitor"]

log = logging.getLogger(__name__)

METRICS = ("not_ready_nodes", "unschedulable_nodes", "inference_error_rate")
MIN_WINDOW_S = 10.0  # cluster seconds: the shortest window any condition is judged over
Reader = Callable[[float], "float | NoResults | None"]  # window (cluster seconds) → value | not covered | unknown


@dataclass(frozen=True)
class NoResults:
    """A window the metric's source should have covered but did not (why: for the record's sentence)."""

    why: str


@dataclass(frozen=True)
class StopReading:
    """A breached stop condition: what was read, the limit, and since when (cluster time, ISO)."""

    metric: str
    value: float | None  # None: the window held no result (`no_results` says why)
    above: float
    for_s: float
    since: str
    at: str
    window_s: float = 0.0  # cluster seconds the reading covered
    no_results: str | None = None
    before_fault: bool = False  # read before the scenario's first fault: nothing was injected

    def sentence(self) -> str:
        held = f" for {self.for_s:g}s" if self.for_s else ""
        read = (f"no results over {self.window_s:g}s: {self.no_results}" if self.value is None
                else f"read {self.value:g}")
        if self.before_fault:
            return (f"aborted: stop condition {self.metric} > {self.above:g} was already breached before the fault "
                    f"({read} at {self.at}): nothing was injected, the platform is not in its steady state")
        return (f"aborted: stop condition {self.metric} > {self.above:g}{held} tripped ({read} at "
                f"{self.at}, above since {self.since}); every fault was reverted at once")

    def to_dict(self) -> dict:
        return {"metric": self.metric, "value": self.value, "above": self.above, "for_s": self.for_s,
                "since": self.since, "at": self.at, "window_s": self.window_s, "no_results": self.no_results,
                "before_fault": self.before_fault}


class StopMonitor:
    """Watches `conditions` (profile StopCondition models) with `readers` until stopped or breached."""

    def __init__(self, conditions, readers: dict[str, Reader], clock, on_breach: Callable[[StopReading], None],
                 poll_s: float = 0.2) -> None:
        self.conditions, self.readers, self.clock, self.on_breach = list(conditions), readers, clock, on_breach
        self.poll_s = poll_s
        self.breach: StopReading | None = None
        self._stop = threading.Event()
        self._above_since: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name="drills-stop-conditions", daemon=True)

    def start(self) -> "StopMonitor":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def check_once(self) -> StopReading | None:
        """Read every condition once; the first that has held long enough, else None."""
        now = self.clock.timestamp()
        for i, cond in enumerate(self.conditions):
            window, value = self._read(cond)
            if value is None:  # nothing known yet: no breach, and no reset either
                continue
            if not isinstance(value, NoResults) and value <= cond.above:  # healthy: a result within the limit
                self._above_since.pop(i, None)
                continue
            since = self._above_since.setdefault(i, now)
            if now - since >= cond.for_s:
                return self._reading(cond, value, window, since, now)
        return None

    def breached_now(self) -> StopReading | None:
        """Before the first fault: the first condition whose reading is above its limit now (a window without
        results is not held against a platform not yet faulted: the load may have only just begun)."""
        now = self.clock.timestamp()
        for cond in self.conditions:
            window, value = self._read(cond)
            if value is not None and not isinstance(value, NoResults) and value > cond.above:
                return self._reading(cond, value, window, now, now, before_fault=True)
        return None

    def _read(self, cond) -> tuple[float, "float | NoResults | None"]:
        reader = self.readers.get(cond.metric)
        if reader is None:
            return 0.0, None
        window = max(cond.for_s, MIN_WINDOW_S, float(getattr(reader, "min_window_s", 0.0)))
        try:
            return window, reader(window)
        except Exception as err:  # noqa: BLE001 — an unreadable metric is unknown; say so in the log
            log.debug("stop condition %s not read: %s", cond.metric, err)
            return window, None

    def _reading(self, cond, value, window: float, since: float, now: float, before_fault: bool = False) -> StopReading:
        blind = isinstance(value, NoResults)
        return StopReading(cond.metric, None if blind else round(float(value), 4), cond.above, cond.for_s,
                           self.clock.iso(_dt(since)), self.clock.iso(_dt(now)), window_s=round(window, 3),
                           no_results=value.why if blind else None, before_fault=before_fault)

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = self.check_once()
            if reading is not None:
                self.breach = reading
                log.warning("%s", reading.sentence())
                self.on_breach(reading)
                return
            self._stop.wait(self.poll_s)


def _dt(ts: float):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc)
