"""Unknown fields, found as the real API server's decoder finds them (schemas.json, see schema_build.py).

`fieldValidation=Strict` turns them into a 400 (`strict decoding error: unknown field "spec.x"`), `Warn`
(the default) into one Warning header each, `Ignore` into nothing; outside Strict they are dropped from
the object, as the decoder drops them, so the twin stores only what a real cluster would store. Custom
resources (Volcano) are not checked: their CRDs preserve what they are given.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache

from drills.twin.api import status as st
from drills.twin.api.resources import ResourceType
from drills.twin.api.schema_build import SCHEMAS_JSON

__all__ = ["unknown_fields", "strict_error", "MODES", "DEFAULT_MODE", "warning_header"]

log = logging.getLogger(__name__)

MODES = ("Ignore", "Warn", "Strict")
DEFAULT_MODE = "Warn"  # the server's default since Kubernetes 1.27


def unknown_fields(rt: ResourceType, obj: dict, *, drop: bool, patch: bool = False) -> list[str]:
    """Paths of the fields `obj` has that its kind does not (`spec.containers[0].volumeMount`), in document
    order; with `drop`, they are removed from `obj`. `patch`: a merge or strategic-merge patch body, whose
    `$`-directives are not fields."""
    schemas = _schemas()
    model = schemas["kinds"].get(f"{rt.api_version}/{rt.kind}")
    if model is None or not isinstance(obj, dict):
        return []
    found: list[str] = []
    _walk(schemas["types"], model, obj, None, found, drop, patch)
    return found


def strict_error(rt: ResourceType, paths: list[str]) -> st.ApiError:
    fields = ", ".join(f'unknown field "{p}"' for p in paths)
    return st.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                          f"strict decoding error: {fields}")


def warning_header(path: str) -> str:
    """One `Warning` header value, as the server writes it (RFC 7234 code 299, a Go-quoted text)."""
    return "299 - " + json.dumps(f'unknown field "{path}"')


def _walk(types: dict, t: str, value, path, found: list[str], drop: bool, patch: bool) -> None:
    """`path` is a chain of (parent, segment) pairs, spelled out only for an unknown field (a kubelet's status
    patch has hundreds of known fields and none unknown)."""
    if value is None or t in ("s", "*"):
        return
    if t.startswith("["):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(types, t[1:-1], item, (path, f"[{i}]"), found, drop, patch)
        return
    if t.startswith("{"):
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(types, t[1:-1], item, (path, f"[{key}]"), found, drop, patch)
        return
    fields = types.get(t)
    if fields is None or not isinstance(value, dict):
        return
    for key in list(value):
        if patch and key.startswith("$"):
            continue
        sub = fields.get(key)
        if sub is None:
            found.append(_spelled((path, key)))
            if drop:
                del value[key]
        elif sub not in ("s", "*"):
            _walk(types, sub, value[key], (path, key), found, drop, patch)


def _spelled(path) -> str:
    """`spec.containers[0].volumeMount` from the chain (((("", "spec"), "containers"), "[0]"), "volumeMount")."""
    parts: list[str] = []
    while path:
        path, segment = path
        parts.append(segment)
    out = ""
    for segment in reversed(parts):
        out += segment if segment.startswith("[") or not out else "." + segment
    return out


@lru_cache(maxsize=1)
def _schemas() -> dict:
    return json.loads(SCHEMAS_JSON.read_text())
