"""What `drills revert` checks before it undoes a run's entries (DESIGN §6): that the cluster reached is the one the
run drilled (reconnecting once per way of connecting), and — liveness from the cluster, not from this host —
whether the run still holds its run-lock Lease there (drills.core.journal.revert_open asks both)."""

from __future__ import annotations

import json
import logging

from drills.core.errors import DrillError

__all__ = ["RevertChecks"]

log = logging.getLogger(__name__)


class RevertChecks:
    """`check_target` for `revert_open`: reconnect once per way of connecting, then compare each run's
    recorded cluster (UID, URL) with the one reached; UnsafeTarget for a mismatch."""

    def __init__(self) -> None:
        self._reached: dict[str, object] = {}  # how → Cluster, or the error connecting raised

    def lease_live(self, entry) -> str | None:
        """Why the run of this open lock entry is live by its Lease (held by it, renewed within its duration,
        in the cluster's time), or None. An unreachable cluster answers nothing here: the revert's own
        reconnect then refuses with its line."""
        from drills.core.lock import lease_state
        from drills.core.lock import _read as read_lease

        if not entry.connection:
            return None
        try:
            cluster = self._reach(entry)
            self(entry)  # another cluster's Lease says nothing of this run (and its revert is refused anyway)
        except DrillError:
            return None
        from kubernetes import client

        undo = dict(entry.revert_spec)
        try:
            lease = read_lease(client.CoordinationV1Api(cluster.api), undo["namespace"], undo["name"])
        except Exception as err:  # noqa: BLE001 — unread is not "free": refuse, saying why
            return (f"run {entry.run_id}: its run lock (lease {undo['namespace']}/{undo['name']}) cannot be read "
                    f"({type(err).__name__}), so whether it still runs is unknown; retry, or --force once it is stopped")
        state, now = lease_state(lease), cluster.clock.now()
        if state.holder != undo.get("holder") or state.expires is None or state.expires <= now:
            return None
        left = max(1, round((state.expires - now).total_seconds()))
        return (f"run {entry.run_id} (pid {entry.pid} on {entry.host}) still holds its run lock (lease "
                f"{undo['namespace']}/{undo['name']}, renewed within its duration, expires in {left} s unless renewed): "
                "it is alive on another host and reverts its own faults; stop it there, or pass --force once you "
                "know it is gone")

    def _reach(self, entry):
        from drills.core.kube import reconnect

        described = dict(entry.connection)
        how = json.dumps({k: v for k, v in described.items() if k not in ("uid", "url", "name")}, sort_keys=True)
        if how not in self._reached:
            try:
                self._reached[how] = reconnect({k: v for k, v in described.items() if k not in ("uid", "url")})
            except DrillError as err:
                self._reached[how] = err
        reached = self._reached[how]
        if isinstance(reached, BaseException):
            raise reached
        return reached

    def __call__(self, entry) -> None:
        from drills.core.kube import check_same_cluster

        check_same_cluster(dict(entry.connection), self._reach(entry), what=f"run {entry.run_id}'s journal")

    def __enter__(self) -> "RevertChecks":
        return self

    def __exit__(self, *exc) -> None:
        for reached in self._reached.values():
            if not isinstance(reached, BaseException):
                reached.close()
