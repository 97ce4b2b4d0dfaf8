"""Stop conditions (AWS FIS stop conditions, Chaos Mesh's abort on a status check): guards over the
steady state, watched while a fault is in place.

A profile declares them (`safety.stop_conditions: [{metric: not_ready_nodes, above: 1}, {metric:
inference_error_rate, above: 0.5, for_s: 30s}]`). Once the scenario's first fault is in, the guard
starts a `StopMonitor` thread that reads each metric every `poll_s` wall seconds; a value above its
limit for `for_s` cluster seconds is a breach: the monitor calls `on_breach(reading)` once — the guard
reverts every fault at once — and stops. The drill's next wait raises `StopConditionBreached` and the
record's verdict is `aborted`, with the reading as its reason.

Metrics (`METRICS`): `not_ready_nodes` and `unschedulable_nodes` read a node census (census.py: one
list, then a watch); `inference_error_rate`
(failed / all requests over the last `for_s`, at least 10 cluster seconds) is provided by the
inference load while it runs (a metric nobody provides reads as None: no breach).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

__all__ = ["METRICS", "StopReading", "StopMonitor"]

log = logging.getLogger(__name__)

METRICS = ("not_ready_nodes", "unschedulable_nodes", "inference_error_rate")
Reader = Callable[[float], "float | None"]  # window (cluster seconds) → value, None when unknown


@dataclass(frozen=True)
class StopReading:
    """A breached stop condition: what was read, the limit, and since when (cluster time, ISO)."""

    metric: str
    value: float
    above: float
    for_s: float
    since: str
    at: str

    def sentence(self) -> str:
        held = f" for {self.for_s:g}s" if self.for_s else ""
        return (f"aborted: stop condition {self.metric} > {self.above:g}{held} tripped (read {self.value:g} at "
                f"{self.at}, above since {self.since}); every fault was reverted at once")

    def to_dict(self) -> dict:
        return {"metric": self.metric, "value": self.value, "above": self.above, "for_s": self.for_s,
                "since": self.since, "at": self.at}


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
            reader = self.readers.get(cond.metric)
            try:
                value = reader(max(cond.for_s, 10.0)) if reader is not None else None
            except Exception as err:  # noqa: BLE001 — an unreadable metric is no breach; say so once in the log
                log.debug("stop condition %s not read: %s", cond.metric, err)
                value = None
            if value is None or value <= cond.above:
                self._above_since.pop(i, None)
                continue
            since = self._above_since.setdefault(i, now)
            if now - since >= cond.for_s:
                return StopReading(cond.metric, round(float(value), 4), cond.above, cond.for_s,
                                   self.clock.iso(_dt(since)), self.clock.iso(_dt(now)))
        return None

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
