"""The revert of a fault that created jobs: delete each (foreground, a 404 is already done) and wait, on the
cluster's clock, until no pod of theirs is left — read back, never assumed. Used by the noisy neighbour's burst
(Volcano jobs) and the acceptance Jobs (batch/v1)."""

from __future__ import annotations

from typing import Callable, Iterable

from drills.core.clock import STOP_WALL_FLOOR_S
from drills.core.errors import RevertFailed
from drills.core.watch import pod_names, wait_pods_gone

__all__ = ["delete_and_wait"]


def delete_and_wait(cluster, namespace: str, selector: str, names: Callable[[], Iterable[str]],
                    delete: Callable[[str], None], what: str, timeout_s: float) -> str:
    """Delete every object `names()` lists with `delete(name)`, then wait up to `timeout_s` cluster seconds for
    their pods (`selector`) to be gone. RevertFailed naming `what` and what is left; "reverted" otherwise."""
    from kubernetes.client.exceptions import ApiException

    try:
        for name in names():
            try:
                delete(name)
            except ApiException as err:
                if err.status != 404:
                    raise
        if pod_names(cluster, namespace, selector):
            wait_pods_gone(cluster, namespace, selector, cluster.clock.deadline(timeout_s, STOP_WALL_FLOOR_S))
        left = pod_names(cluster, namespace, selector)
    except ApiException as err:
        raise RevertFailed(f"could not delete the {what} {namespace}/{selector}: {err.status} {err.reason}; "
                           "run `drills revert` again") from None
    if left:
        raise RevertFailed(f"pods of the {what} ({', '.join(left[:5])}) in {namespace} still exist after the delete; "
                           "run `drills revert` again")
    return "reverted"
