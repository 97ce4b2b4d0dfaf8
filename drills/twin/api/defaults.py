"""Kind-specific defaulting, like the real API server's, so every served object is complete
(kubernetes client 37 rejects objects that lack required fields).

STUB: signatures are the contract; the implementation is being written.
"""

from __future__ import annotations

from drills.twin.api.resources import ResourceType

__all__ = ["apply_defaults"]


def apply_defaults(rt: ResourceType, obj: dict, now: str) -> dict:
    """Fill kind-specific defaults in place and return `obj` (`now` is the twin's RFC 3339 time).

    Generic metadata (uid, creationTimestamp, resourceVersion, generation) is the server's job.
    """
    return obj
