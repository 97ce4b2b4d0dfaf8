"""Kubernetes access for drills: one client factory for every target, and waits that end on an event.

`connect(profile, twin=...)` gives a `Cluster`: the official client's APIs (core, apps, policy,
custom objects) built from a kubeconfig, the in-cluster service account, or a twin's kubeconfig,
plus the cluster `Clock` (the twin's dilated clock, read from `/twin/v1/clock`; the wall clock
elsewhere). Connecting probes the API once: an unreachable API is one `TargetUnreachable` line.

Waiting is event-driven: `EventMerger` runs list+watch streams (and pod log follows) in threads and
hands their events to one queue, so a check reacts to whichever comes first and never sleeps blindly.
`wait_for` is the single-resource form. Watches re-list on 410 Gone.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator

from drills.core.clock import Clock, DilatedClock, WallClock
from drills.profile.model import TargetProfile
from drills.core.errors import DrillError, TargetUnreachable

__all__ = ["Cluster", "connect", "connect_twin", "reconnect", "probe", "twin_clock", "wait_for", "EventMerger", "WatchEvent",
           "USER_AGENT", "obj_get"]

log = logging.getLogger(__name__)

USER_AGENT = "gpu-drills/0.1"  # mutations by drills are found in a twin's audit log by this prefix
_WATCH_CHUNK_S = 5.0  # wall seconds per watch request, so stopping a stream never waits long


@dataclass
class Cluster:
    """A connection to one cluster: the official client's APIs, its clock, and where it came from."""

    api: Any  # kubernetes.client.ApiClient
    clock: Clock
    url: str
    name: str = "cluster"
    twin_url: str | None = None  # the twin's base URL (for /twin/v1/…), None on real clusters
    kubeconfig: str | None = None
    context: str | None = None
    _apis: dict = field(default_factory=dict, repr=False)

    @property
    def is_twin(self) -> bool:
        return self.twin_url is not None

    @property
    def core(self):
        return self._get("CoreV1Api")

    @property
    def apps(self):
        return self._get("AppsV1Api")

    @property
    def policy(self):
        return self._get("PolicyV1Api")

    @property
    def custom(self):
        return self._get("CustomObjectsApi")

    def describe(self) -> dict:
        """What a journal entry needs to reconnect after a crash (no secrets: paths and names only)."""
        return {"name": self.name, "url": self.url, "kubeconfig": self.kubeconfig, "context": self.context,
                "twin_url": self.twin_url}

    def close(self) -> None:
        try:
            self.api.close()
        except Exception:  # noqa: BLE001 — closing a pool must never mask the real outcome
            log.debug("closing the API client failed", exc_info=True)

    def _get(self, name: str):
        if name not in self._apis:
            from kubernetes import client

            self._apis[name] = getattr(client, name)(self.api)
        return self._apis[name]

    def __repr__(self) -> str:  # short: it may end up as an Allure step parameter
        return f"Cluster({self.name} at {self.url})"


def connect(profile: TargetProfile, *, twin_info: dict | None = None, kubeconfig: str | None = None,
            context: str | None = None) -> Cluster:
    """A probed connection to the profile's cluster; `twin_info` (twin.json) when the target is a twin."""
    mode = profile.cluster.mode
    if twin_info is not None or mode == "twin":
        if twin_info is None:
            raise DrillError("the target is the twin but no twin is running: use `drills run` (it starts one) "
                             "or pass --twin-state-dir of a running `drills twin up`")
        return connect_twin(twin_info["kubeconfig"], twin_info["url"])
    from kubernetes import client, config

    cfg = client.Configuration()
    if mode == "in-cluster":
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException as err:
            raise TargetUnreachable(f"cannot load the in-cluster service account: {err}; run inside a pod "
                                    "or set cluster.mode: kubeconfig") from None
    else:
        kubeconfig = kubeconfig or profile.cluster.kubeconfig
        context = context or profile.cluster.context
        try:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        except (config.ConfigException, OSError) as err:
            raise TargetUnreachable(f"cannot load kubeconfig {kubeconfig or '~/.kube/config'} "
                                    f"(context {context or 'current'}): {err}; check --target/kubeconfig") from None
    cluster = Cluster(_api_client(cfg), WallClock(), cfg.host, name=context or profile.name,
                      kubeconfig=kubeconfig, context=context)
    probe(cluster)
    return cluster


def connect_twin(kubeconfig: str, twin_url: str) -> Cluster:
    """A probed connection to a twin, with its dilated clock."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    except (config.ConfigException, OSError) as err:
        raise TargetUnreachable(f"cannot load the twin's kubeconfig {kubeconfig}: {err}; is the twin running?") from None
    clock = twin_clock(twin_url)
    cluster = Cluster(_api_client(cfg), clock, cfg.host, name="twin", twin_url=twin_url.rstrip("/"),
                      kubeconfig=kubeconfig)
    probe(cluster)
    return cluster


def reconnect(described: dict) -> Cluster:
    """Connect again the way a run connected (`Cluster.describe()`, kept in its journal): for `drills revert`."""
    from drills.profile.model import TargetProfile

    if described.get("twin_url"):
        return connect_twin(described["kubeconfig"], described["twin_url"])
    mode = described.get("mode") or "kubeconfig"
    profile = TargetProfile.model_validate({"cluster": {"mode": mode}})
    return connect(profile, kubeconfig=described.get("kubeconfig"), context=described.get("context"))


def twin_clock(twin_url: str, timeout: float = 5.0) -> DilatedClock:
    """The twin's clock, read over HTTP; the midpoint of the round trip keeps the copy within RTT/2."""
    import requests

    url = twin_url.rstrip("/") + "/twin/v1/clock"
    try:
        before = time.monotonic()
        body = requests.get(url, timeout=timeout).json()
        after = time.monotonic()
    except (requests.RequestException, ValueError) as err:
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {twin_url}: {_short(err)}; "
                                "check --target/kubeconfig") from None
    scale = float(body["scale"])
    return DilatedClock(scale=scale, epoch=float(body["now"]), wall_anchor=(before + after) / 2)


def probe(cluster: Cluster, timeout: float = 5.0) -> None:
    """One cheap authenticated call; failure is one TargetUnreachable line."""
    from kubernetes.client.exceptions import ApiException

    try:
        # Drills need to read nodes anyway; /version/ (client 37's path) has a trailing slash some servers refuse.
        cluster.core.list_node(limit=1, _request_timeout=timeout, _preload_content=False).release_conn()
    except ApiException as err:
        if err.status in (401, 403):
            raise TargetUnreachable(f"the Kubernetes API at {cluster.url} refused our credentials "
                                    f"({err.status} {err.reason}); check the kubeconfig user") from None
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {cluster.url}: {err.status} {err.reason}; "
                                "check --target/kubeconfig") from None
    except Exception as err:  # urllib3 connection errors come in many types
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {cluster.url}: {_short(err)}; "
                                "check --target/kubeconfig") from None


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
        self._follows: set[str] = set()

    def watch(self, source: str, list_fn: Callable, *args, **kwargs) -> None:
        """Stream `list_fn(*args, **kwargs)` (a list call of the client) as ADDED (initial list) + watch events."""
        self._start(source, self._run_watch, source, list_fn, args, kwargs)

    def follow_log(self, source: str, core, name: str, namespace: str, container: str | None = None) -> bool:
        """Follow a pod's log with timestamps (LOG events, one per line); once per source. True if started."""
        if source in self._follows:
            return False
        self._follows.add(source)
        self._start(source, self._run_follow, source, core, name, namespace, container)
        return True

    def events(self, deadline_ts: float, tick_wall_s: float = 1.0) -> Iterator[WatchEvent | None]:
        """Events until the cluster-time deadline; None every `tick_wall_s` of silence (for progress)."""
        while not self._stop.is_set():
            remaining = self.clock.wall_seconds(deadline_ts - self.clock.timestamp())
            if remaining <= 0:
                return
            try:
                yield self._queue.get(timeout=min(tick_wall_s, remaining))
            except queue.Empty:
                yield None

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
                log.warning("stream %s ended: %s", name, _short(err))
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
                for line in _lines(resp):
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
                    self._queue.put(WatchEvent(source, event.get("type", "?"), obj, time.monotonic()))
            finally:
                resp.release_conn()
            if gone:  # history gone: start over from a fresh list
                resource_version = self._relist(source, list_fn, args, kwargs)

    def _relist(self, source: str, list_fn: Callable, args: tuple, kwargs: dict) -> str:
        import json

        resp = list_fn(*args, _preload_content=False, **kwargs)
        body = json.loads(resp.data)
        now = time.monotonic()
        for item in body.get("items") or []:
            self._queue.put(WatchEvent(source, "ADDED", item, now))
        return (body.get("metadata") or {}).get("resourceVersion", "")

    def _run_follow(self, source: str, core, name: str, namespace: str, container: str | None) -> None:
        kwargs = {"container": container} if container else {}
        resp = core.read_namespaced_pod_log(name, namespace, follow=True, timestamps=True, _preload_content=False,
                                            **kwargs)
        try:
            for raw in _lines(resp):
                if self._stop.is_set():
                    return
                self._queue.put(WatchEvent(source, "LOG", raw, time.monotonic()))
        finally:
            resp.release_conn()
        self._queue.put(WatchEvent(source, "END", None, time.monotonic()))


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


def _lines(resp) -> Iterator[str]:
    """Lines of a streaming urllib3 response (a follow ends when the container stops)."""
    pending = b""
    for chunk in resp.stream(4096, decode_content=True):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def _api_client(cfg):
    from kubernetes import client

    api = client.ApiClient(cfg)
    api.user_agent = USER_AGENT
    return api


def _short(err: BaseException) -> str:
    """The last line of a connection error (urllib3 nests several)."""
    text = str(err) or type(err).__name__
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if marker in text:
            return marker.lower() if marker != "Connection refused" else "connection refused"
    return text.splitlines()[-1][:200]
