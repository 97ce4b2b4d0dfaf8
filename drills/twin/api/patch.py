"""PATCH bodies as the Kubernetes API server applies them (pure functions).

STUB: signatures are the contract; the implementation is being written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PatchError", "apply_patch", "JSON_PATCH", "MERGE_PATCH", "STRATEGIC_MERGE_PATCH", "APPLY_PATCH"]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch that cannot be applied (bad body, bad path, unsupported type); message says why."""


def apply_patch(obj: dict, patch: Any, content_type: str, kind: str = "") -> dict:
    """Return a new object: `obj` with `patch` (already decoded JSON) applied per `content_type`.

    `kind` selects strategic-merge keys (e.g. containers merge by name); unknown kinds merge like
    merge-patch except where a known list field says otherwise.
    """
    raise NotImplementedError
