"""meta.k8s.io/v1 Table output for `kubectl get` (pure functions).

STUB: signatures are the contract; the implementation is being written.
"""

from __future__ import annotations

from drills.twin.api.resources import ResourceType

__all__ = ["to_table", "wants_table"]


def wants_table(accept: str | None) -> bool:
    """True when the Accept header asks for `as=Table` (what kubectl sends for `get`)."""
    return bool(accept) and "as=Table" in accept


def to_table(rt: ResourceType, objs: list[dict], *, resource_version: str = "", now: float | None = None,
             include_object: str = "Metadata") -> dict:
    """A Table with columnDefinitions (priority 1 = `-o wide` only) and one row per object."""
    raise NotImplementedError
