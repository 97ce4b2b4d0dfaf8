"""One drill run at a time per cluster (DESIGN §6): a `coordination.k8s.io/v1` Lease held while faults are in.

Two runs drilling one cluster would inject overlapping faults and spoil each other's measurements. A run
takes the Lease `gpu-drills-run` (namespace `safety.lock_namespace`, default the training workload's) before
its first fault — `ClusterLock.guard` is the journal's guard, so every injector journals, hence locks,
first — renews it every third of `safety.lock_duration_s` in a thread, and releases it at teardown (pass,
failure, SIGINT, SIGTERM). A Lease another holder renewed within its duration (cluster time) refuses the
run with one `UnsafeTarget` line; an expired one is taken over. Writes use optimistic concurrency
(create → 409 → read → replace with the resourceVersion read). The lock is journaled like a fault, so
`drills revert` after a crash releases the Lease if the crashed run still holds it. Taking and releasing
are signal-safe sections (drills.core.signals): a Ctrl-C cannot leave a Lease we wrote behind a journal
entry that says it was not taken, nor cut a release short.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from drills.core.clock import parse_iso
from drills.core.errors import DrillError, UnsafeTarget
from drills.core.signals import deferred_signals

__all__ = ["LEASE_NAME", "KIND", "ClusterLock", "LeaseState", "lease_state", "refusal",
           "holder_identity"]

log = logging.getLogger(__name__)

LEASE_NAME = "gpu-drills-run"
KIND = "lock"
_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime
_TIMEOUT_S = 10  # wall seconds per Lease request: a hung API must not hold up a teardown
_RAW = {"_preload_content": False, "_request_timeout": _TIMEOUT_S}  # raw JSON, bounded wait
_MIN_RENEW_WALL_S = 0.05  # a fast twin makes a third of the duration very short on the wall clock


@dataclass(frozen=True)
class LeaseState:
    """Who holds a Lease, since when, and until when (cluster time); holder None: free."""

    holder: str | None
    since: datetime | None
    expires: datetime | None

    def blocks(self, me: str, now: datetime) -> bool:
        """Held by someone else and not expired: we must not drill."""
        return bool(self.holder) and self.holder != me and self.expires is not None and self.expires > now


def lease_state(lease: dict | None) -> LeaseState:
    """Read a raw Lease: expiry is renewTime + leaseDurationSeconds (no renewTime: already expired)."""
    spec = (lease or {}).get("spec") or {}
    renew = _time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    expires = renew + timedelta(seconds=float(duration)) if renew is not None and duration else None
    return LeaseState(spec.get("holderIdentity") or None, _time(spec.get("acquireTime")) or renew, expires)


def refusal(namespace: str, name: str, state: LeaseState, now: datetime) -> str:
    """The one line a refused run prints."""
    since = f" since {state.since.astimezone(timezone.utc):%H:%M:%S}Z" if state.since else ""
    left = math.ceil((state.expires - now).total_seconds()) if state.expires else 0
    return (f"another drill run holds the cluster lock (lease {namespace}/{name} held by {state.holder}{since}, "
            f"expires in {left} s): wait for it, or after a crash run `drills revert` which also releases it")


def holder_identity(run_id: str) -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{run_id}"


class ClusterLock:
    """The run lock on one cluster connection: `acquire`/`guard`, a renewing thread, `release` (idempotent)."""

    def __init__(self, cluster, namespace: str, run_id: str, *, duration_s: int = 120, journal=None,
                 name: str = LEASE_NAME) -> None:
        from kubernetes import client

        self.cluster, self.namespace, self.name, self.duration_s = cluster, namespace, name, int(duration_s)
        self.identity = holder_identity(run_id)
        self.journal = journal
        self.held = False
        self._api = client.CoordinationV1Api(cluster.api)
        self._entry: str | None = None
        self._busy = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written: dict | None = None  # the Lease as our last write left it (its resourceVersion): renewals

    @classmethod
    def for_profile(cls, cluster, profile, run_id: str, journal=None) -> "ClusterLock":
        namespace = profile.safety.lock_namespace or profile.workloads.training.namespace
        return cls(cluster, namespace, run_id, duration_s=profile.safety.lock_duration_s, journal=journal)

    def guard(self, kind: str, target: str) -> None:
        """Journal guard: take the lock before the first fault (its own journal entry passes through)."""
        if not self.held and not self._busy:
            self.acquire()

    def acquire(self) -> None:
        """Take the Lease or raise UnsafeTarget (another live holder) / DrillError (cannot write it)."""
        with deferred_signals():  # the entry, the Lease and `held` go together: release() must see what we wrote
            self._acquire()

    def release(self) -> None:
        """Stop renewing and clear the holder if it is still us; close the journal entry. Finishes under signals."""
        with deferred_signals():
            self._release()

    def _acquire(self) -> None:
        self._busy = True
        try:
            if self.journal is not None and self._entry is None:
                self._entry = self.journal.open_entry(KIND, f"{self.namespace}/{self.name}", {
                    "namespace": self.namespace, "name": self.name, "holder": self.identity},
                    connection=self.cluster.describe())
            try:
                self._take()
            except BaseException:
                self._close_entry("not-acquired")
                raise
        finally:
            self._busy = False
        self.held = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="drills-lock", daemon=True)
        self._thread.start()

    def _release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if not self.held:
            return
        self.held = False
        try:
            _clear_holder(self._api, self.namespace, self.name, self.identity)
        except Exception as err:  # the Lease expires by itself; `drills revert` can still clear it
            log.error("run lock %s/%s not released: %s (it expires within %d s, or run `drills revert`)",
                      self.namespace, self.name, _reason(err), self.duration_s)
            if self._entry and self.journal is not None:
                self.journal.mark_revert_failed(self._entry, _reason(err))
            return
        self._close_entry("released")
        log.info("run lock %s/%s released", self.namespace, self.name)

    def _take(self) -> None:
        from kubernetes.client.exceptions import ApiException

        for _ in range(5):  # each round either writes or sees a newer resourceVersion: a race, read again
            try:
                lease = _read(self._api, self.namespace, self.name)
                now = self.cluster.clock.now()
                if lease is None:
                    self._written = _data(self._api.create_namespaced_lease(self.namespace, self._body(None, now),
                                                                            **_RAW))
                    return
                state = lease_state(lease)
                if state.blocks(self.identity, now):
                    raise UnsafeTarget(refusal(self.namespace, self.name, state, now))
                if state.holder and state.holder != self.identity:
                    log.warning("run lock %s/%s: taking over the expired lease of %s", self.namespace, self.name,
                                state.holder)
                self._written = _data(self._api.replace_namespaced_lease(self.name, self.namespace,
                                                                         self._body(lease, now), **_RAW))
                return
            except ApiException as err:
                if err.status == 409:
                    continue
                raise DrillError(f"cannot take the run lock (lease {self.namespace}/{self.name}): {_reason(err)}; "
                                 "check safety.lock_namespace and that the drills may write leases") from None
        raise UnsafeTarget(f"the run lock (lease {self.namespace}/{self.name}) keeps changing under us: another "
                           "drill run is starting; wait for it")

    def _body(self, lease: dict | None, now: datetime) -> dict:
        stamp = now.astimezone(timezone.utc).strftime(_MICRO)
        spec = dict((lease or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=self.duration_s, renewTime=stamp)
        metadata = dict((lease or {}).get("metadata") or {"name": self.name, "namespace": self.namespace,
                                                            "labels": {"app.kubernetes.io/managed-by": "gpu-drills"}})
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _renew_loop(self) -> None:
        """Renew every third of the duration. As client-go's leader election does, optimistically first: the Lease
        as we last wrote it, with its resourceVersion — a Lease anyone else changed since is a conflict (409), and
        only then is it read to see who holds it (one request per renewal instead of two)."""
        from kubernetes.client.exceptions import ApiException

        interval = max(self.cluster.clock.wall_seconds(self.duration_s / 3), _MIN_RENEW_WALL_S)
        while not self._stop.wait(interval):
            try:
                if self._written is not None:
                    try:
                        self._written = _data(self._api.replace_namespaced_lease(
                            self.name, self.namespace, self._body(self._written, self.cluster.clock.now()), **_RAW))
                        continue
                    except ApiException as err:
                        if err.status != 409:
                            raise
                self._written = None
                lease = _read(self._api, self.namespace, self.name)
                holder = lease_state(lease).holder
                if holder != self.identity:
                    log.error("run lock %s/%s lost to %s: another run may drill this cluster now", self.namespace,
                              self.name, holder or "nobody")
                    return
                self._written = _data(self._api.replace_namespaced_lease(
                    self.name, self.namespace, self._body(lease, self.cluster.clock.now()), **_RAW))
            except Exception as err:  # a missed renewal is retried next tick; the lease outlives two of them
                self._written = None
                log.warning("run lock %s/%s not renewed: %s", self.namespace, self.name, _reason(err))

    def _close_entry(self, outcome: str) -> None:
        if self._entry and self.journal is not None:
            self.journal.close_entry(self._entry, outcome)
        self._entry = None

    def __repr__(self) -> str:
        return f"ClusterLock({self.namespace}/{self.name})"


def _clear_holder(api, namespace: str, name: str, identity: str) -> bool:
    """Clear holderIdentity if it is `identity` (resourceVersion-checked); True if we cleared it."""
    from kubernetes.client.exceptions import ApiException

    for _ in range(5):
        lease = _read(api, namespace, name)
        if lease is None or lease_state(lease).holder != identity:
            return False
        spec = {k: v for k, v in (lease.get("spec") or {}).items() if k != "holderIdentity"}
        try:
            api.replace_namespaced_lease(name, namespace, {**lease, "spec": spec}, **_RAW)
            return True
        except ApiException as err:
            if err.status != 409:
                raise
    raise DrillError(f"the run lock (lease {namespace}/{name}) keeps changing; clear it by hand")


def _data(resp) -> dict | None:
    """The object a raw (`_preload_content=False`) write answered with; None when it is not one."""
    try:
        obj = json.loads(resp.data)
    except (AttributeError, TypeError, ValueError):
        return None
    return obj if isinstance(obj, dict) and obj.get("kind") == "Lease" else None


def _read(api, namespace: str, name: str) -> dict | None:
    from kubernetes.client.exceptions import ApiException

    try:
        resp = api.read_namespaced_lease(name, namespace, **_RAW)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return json.loads(resp.data)


def _time(text: Any) -> datetime | None:
    try:
        return parse_iso(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    return f"{status} {getattr(err, 'reason', '')}".strip() if status is not None else (str(err) or type(err).__name__)
