"""Kubernetes access for drills: one client factory for every target, and a way back to it after a crash.

`connect(profile, twin_info=...)` gives a `Cluster`: the official client's APIs (core, apps, policy,
custom objects) built from a twin's kubeconfig, a kubeconfig + context, or the in-cluster service
account, plus the cluster `Clock` (the twin's dilated clock, read from `/twin/v1/clock`; the wall clock
elsewhere). Connecting probes the API once: an unreachable API is one `TargetUnreachable` line.

`Cluster.describe()` is how the run connected and which cluster it reached (DESIGN §6): the mode, what
that mode needs to connect again (the twin's state dir; the kubeconfig path and the context resolved at
connect time, so a later `kubectl config use-context` cannot redirect a revert; the API host and the
service-account dir), the API server URL and the cluster UID (the `kube-system` namespace's uid). Paths
and names only, never a secret. `reconnect(described)` connects the same way for `drills revert` and
refuses, with one `UnsafeTarget` line, a cluster with another UID or URL.

Waiting (`EventMerger`, `wait_for`, `obj_get`) lives in `drills.core.watch`; its names are re-exported here.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from drills.core.clock import Clock, WallClock
from drills.core.kubeclock import FIRST_CALL_TIMEOUT_S as _TIMEOUT_S, followed_clock, served_clock, twin_clock
from drills.core.stamp import around as _around, capture_served
from drills.core.errors import DrillError, TargetGone, TargetUnreachable, UnsafeTarget
from drills.core.watch import EventMerger, WatchEvent, obj_get, short_reason, wait_for
from drills.profile.model import TargetProfile

__all__ = ["Cluster", "connect", "connect_twin", "connect_kubeconfig", "connect_in_cluster", "reconnect",
           "check_same_cluster", "probe", "twin_clock", "served_clock", "wait_for", "EventMerger", "WatchEvent", "USER_AGENT",
           "obj_get", "SERVICEACCOUNT_DIR", "SERVICEACCOUNT_DIR_ENV"]

log = logging.getLogger(__name__)

USER_AGENT = "gpu-drills/0.1"  # mutations by drills are found in a twin's audit log by this prefix
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # token, ca.crt, namespace in a pod
SERVICEACCOUNT_DIR_ENV = "DRILLS_SERVICEACCOUNT_DIR"  # another dir holding them (tests: a TLS twin's)
IDENTITY_NAMESPACE = "kube-system"  # every cluster has it; its uid names the cluster
_UNREAD = object()


@dataclass
class Cluster:
    """A connection to one cluster: the official client's APIs, its clock, how it was made and to what."""

    api: Any  # kubernetes.client.ApiClient
    clock: Clock
    url: str
    name: str = "cluster"
    mode: str = "kubeconfig"  # twin | kubeconfig | in-cluster
    twin_url: str | None = None  # the twin's base URL (for /twin/v1/…), None on real clusters
    twin_state: str | None = None  # the twin's state dir (its twin.json), when known
    kubeconfig: str | None = None  # the kubeconfig path(s) read, as $KUBECONFIG spells them
    context: str | None = None  # the context used: the given one, else the current one at connect time
    serviceaccount_dir: str | None = None  # in-cluster: where token and ca.crt were read
    _apis: dict = field(default_factory=dict, repr=False)
    _uid: Any = field(default=_UNREAD, repr=False)

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

    @property
    def uid(self) -> str | None:
        """The cluster's identity: `kube-system`'s metadata.uid (read once); None if we may not read it."""
        if self._uid is _UNREAD:
            self._uid = _read_uid(self)
        return self._uid

    def around(self, request) -> tuple[float, float]:
        """`request()` (one write) made; the cluster-time window of the change it made: this clock around it,
        narrowed by the API server's own `Date` of its answer (drills/core/stamp.py). A fault is stamped at its
        middle."""
        return _around(self.clock, request)

    def describe(self) -> dict:
        """How this run connected and to which cluster: enough for `reconnect`, and no secrets."""
        found = {"mode": self.mode, "name": self.name, "url": self.url, "uid": self.uid}
        if self.mode == "twin":
            found.update(twin_state=self.twin_state, twin_url=self.twin_url, kubeconfig=self.kubeconfig)
        elif self.mode == "in-cluster":
            found.update(serviceaccount_dir=self.serviceaccount_dir)
        else:
            found.update(kubeconfig=self.kubeconfig, context=self.context)
        return found

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
        return connect_twin(twin_info["kubeconfig"], twin_info["url"], state_dir=_twin_state_dir(twin_info))
    if mode == "in-cluster":
        return connect_in_cluster()
    context = context or profile.cluster.context
    allowed = profile.cluster.allowed_contexts
    if allowed:
        chosen = context or _current_context(kubeconfig or profile.cluster.kubeconfig)
        if chosen not in allowed:
            raise UnsafeTarget(f"kubeconfig context {chosen!r} is not in the profile's cluster.allowed_contexts "
                               f"({', '.join(allowed)}); pass --target with an allowed context or add it there")
        context = chosen
    return connect_kubeconfig(kubeconfig or profile.cluster.kubeconfig, context, name=context or profile.name)


def connect_twin(kubeconfig: str, twin_url: str, *, state_dir: str | None = None) -> Cluster:
    """A probed connection to a twin, with its dilated clock."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    except (config.ConfigException, OSError) as err:
        raise TargetUnreachable(f"cannot load the twin's kubeconfig {kubeconfig}: {err}; is the twin running?") from None
    clock = followed_clock(state_dir or os.path.dirname(os.path.abspath(kubeconfig))) or twin_clock(twin_url)
    cluster = Cluster(_api_client(cfg), clock, cfg.host, name="twin", mode="twin", twin_url=twin_url.rstrip("/"),
                      twin_state=str(state_dir) if state_dir else None, kubeconfig=kubeconfig)
    probe(cluster)
    return cluster


def connect_kubeconfig(kubeconfig: str | None = None, context: str | None = None, *,
                       name: str | None = None) -> Cluster:
    """A probed connection through a kubeconfig; the path(s) and the context are pinned on the Cluster."""
    from kubernetes import client, config

    path = _kubeconfig_paths(kubeconfig)
    cfg = client.Configuration()
    try:
        if context is None:  # pin the current context now: `use-context` later must not move a revert
            context = config.list_kube_config_contexts(config_file=path)[1]["name"]
        config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    except (config.ConfigException, OSError, KeyError, TypeError) as err:
        raise TargetUnreachable(f"cannot load kubeconfig {kubeconfig or path} (context {context or 'current'}): "
                                f"{err}; check --target/kubeconfig") from None
    api = _api_client(cfg)
    cluster = Cluster(api, WallClock(), cfg.host, name=name or context, mode="kubeconfig",
                      kubeconfig=path, context=context)
    probe(cluster)
    cluster.clock = served_clock(api)
    return cluster


def connect_in_cluster(serviceaccount_dir: str | None = None) -> Cluster:
    """A probed connection as the pod's service account: API host from KUBERNETES_SERVICE_HOST/PORT,
    token and CA from `serviceaccount_dir` (default: $DRILLS_SERVICEACCOUNT_DIR, else the pod's mount)."""
    from kubernetes import client, config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    where = serviceaccount_dir or os.environ.get(SERVICEACCOUNT_DIR_ENV) or SERVICEACCOUNT_DIR
    cfg = client.Configuration()
    try:
        InClusterConfigLoader(token_filename=os.path.join(where, "token"),
                              cert_filename=os.path.join(where, "ca.crt")).load_and_set(cfg)
    except (config.ConfigException, OSError) as err:
        raise TargetUnreachable(f"cannot load the in-cluster service account from {where}: {err}; run inside a "
                                f"pod (or set {SERVICEACCOUNT_DIR_ENV}), or set cluster.mode: kubeconfig") from None
    api = _api_client(cfg)
    cluster = Cluster(api, WallClock(), cfg.host, name="in-cluster", mode="in-cluster",
                      serviceaccount_dir=str(where))
    probe(cluster)
    cluster.clock = served_clock(api)
    return cluster


def reconnect(described: Mapping[str, Any], *, entry_id: str | None = None) -> Cluster:
    """Connect again the way a run connected (`Cluster.describe()`, kept in its journal), for `drills revert`.

    Raises UnsafeTarget when the cluster reached is not the one described (another UID or URL),
    TargetUnreachable when it cannot be reached, TargetGone when it was a twin that has ended. Older
    descriptions (no mode/uid) are read as kubeconfig or twin and checked by URL only.
    """
    described = dict(described or {})
    mode = described.get("mode") or ("twin" if described.get("twin_url") else "kubeconfig")
    if mode == "twin":
        cluster = _reconnect_twin(described)
    elif mode == "in-cluster":  # this pod's mount (or override) holds the token now; the run's dir, else
        cluster = connect_in_cluster(os.environ.get(SERVICEACCOUNT_DIR_ENV) or described.get("serviceaccount_dir"))
    elif mode == "kubeconfig":
        cluster = connect_kubeconfig(described.get("kubeconfig"), described.get("context"), name=described.get("name"))
    else:
        raise DrillError(f"{_what(entry_id)} records an unknown connection mode {mode!r}; revert it by hand")
    try:
        check_same_cluster(described, cluster, what=_what(entry_id))
    except BaseException:
        cluster.close()
        raise
    return cluster


def check_same_cluster(described: Mapping[str, Any], cluster: Cluster, *,
                       what: str = "the journal entry") -> None:
    """UnsafeTarget (one line) unless `cluster` has the described UID and URL (each checked when recorded)."""
    want_uid, want_url = described.get("uid"), described.get("url")
    got_uid = cluster.uid if want_uid else None
    same_url = not want_url or _same_url(str(want_url), cluster.url)
    if (want_uid and got_uid != want_uid) or not same_url:
        raise UnsafeTarget(f"{what} was made on cluster UID {want_uid or 'unknown'} at {want_url}; this "
                           f"connection reaches UID {got_uid or 'unknown'} at {cluster.url}: refusing to revert; "
                           "reconnect to the right cluster")


def probe(cluster: Cluster, timeout: float = _TIMEOUT_S) -> None:
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
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {cluster.url}: {short_reason(err)}; "
                                "check --target/kubeconfig") from None


def _reconnect_twin(described: dict) -> Cluster:
    """The twin in the recorded state dir (its twin.json says where it listens now), else the recorded URL."""
    from drills.twin.launcher import read_twin_info

    state = described.get("twin_state")
    if state:
        info = read_twin_info(state)
        if info is None or not _pid_alive(info.get("pid")):  # a twin's state lives in its process only
            raise TargetGone(f"the twin this run drilled ({state}) is no longer running: its faults ended with it")
        return connect_twin(info["kubeconfig"], info["url"], state_dir=state)
    return connect_twin(described["kubeconfig"], described["twin_url"])


def _read_uid(cluster: Cluster) -> str | None:
    from kubernetes.client.exceptions import ApiException

    try:
        resp = cluster.core.read_namespace(IDENTITY_NAMESPACE, _preload_content=False, _request_timeout=_TIMEOUT_S)
        return (json.loads(resp.data).get("metadata") or {}).get("uid") or None
    except ApiException as err:
        if err.status in (403, 404):
            log.warning("cannot read namespace %s on %s (%s %s): revert will tell this cluster from another by "
                        "its URL only; grant get on namespaces/%s", IDENTITY_NAMESPACE, cluster.url, err.status,
                        err.reason, IDENTITY_NAMESPACE)
            return None
        raise TargetUnreachable(f"cannot read namespace {IDENTITY_NAMESPACE} at {cluster.url}: {err.status} "
                                f"{err.reason}") from None
    except Exception as err:  # urllib3 connection errors come in many types
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {cluster.url}: {short_reason(err)}; "
                                "check --target/kubeconfig") from None


def _current_context(kubeconfig: str | None) -> str | None:
    """The kubeconfig's current context name (None when it cannot be read: connecting then says why)."""
    from kubernetes import config

    try:
        return config.list_kube_config_contexts(config_file=_kubeconfig_paths(kubeconfig))[1]["name"]
    except (config.ConfigException, OSError, KeyError, TypeError):
        return None


def _kubeconfig_paths(kubeconfig: str | None) -> str:
    """The kubeconfig file(s) the client would read, absolute (a revert may run from another directory)."""
    raw = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    return os.pathsep.join(str(Path(part).expanduser().resolve()) for part in raw.split(os.pathsep) if part)


def _twin_state_dir(twin_info: Mapping[str, Any]) -> str | None:
    if twin_info.get("state_dir"):
        return str(twin_info["state_dir"])
    return str(Path(twin_info["kubeconfig"]).parent) if twin_info.get("kubeconfig") else None


def _pid_alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def _what(entry_id: str | None) -> str:
    return f"journal entry {entry_id}" if entry_id else "the journal entry"


def _api_client(cfg):
    from kubernetes import client

    api = client.ApiClient(cfg)
    api.user_agent = USER_AGENT
    capture_served(api)
    return api
