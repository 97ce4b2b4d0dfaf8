"""The run lock as a journaled kind: `drills revert` clears the Lease a dead run still holds.

Not a fault (nothing is broken), but it is written down and undone like one, so it follows the same
`revert(target, undo, record)` contract (drills/faults/__init__.py); the Lease itself is drills.core.lock.
"""

from __future__ import annotations

import logging

__all__ = ["KIND", "revert", "verify"]

log = logging.getLogger(__name__)

KIND = "lock"


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Clear the Lease's holder if it is still the run that journaled it; idempotent."""
    from kubernetes import client

    from drills.core.lock import _clear_holder

    api = client.CoordinationV1Api(target.cluster.api)
    if not _clear_holder(api, undo["namespace"], undo["name"], undo["holder"]):
        log.info("run lock %s/%s is no longer held by %s: left alone", undo["namespace"], undo["name"], undo["holder"])
        return "not held"
    return "released"


def verify(target, undo: dict, record: dict | None = None) -> "Reading":
    """Read the Lease back: it is not held by the run that journaled it any more."""
    from kubernetes import client

    from drills.core.lock import _read, lease_state
    from drills.faults.readback import Observation, read

    def reader():
        lease = _read(client.CoordinationV1Api(target.cluster.api), undo["namespace"], undo["name"])
        holder = lease_state(lease).holder if lease is not None else None
        return [Observation(f"lease {undo['namespace']}/{undo['name']}", f"holder {holder or 'none'}",
                            f"GET leases/{undo['name']} in {undo['namespace']}", holder != undo["holder"])], ()

    return read(KIND, f"{undo['namespace']}/{undo['name']}", reader)
