"""What the platform's on-call would see: the alerts Alertmanager holds, read over its API v2 (read-only).

`read_alerts` is one GET of `/api/v2/alerts` (the same call for a managed Alertmanager and a site's own).
`AlertWatch` polls it from the moment a fault is injected and stamps, in cluster time (the drill's Clock), when
each alert was first seen firing and when it was first seen gone; a drill's steps then wait on it until a
condition or a deadline. A stamp is the poll that saw the change, so it can be late by one poll period, never
early; the period is recorded with the stamps. Silenced or inhibited alerts count for the storm (they fired)
but not as a detection: nobody was told.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Mapping

from drills.core.clock import Clock
from drills.core.errors import CheckFailed

__all__ = ["Alert", "AlertWatch", "Seen", "read_alerts", "read_alert_rules"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Alert:
    """One alert as Alertmanager holds it."""

    name: str
    fingerprint: str
    labels: Mapping[str, str]
    state: str  # active | suppressed | unprocessed
    starts_at: str = ""  # as Alertmanager wrote it (the wall clock of the Prometheus that fired it)

    @property
    def notifies(self) -> bool:
        """Someone is told: not silenced, not inhibited."""
        return self.state != "suppressed"

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> "Alert":
        labels = dict(data.get("labels") or {})
        return cls(name=str(labels.get("alertname", "?")), fingerprint=str(data.get("fingerprint", "")),
                   labels=labels, state=str((data.get("status") or {}).get("state", "unprocessed")),
                   starts_at=str(data.get("startsAt", "")))


def read_alerts(alertmanager_url: str, timeout_s: float = 5.0) -> list[Alert]:
    """The alerts Alertmanager holds as active now (firing, whether or not silenced); CheckFailed when it does
    not answer or answers something else than its API's JSON list."""
    url = f"{alertmanager_url.rstrip('/')}/api/v2/alerts?active=true&silenced=true&inhibited=true&unprocessed=true"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            body = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise CheckFailed(f"Alertmanager {alertmanager_url}: cannot read /api/v2/alerts ({err})") from None
    if not isinstance(body, list):
        raise CheckFailed(f"Alertmanager {alertmanager_url}: /api/v2/alerts answered {type(body).__name__}, not a list")
    return [Alert.from_api(a) for a in body if isinstance(a, dict)]


def read_alert_rules(prometheus_url: str, timeout_s: float = 5.0) -> list[str] | None:
    """The names of the alerting rules Prometheus evaluates (GET /api/v1/rules?type=alert, read-only); None when it
    cannot be read (a site may expose only Alertmanager to the drills: then nothing is said about rules)."""
    url = f"{prometheus_url.rstrip('/')}/api/v1/rules?type=alert"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            groups = json.load(answer).get("data", {}).get("groups", [])
    except (urllib.error.URLError, OSError, ValueError, AttributeError) as err:
        log.warning("Prometheus %s: cannot read its alerting rules (%s)", prometheus_url, err)
        return None
    return [r.get("name", "?") for g in groups for r in g.get("rules", []) if r.get("type") == "alerting"]


@dataclass
class Seen:
    """One alert (by fingerprint) over the watch: first and last poll that saw it, and the poll that saw it gone."""

    alert: Alert
    first: datetime
    last: datetime
    gone: datetime | None = None
    notified: bool = False  # seen at least once not suppressed
    first_wall: float = 0.0  # time.monotonic() of the first poll that saw it
    gone_unix: float | None = None  # time.time() of the poll that saw it gone (the stack's own clock: Prometheus's)


@dataclass
class AlertWatch:
    """Polls Alertmanager every `period_s` wall seconds in a thread; `baseline` holds the alerts already active
    when it started (before the fault), which neither detect it nor count in its storm."""

    alertmanager_url: str
    clock: Clock
    period_s: float = 0.2
    seen: dict[str, Seen] = field(default_factory=dict)
    baseline: dict[str, Alert] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    polls: int = 0
    last_read: datetime | None = None  # cluster time of the last poll Alertmanager answered
    history: list[tuple[float, datetime]] = field(default_factory=list)  # (wall monotonic, cluster time) per poll
    unix: list[tuple[datetime, float]] = field(default_factory=list)  # (cluster time, time.time()) per poll

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "AlertWatch":
        """Read the baseline now (CheckFailed if Alertmanager does not answer), then poll in the background."""
        self.baseline = {a.fingerprint: a for a in read_alerts(self.alertmanager_url)}
        self._thread = threading.Thread(target=self._run, name="alert-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def raised(self, name: str, since: datetime | None = None,
               about: Callable[[Alert], bool] | None = None) -> datetime | None:
        """When alert `name` was first seen firing and notifying (cluster time), outside the baseline (and, given
        `since`, not firing before it: see `firing_before`; given `about`, an instance about the faulted object)."""
        floor = None if since is None else since - timedelta(seconds=self.period_s * self.clock.scale)
        with self._cond:
            times = [s.first for s in self.seen.values() if s.alert.name == name and s.notified
                     and (floor is None or s.first >= floor) and (about is None or about(s.alert))]
        return min(times) if times else None

    def raised_since(self, name: str, since: datetime, scale: float,
                     about: Callable[[Alert], bool] | None = None) -> datetime | None:
        """When alert `name` was raised, measured from `since` (the fault) the longer of two ways: on the cluster's
        clock, and in wall seconds × `scale` (the stack's own clock: a managed Prometheus scrapes and evaluates on
        the wall, dilated). They agree on a real cluster (scale 1) and on a twin running at its scale; when the
        twin's clock waited for its controllers (it holds still while they catch up) a wall-clock Prometheus
        worked through the hold for free and the cluster-clock reading is short — an alert 'at the fault's very
        instant' is a detection no site's cadence gives. The wall moment of `since` is the first poll that saw the
        cluster clock at or past it (one poll period of error). An instance first seen before the fault (by more than
        one poll period) is not counted: it was firing already (`firing_before`)."""
        with self._cond:
            floor = since - timedelta(seconds=self.period_s * self.clock.scale)  # one poll: the poll's own lag
            firsts = [s for s in self.seen.values() if s.alert.name == name and s.notified and s.first >= floor
                      and (about is None or about(s.alert))]
            start = next((wall for wall, at in self.history if at >= since), None)
        if not firsts:
            return None
        seen = min(firsts, key=lambda s: s.first)
        cluster_s = (seen.first - since).total_seconds()
        wall_s = (seen.first_wall - start) * scale if start is not None else cluster_s
        return since + timedelta(seconds=max(cluster_s, wall_s))

    def elsewhere(self, name: str, since: datetime, about: Callable[[Alert], bool]) -> list[Alert]:
        """Instances of `name` raised since `since` that are not `about` the faulted object (another node's)."""
        floor = since - timedelta(seconds=self.period_s * self.clock.scale)
        with self._cond:
            return [s.alert for s in self.seen.values()
                    if s.alert.name == name and s.notified and s.first >= floor and not about(s.alert)]

    def firing_before(self, name: str, since: datetime) -> list[Alert]:
        """Instances of `name` already firing before `since` (the fault): in the baseline, or first seen by a poll
        more than one poll period before it. None of them is the fault's detection (`raised_since` leaves them out):
        a monitoring that was already alerting cannot be shown to detect the fault (issue 30, class 1)."""
        floor = since - timedelta(seconds=self.period_s * self.clock.scale)
        with self._cond:
            early = [s.alert for s in self.seen.values() if s.alert.name == name and s.first < floor]
        return [a for a in self.baseline.values() if a.name == name] + early

    def resolved(self, name: str) -> datetime | None:
        """When the last firing instance of `name` was seen gone; None while one still fires (or none fired)."""
        with self._cond:
            mine = [s for s in self.seen.values() if s.alert.name == name]
        if not mine or any(s.gone is None for s in mine):
            return None
        return max(s.gone for s in mine)

    def gone(self, name: str, since: datetime | None = None) -> list[Seen]:
        """The instances of `name` seen gone (each with its last labels and the poll that saw it go), of those
        raised since `since` (the fault: less one poll period)."""
        floor = None if since is None else since - timedelta(seconds=self.period_s * self.clock.scale)
        with self._cond:
            return [s for s in self.seen.values() if s.alert.name == name and s.gone is not None
                    and (floor is None or s.first >= floor)]

    def unix_at(self, at: datetime) -> float | None:
        """time.time() of the first poll that read the cluster clock at or past `at` (None: no poll yet)."""
        with self._cond:
            return next((unix for cluster, unix in self.unix if cluster >= at), None)

    def distinct(self) -> list[Alert]:
        """Every alert (by fingerprint) that fired during the watch and was not firing before it."""
        with self._cond:
            return [s.alert for s in self.seen.values()]

    def wait(self, condition, deadline_ts: float) -> bool:
        """Wait (polls wake it) until `condition()` is true or the cluster clock passes `deadline_ts`."""
        with self._cond:
            while True:
                if condition():
                    return True
                if self.clock.timestamp() >= deadline_ts or self._stop.is_set():
                    return bool(condition())
                self._cond.wait(timeout=self.period_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                alerts = read_alerts(self.alertmanager_url)
            except CheckFailed as err:
                self.errors.append(str(err))
                log.warning("%s", err)
                alerts = None
            now, wall, unix = self.clock.now(), time.monotonic(), time.time()
            with self._cond:
                self.polls += 1
                self.history.append((wall, now))
                self.unix.append((now, unix))
                if alerts is not None:
                    self._update(alerts, now, wall, unix)
                    self.last_read = now
                self._cond.notify_all()
            self._stop.wait(self.period_s)

    def _update(self, alerts: list[Alert], now: datetime, wall: float = 0.0, unix: float | None = None) -> None:
        current = {a.fingerprint: a for a in alerts if a.fingerprint not in self.baseline}
        for fp, alert in current.items():
            seen = self.seen.get(fp)
            if seen is None:
                seen = self.seen[fp] = Seen(alert, now, now, first_wall=wall)
            seen.last, seen.alert, seen.gone, seen.gone_unix = now, alert, None, None  # back after it went
            seen.notified = seen.notified or alert.notifies
        for fp, seen in self.seen.items():
            if fp not in current and seen.gone is None:
                seen.gone, seen.gone_unix = now, time.time() if unix is None else unix
