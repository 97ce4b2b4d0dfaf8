"""metadata.managedFields for server-side apply: each applier's entry (manager, operation Apply, apiVersion,
time, FieldsV1 set of the fields its applied configuration sets). Pure functions.

The FieldsV1 encoding is structured-merge-diff's: `f:<field>` for a map field, `k:{"key":value,...}` for an
item of a list map (keyed as the schema's listMapKeys, which for a few lists differ from the strategic-merge
key: a container port is keyed by containerPort and protocol), `v:<json>` for an item of a set, `.` for the
item itself; an atomic list is one leaf. The fields every object has (apiVersion, kind, metadata.name,
namespace, uid, resourceVersion, generation, creationTimestamp, managedFields) are never owned, as
fieldmanager's stripSet does.

Simplified: applying records the applier's entry and leaves other managers' entries as they are (no
ownership transfer, no conflicts); other writes keep the entries (a body without managedFields never clears
them) but add no `Update` entry.
"""

from __future__ import annotations

import json

from drills.twin.api import status as st
from drills.twin.api.patch import REPLACE, SET, merge_keys

__all__ = ["applied", "fields_v1", "check_apply"]

_STRIPPED_META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "selfLink",
                  "managedFields")
# listMapKeys (k8s.io/api +listMapKey tags) where they are not the single strategic-merge key
_LIST_MAP_KEYS = {
    "spec.containers[].ports": ("containerPort", "protocol"),
    "spec.initContainers[].ports": ("containerPort", "protocol"),
    "spec.ephemeralContainers[].ports": ("containerPort", "protocol"),
    "spec.ports": ("port", "protocol"),  # Service
}


def check_apply(config: dict, field_manager: str) -> None:
    """What the real server refuses in an apply request before looking at the object."""
    if not field_manager:
        raise st.invalid("PatchOptions", "", [("fieldManager", "Required value: is required for apply patch")],
                         "meta.k8s.io")
    if (config.get("metadata") or {}).get("managedFields"):
        raise st.bad_request("metadata.managedFields must be nil")


def applied(obj: dict, config: dict, manager: str, now_iso: str, subresource: str | None = None) -> dict:
    """`obj` with `manager`'s Apply entry (replacing its previous one) owning the fields `config` sets."""
    entry = {"manager": manager, "operation": "Apply", "apiVersion": obj.get("apiVersion", ""), "time": now_iso,
             "fieldsType": "FieldsV1", "fieldsV1": fields_v1(config, obj.get("kind", ""), obj.get("apiVersion", ""))}
    if subresource:
        entry["subresource"] = subresource
    meta = obj.setdefault("metadata", {})
    others = [e for e in meta.get("managedFields") or []
              if (e.get("manager"), e.get("operation"), e.get("subresource")) != (manager, "Apply", subresource)]
    meta["managedFields"] = [*others, entry]
    return obj


def fields_v1(config: dict, kind: str, api_version: str) -> dict:
    """The FieldsV1 set of the fields an applied configuration sets."""
    top = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
    if isinstance(top.get("metadata"), dict):
        meta = {k: v for k, v in top["metadata"].items() if k not in _STRIPPED_META}
        top = {**top, "metadata": meta} if meta else {k: v for k, v in top.items() if k != "metadata"}
    return _map(top, "", merge_keys(kind, api_version))


def _map(value: dict, path: str, keys: dict[str, str]) -> dict:
    out: dict = {}
    for name, child in value.items():
        child_path = f"{path}.{name}" if path else name
        out[f"f:{name}"] = _field(child, child_path, keys)
    return out


def _field(value, path: str, keys: dict[str, str]) -> dict:
    strategy = keys.get(path)
    if isinstance(value, dict) and value and strategy != REPLACE:
        return _map(value, path, keys)
    if isinstance(value, list) and value and strategy == SET:
        return {f"v:{json.dumps(item, separators=(',', ':'))}": {} for item in value}
    if isinstance(value, list) and value and strategy and all(isinstance(i, dict) for i in value):
        names = _LIST_MAP_KEYS.get(path, (strategy,))
        out = {}
        for item in value:
            key = {n: item[n] for n in names if n in item}
            out[f"k:{json.dumps(key, separators=(',', ':'))}"] = {".": {}, **_map(item, f"{path}[]", keys)}
        return out
    return {}  # a scalar, an atomic list or map, an empty value: one leaf
