"""Waiting that ends on an event: list+watch streams and log follows merged into one queue.

`EventMerger` runs list+watch streams (and pod log follows) in daemon threads and hands their events to
one queue, so a check reacts to whichever comes first and never sleeps blindly. `wait_for` is the
single-resource form. Watches re-list on 410 Gone. (`drills.core.kube` re-exports these names.)

**A deadline ends the waiting, not the reading.** What a stream delivers can lag the cluster (an API
server's watch is late, this machine is starved; on the twin one lagging wall second is ten cluster
minutes). So when the deadline passes, or a caller is about to accept a condition on time alone,
`catch_up()` reads the cluster once more (each watched list, each followed log), hands over what the
streams had not delivered yet, and only then does the wait end: a verdict never depends on how late
the streams were (`drills.core.catchup`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator

from drills.core.catchup import LogSource, WatchSource
from drills.core.clock import Clock
from drills.core.errors import DrillError

if TYPE_CHECKING:
    from drills.core.kube import Cluster

__all__ = ["pod_names", "wait_pods_gone", "EventMerger", "WatchEvent", "wait_for", "retry_at", "list_pages", "stream_lines", "obj_get", "short_reason"]

log = logging.getLogger(__name__)

_WATCH_CHUNK_S = 5.0  # wall seconds per watch request, so stopping a stream never waits long
RETRY_S = 5.0  # cluster seconds between retries of a refused request (kubectl drain's interval)
RETRY_MIN_WALL_S = 0.05  # ... but not more often than this on this machine (600×: every 30 cluster seconds)
_DRAIN_WALL_S = 10.0  # how long a catch-up waits for a removed pod's log follow to deliver its last lines
_CATCH_UP_ROUNDS = 4  # a catch-up's rounds: the first reads every stream, later ones the logs it led to
PAGE = 500  # items per list request (kubectl's --chunk-size): a large cluster's lists come in chunks


@dataclass(frozen=True)
class WatchEvent:
    """One event from a merged stream: `source` names the stream, `type` is ADDED/MODIFIED/DELETED/LOG/END."""

    source: str
    type: str
    obj: Any  # a dict for watches (raw JSON), a str line for logs, None for END
    wall: float = 0.0


class EventMerger:
    """Several list+watch and log-follow streams feeding one queue; `events(deadline)` yields them in order.

    Streams run in daemon threads; `close()` stops them (each watch request lasts ≤ a few seconds).
    Watches yield the raw JSON dicts (no model deserialisation: faster and keeps every field).
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._queue: queue.Queue[WatchEvent] = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # what each source delivered, and the order it reaches the queue
        self._watches: dict[str, WatchSource] = {}
        self._logs: dict[str, LogSource] = {}
        self._barriers = 0

    def watch(self, source: str, list_fn: Callable, *args, **kwargs) -> None:
        """Stream `list_fn(*args, **kwargs)` (a list call of the client) as ADDED (initial list) + watch events."""
        self._watches[source] = WatchSource(list_fn, args, kwargs)
        self._start(source, self._run_watch, source, list_fn, args, kwargs)

    def follow_log(self, source: str, core, name: str, namespace: str, container: str | None = None,
                   previous_first: bool = False) -> bool:
        """Follow a pod's log with timestamps (LOG events, one per line); once per source. True if started.
        `previous_first`: the container has restarted before the follow began — what its previous instance wrote
        (`previous=true`, kept by the kubelet) is delivered first, or it would never be read."""
        if source in self._logs:
            return False
        kwargs = {"container": container} if container else {}

        def read(**more) -> Any:
            return core.read_namespaced_pod_log(name, namespace, timestamps=True, _preload_content=False,
                                                **kwargs, **more)

        self._logs[source] = LogSource(read)
        self._start(source, self._run_follow, source, read if previous_first else None)
        return True

    def events(self, deadline_ts: float, tick_wall_s: float = 1.0) -> Iterator[WatchEvent | None]:
        """Events until the cluster-time deadline; None every `tick_wall_s` of silence (for progress). At the
        deadline, what the streams had not delivered yet (`catch_up`) before the end."""
        while not self._stop.is_set():
            remaining = self.clock.wall_seconds(deadline_ts - self.clock.timestamp())
            if remaining <= 0:
                yield from self.catch_up()
                return
            try:
                event = self._queue.get(timeout=min(tick_wall_s, remaining))
            except queue.Empty:
                yield None
                continue
            if event.type != "BARRIER":  # a catch-up's end marker its caller stopped short of
                yield event

    def pending(self) -> bool:
        """Whether more events are queued already: a caller judging a condition over what it took may take those
        first (one judgement per batch, not per event; the condition sees at least as much)."""
        return not self._queue.empty()

    def catch_up(self) -> Iterator[WatchEvent]:
        """Read every watched list and followed log once more and yield what the streams have not delivered
        yet, then every event queued before. Call it before accepting a condition on time alone."""
        done: set[str] = set()
        for _ in range(_CATCH_UP_ROUNDS):  # logs the caller starts following while it takes the events: again
            fresh = [name for name in [*self._watches, *self._logs] if name not in done]
            if not fresh:
                return
            self._barriers += 1
            barrier = WatchEvent("", "BARRIER", self._barriers, time.monotonic())
            for name in fresh:
                if name in self._watches:
                    self._catch_up_watch(name, self._watches[name])
                else:
                    self._catch_up_log(name, self._logs[name])
            done.update(fresh)
            self._queue.put(barrier)
            while not self._stop.is_set():
                event = self._queue.get()
                if event is barrier:
                    break
                if event.type != "BARRIER":
                    yield event

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=0.2)

    def __enter__(self) -> "EventMerger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, name: str, target: Callable, *args) -> None:
        thread = threading.Thread(target=self._guard, args=(name, target, *args), name=f"drills-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guard(self, name: str, target: Callable, *args) -> None:
        try:
            target(*args)
        except Exception as err:  # a dead stream must not hang the wait: say so in the queue
            if not self._stop.is_set():
                log.warning("stream %s ended: %s", name, short_reason(err))
                self._queue.put(WatchEvent(name, "ERROR", str(err), time.monotonic()))

    def _run_watch(self, source: str, list_fn: Callable, args: tuple, kwargs: dict) -> None:
        """List, then watch from the list's resourceVersion in short requests; 410 Gone → list again."""
        import json

        from kubernetes.client.exceptions import ApiException

        resource_version = self._relist(source, list_fn, args, kwargs)
        while not self._stop.is_set():
            try:
                resp = list_fn(*args, watch=True, resource_version=resource_version,
                               timeout_seconds=max(1, int(_WATCH_CHUNK_S)), _preload_content=False, **kwargs)
            except ApiException as err:
                if err.status != 410:
                    raise
                resource_version = self._relist(source, list_fn, args, kwargs)
                continue
            gone = False
            try:
                for line in stream_lines(resp):
                    if self._stop.is_set():
                        return
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            gone = True
                            break
                        raise DrillError(f"watch {source} failed: {obj.get('reason')}: {obj.get('message')}")
                    if event.get("type") == "BOOKMARK":
                        resource_version = obj_get(obj, "metadata", "resourceVersion", default=resource_version)
                        continue
                    resource_version = obj_get(obj, "metadata", "resourceVersion", default=resource_version)
                    self._deliver(source, event.get("type", "?"), obj)
            finally:
                resp.release_conn()
            if gone:  # history gone: start over from a fresh list
                resource_version = self._relist(source, list_fn, args, kwargs)

    def _deliver(self, source: str, etype: str, obj: dict) -> None:
        with self._lock:
            if self._watches[source].admit(etype, obj):
                self._queue.put(WatchEvent(source, etype, obj, time.monotonic()))

    def _relist(self, source: str, list_fn: Callable, args: tuple, kwargs: dict) -> str:
        """A fresh list: objects new or changed since delivered, and DELETED for those gone meanwhile."""
        items, resource_version = list_pages(list_fn, *args, **kwargs)
        for etype, obj in self._watches[source].differences(items):
            self._deliver(source, etype, obj)
        return resource_version

    def _catch_up_watch(self, name: str, source: WatchSource) -> None:
        try:
            self._relist(name, source.list_fn, source.args, source.kwargs)
        except Exception as err:  # the stream's own thread reports a dead stream; the wait ends as before
            log.debug("catch-up of %s: %s", name, short_reason(err))

    def _catch_up_log(self, name: str, source: LogSource) -> None:
        if source.ended:
            return
        try:
            resp = source.read()
            try:
                text = resp.data.decode("utf-8", "replace")
            finally:
                resp.release_conn()
        except Exception as err:  # the pod is gone: what it wrote is in its follow, which the server ends after
            # the last line — lines still on their way when a busy machine lags would be lost to the judgment
            log.debug("catch-up of %s: %s", name, short_reason(err))
            if getattr(err, "status", None) == 404 and not source.finished.wait(_DRAIN_WALL_S):
                log.warning("the log follow %s did not end within %.0f s of its pod's removal", name, _DRAIN_WALL_S)
            return
        with self._lock:
            lines = source.missing(text)
            now = time.monotonic()
            for line in lines:
                self._queue.put(WatchEvent(name, "LOG", line, now))
            source.took(lines)

    def _run_follow(self, source: str, previous: Callable | None = None) -> None:
        follow = self._logs[source]
        try:
            if previous is not None:
                self._deliver_previous(source, previous)
            resp = follow.read(follow=True)
            index = 0
            try:
                for raw in stream_lines(resp):
                    if self._stop.is_set():
                        return
                    with self._lock:
                        if follow.admit(index, raw):
                            self._queue.put(WatchEvent(source, "LOG", raw, time.monotonic()))
                    index += 1
            finally:
                resp.release_conn()
            with self._lock:
                follow.ended = True
                self._queue.put(WatchEvent(source, "END", None, time.monotonic()))
        finally:
            follow.finished.set()


    def _deliver_previous(self, source: str, read: Callable) -> None:
        """The previous container instance's log, once, before the current one's (not counted by the source's
        catch-up: that reads the current instance)."""
        try:
            resp = read(previous=True)
            try:
                text = resp.data.decode("utf-8", "replace")
            finally:
                resp.release_conn()
        except Exception as err:  # no previous instance (400), or the pod is gone: nothing to add
            log.debug("previous log of %s: %s", source, short_reason(err))
            return
        lines = text.split("\n")
        lines.pop()
        with self._lock:
            now = time.monotonic()
            for line in lines:
                self._queue.put(WatchEvent(source, "LOG", line, now))


def retry_at(clock: Clock, deadline_ts: float) -> float:
    """When a refused request (an eviction a budget blocks) is tried again if no event woke the wait first:
    every `RETRY_S` cluster seconds as `kubectl drain` does, at most every `RETRY_MIN_WALL_S` of this
    machine's time on a dilated clock, never past `deadline_ts`. A stream that lags must not hold a drain."""
    return min(deadline_ts, clock.timestamp() + max(RETRY_S, clock.cluster_seconds(RETRY_MIN_WALL_S)))


def wait_for(cluster: Cluster, list_fn: Callable, predicate: Callable[[dict], Any], deadline_ts: float,
             *args, **kwargs) -> tuple[dict, datetime] | None:
    """The first object from `list_fn` (list+watch) for which `predicate` is truthy, before the deadline.

    Returns (object, when): `when` is the predicate's value if it is a datetime (a timestamp read from
    the object itself), else the cluster time it was observed. None when the deadline passes.
    """
    with EventMerger(cluster.clock) as merger:
        merger.watch("wait", list_fn, *args, **kwargs)
        for event in merger.events(deadline_ts):
            if event is None or event.type not in ("ADDED", "MODIFIED"):
                if event is not None and event.type == "ERROR":
                    raise DrillError(f"watching failed: {event.obj}")
                continue
            found = predicate(event.obj)
            if found:
                return event.obj, found if isinstance(found, datetime) else cluster.clock.now()
    return None


def obj_get(obj: Any, *path: str, default: Any = None) -> Any:
    """obj["a"]["b"]… on raw JSON dicts, `default` when any step is missing."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


def list_pages(list_fn: Callable, *args, limit: int = PAGE, **kwargs) -> tuple[list[dict], str]:
    """Every item of a list call (raw JSON dicts) in chunks of `limit`, and the list's resourceVersion; a chunk
    whose snapshot expired (410) starts the list over, as client-go's pager does."""
    import json

    from kubernetes.client.exceptions import ApiException

    for _ in range(5):
        items: list[dict] = []
        token = ""
        try:
            while True:
                resp = list_fn(*args, limit=limit, _continue=token or None, _preload_content=False, **kwargs)
                body = json.loads(resp.data)
                items += body.get("items") or []
                meta = body.get("metadata") or {}
                token = meta.get("continue") or ""
                if not token:
                    return items, meta.get("resourceVersion", "")
        except ApiException as err:
            if err.status != 410:
                raise
            log.debug("list chunk expired; listing again from the start")
    raise DrillError("a paginated list kept expiring (410) before it could finish; the API server compacts too often")


def stream_lines(resp) -> Iterator[str]:
    """Lines of a streaming urllib3 response (a follow ends when the container stops)."""
    pending = b""
    for chunk in resp.stream(4096, decode_content=True):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def short_reason(err: BaseException) -> str:
    """The last line of a connection error (urllib3 nests several)."""
    text = str(err) or type(err).__name__
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if marker in text:
            return marker.lower() if marker != "Connection refused" else "connection refused"
    return text.splitlines()[-1][:200]


def pod_names(cluster, namespace: str, selector: str) -> list[str]:
    """The names of the pods `selector` selects in `namespace`, sorted (what a fault's revert reads back)."""
    import json

    resp = cluster.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items", []))


def wait_pods_gone(cluster, namespace: str, selector: str, deadline: float) -> None:
    """Until no pod `selector` selects is left (re-listed on each DELETED event and at the deadline) or the
    deadline (cluster time) passes; the caller reads what is left and judges it."""
    with EventMerger(cluster.clock) as merger:
        merger.watch("pods", cluster.core.list_namespaced_pod, namespace, label_selector=selector)
        for event in merger.events(deadline):
            if (event is None or event.type == "DELETED") and not pod_names(cluster, namespace, selector):
                return
