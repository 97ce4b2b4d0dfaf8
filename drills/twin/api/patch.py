"""PATCH bodies as the Kubernetes API server applies them (pure functions).

Four content types: JSON patch (RFC 6902, via `jsonpatch`), JSON merge patch (RFC 7386), strategic merge
patch (k8s.io/apimachinery `strategicpatch`: lists merge by the `patchMergeKey` of the Go types, directives
`$patch`, `$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`), and server-side apply.

Server-side apply is simplified: the applied configuration is strategic-merged into the live object (lists
with a merge key merge by key, other lists are replaced, null deletes). There is no field ownership, so no
conflicts are reported and fields a manager stops applying are not removed.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import jsonpatch
import jsonpointer
import yaml

__all__ = ["PatchError", "apply_patch", "merge_keys", "JSON_PATCH", "MERGE_PATCH", "STRATEGIC_MERGE_PATCH",
           "APPLY_PATCH", "PATCH_STRATEGIES"]

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

SET = "<set>"          # a list of scalars with patchStrategy "merge": union, `$deleteFromPrimitiveList` removes
REPLACE = "<replace>"  # a map with patchStrategy "replace": the patch value replaces it whole

# patchStrategy/patchMergeKey tags of the Go types (k8s.io/api), as path → merge key. A list not listed here
# is atomic (replaced by the patch): e.g. tolerations, node taints, containerStatuses, endpoints subsets.
_POD_SPEC: dict[str, str] = {
    "volumes": "name", "imagePullSecrets": "name", "hostAliases": "ip", "schedulingGates": "name",
    "resourceClaims": "name", "topologySpreadConstraints": "topologyKey",
    **{f"{c}{sub}": key
       for c in ("containers", "initContainers", "ephemeralContainers")
       for sub, key in (("", "name"), ("[].ports", "containerPort"), ("[].env", "name"),
                        ("[].volumeMounts", "mountPath"), ("[].volumeDevices", "devicePath"))},
}
_META = {"metadata.ownerReferences": "uid", "metadata.finalizers": SET}
_CONDITIONS = {"status.conditions": "type"}


def _under(prefix: str, table: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}.{path}": key for path, key in table.items()}


_WORKLOAD = {**_META, **_under("spec.template.spec", _POD_SPEC), **_CONDITIONS}

# Keyed by "Kind" for the core group and "Kind.group" otherwise; unknown kinds (custom resources) get only
# the metadata keys, so a strategic merge on them behaves like a merge patch.
PATCH_STRATEGIES: dict[str, dict[str, str]] = {
    "Pod": {**_META, **_under("spec", _POD_SPEC), **_CONDITIONS,
            "status.podIPs": "ip", "status.hostIPs": "ip", "status.resourceClaimStatuses": "name"},
    "Node": {**_META, "spec.podCIDRs": SET, **_CONDITIONS, "status.addresses": "type"},
    "Namespace": {**_META, **_CONDITIONS},
    "Service": {**_META, "spec.ports": "port", **_CONDITIONS},
    "Deployment.apps": _WORKLOAD,
    "ReplicaSet.apps": _WORKLOAD,
    "ReplicationController": _WORKLOAD,
    "DaemonSet.apps": _WORKLOAD,
    "StatefulSet.apps": _WORKLOAD,
    "Job.batch": _WORKLOAD,
    "PodDisruptionBudget.policy": {**_META, "spec.selector": REPLACE, **_CONDITIONS},
}
_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


class PatchError(ValueError):
    """A patch that cannot be applied (bad body, bad path, unsupported type); message says why."""


def apply_patch(obj: dict, patch: Any, content_type: str, kind: str = "", *, owned: bool = False) -> dict:
    """Return a new object: `obj` with `patch` (already decoded JSON) applied per `content_type`.

    `owned`: `obj` is the caller's private copy (the store's read-modify-write decodes one), changed in place
    instead of copied again.

    `kind` selects strategic-merge keys (e.g. containers merge by name); unknown kinds merge like
    merge-patch except where a known list field says otherwise. The group comes from `obj["apiVersion"]`,
    so a Volcano `Job` is not mistaken for a batch/v1 Job.
    """
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype == JSON_PATCH:
        result = _json_patch(obj, _decode(patch, ctype))
    elif ctype == MERGE_PATCH:
        result = _merge_patch(obj if owned else copy.deepcopy(obj), _require_object(_decode(patch, ctype), ctype))
    elif ctype in (STRATEGIC_MERGE_PATCH, APPLY_PATCH):
        keys = merge_keys(kind or obj.get("kind", ""), obj.get("apiVersion", ""))
        result = _smp_map(obj if owned else copy.deepcopy(obj), _require_object(_decode(patch, ctype), ctype), "",
                          keys)
    else:
        raise PatchError(f"the content type {content_type!r} is not a supported patch type "
                         f"({JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}, {APPLY_PATCH})")
    if not isinstance(result, dict):
        raise PatchError("the patched object is not a JSON object")
    return result


def merge_keys(kind: str, api_version: str = "") -> dict[str, str]:
    """The strategic-merge table for a kind: dotted path (list items as `[]`) → merge key, SET or REPLACE."""
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if api_version:
        return PATCH_STRATEGIES.get(f"{kind}.{group}" if group else kind, _META)
    for name, table in PATCH_STRATEGIES.items():  # no apiVersion: the first kind of that name
        if name.split(".", 1)[0] == kind:
            return table
    return _META


# -- decoding --------------------------------------------------------------------------------------------
def _decode(patch: Any, ctype: str) -> Any:
    if isinstance(patch, (bytes, bytearray)):
        patch = patch.decode("utf-8")
    if not isinstance(patch, str):
        return patch
    try:
        return yaml.safe_load(patch) if ctype == APPLY_PATCH else json.loads(patch)
    except (ValueError, yaml.YAMLError) as err:
        raise PatchError(f"error decoding patch: {err}") from None


def _require_object(patch: Any, ctype: str) -> dict:
    if not isinstance(patch, dict):
        raise PatchError(f"a {ctype} body must be a JSON object, got {type(patch).__name__}")
    return patch


# -- RFC 6902 and RFC 7386 -------------------------------------------------------------------------------
def _json_patch(obj: dict, patch: Any) -> Any:
    if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
        raise PatchError("a JSON patch must be a list of operations like {\"op\": \"add\", \"path\": …}")
    try:
        return jsonpatch.JsonPatch(patch).apply(obj, in_place=False)
    except jsonpatch.JsonPatchTestFailed as err:
        raise PatchError(f"the JSON patch test operation failed: {err}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError, TypeError) as err:
        raise PatchError(f"the JSON patch could not be applied: {err}") from None


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else (lists included) replaces.

    `target` is the caller's own copy, changed in place (copied once at the top, not again at every level)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


# -- strategic merge patch -------------------------------------------------------------------------------
def _smp_map(original: dict, patch: dict, path: str, keys: dict[str, str]) -> dict:
    """`original` merged with `patch`. `original` is the caller's own copy: it is changed in place (the object
    is copied once at the top, not again at every level of the patch)."""
    directive = patch.get(_DIRECTIVE)
    if directive is not None:
        if directive == "delete":
            return {}
        if directive == "replace":
            return _smp_map({}, {k: v for k, v in patch.items() if k != _DIRECTIVE}, path, keys)
        if directive != "merge":
            raise PatchError(f"unknown patch type {directive!r} in {_where(path)} "
                             f"(expected replace, delete or merge)")
    result = original if isinstance(original, dict) else {}
    body = {k: v for k, v in patch.items() if not k.startswith("$")}
    directives = {k: v for k, v in patch.items() if k.startswith("$") and k != _DIRECTIVE}

    if _RETAIN in directives:
        _retain_keys(result, body, directives.pop(_RETAIN), path)
    for name in [d for d in directives if d.startswith(_ORDER)]:
        _set_element_order(result, body, name[len(_ORDER):], directives.pop(name), path, keys)
    for name in [d for d in directives if d.startswith(_DELETE_PRIMITIVE)]:
        field, values = name[len(_DELETE_PRIMITIVE):], directives.pop(name)
        if not isinstance(values, list):
            raise PatchError(f"{name} in {_where(path)} must be a list")
        if isinstance(result.get(field), list):
            result[field] = [item for item in result[field] if item not in values]
    if directives:
        raise PatchError(f"unknown patch directive(s) {sorted(directives)} in {_where(path)}")

    for key, value in body.items():
        child = f"{path}.{key}" if path else key
        strategy = keys.get(child)
        current = result.get(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(current, dict) and strategy != REPLACE:
            result[key] = _smp_map(current, value, child, keys)
        elif isinstance(value, list) and isinstance(current, list) and strategy not in (None, REPLACE):
            result[key] = _smp_list(current, value, child, strategy, keys)
        else:
            result[key] = _fresh(value, child, keys)
    return result


def _smp_list(original: list, patch: list, path: str, key: str, keys: dict[str, str]) -> list:
    """Merge a list whose patchStrategy is merge: scalars as a set, maps by `key`; keep k8s element order."""
    if key == SET:
        if any(isinstance(item, (dict, list)) for item in patch):
            raise PatchError(f"{_where(path)} is a list of values; it cannot merge objects or lists")
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return _normalize_order(merged, patch, original, None)
    replace, items = False, []
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{_where(path)} merges objects by {key!r}; got {item!r}")
        directive = item.get(_DIRECTIVE)
        if directive is None:
            items.append(item)
        elif directive == "delete":
            if key not in item:
                raise PatchError(f"a $patch: delete item in {_where(path)} needs its merge key {key!r}")
            original = [o for o in original if not (isinstance(o, dict) and o.get(key) == item[key])]
        elif directive == "replace":
            replace = True
        else:
            raise PatchError(f"unsupported $patch {directive!r} on an item of {_where(path)}")
    if replace:
        return [_fresh(item, f"{path}[]", keys) for item in items]
    merged = list(original)  # the caller's own copy: items merge in place
    for item in items:
        if key not in item:
            raise PatchError(f"an item of {_where(path)} does not contain its merge key {key!r}: {item!r}")
        found = next((i for i, o in enumerate(merged) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if found is None:
            merged.append(_fresh(item, f"{path}[]", keys))
        else:
            merged[found] = _smp_map(merged[found], item, f"{path}[]", keys)
    return _normalize_order(merged, items, original, key)


def _fresh(value: Any, path: str, keys: dict[str, str]) -> Any:
    """A patch value with nothing to merge into: directives and nulls stripped, merge lists deduplicated."""
    if isinstance(value, dict):
        return _smp_map({}, value, path, keys)
    if isinstance(value, list):
        strategy = keys.get(path)
        if strategy not in (None, REPLACE):
            return _smp_list([], value, path, strategy, keys)
        return [_fresh(item, f"{path}[]", keys) for item in value]
    return value


def _retain_keys(result: dict, body: dict, retain: Any, path: str) -> None:
    if not isinstance(retain, list):
        raise PatchError(f"$retainKeys in {_where(path)} must be a list of field names")
    for key, value in body.items():
        if value is not None and key not in retain:
            raise PatchError(f"$retainKeys in {_where(path)} does not list the patched field {key!r}")
    for key in [k for k in result if k not in retain]:
        del result[key]


def _set_element_order(result: dict, body: dict, field: str, order: Any, path: str, keys: dict[str, str]) -> None:
    """Merge `field` now and order it: `$setElementOrder` first, then the patch, then the live list."""
    child = f"{path}.{field}" if path else field
    key = keys.get(child)
    if not isinstance(order, list):
        raise PatchError(f"$setElementOrder/{field} in {_where(path)} must be a list")
    if key in (None, REPLACE):
        return  # not a merging list: the order directive has nothing to order (upstream never sends it)
    current = result.get(field) if isinstance(result.get(field), list) else None
    incoming = body.pop(field, None)
    if incoming is None and current is None:
        return
    if incoming is None:
        merged = current
    elif not isinstance(incoming, list):
        raise PatchError(f"{_where(child)} must be a list")
    else:
        merged = _smp_list(current or [], incoming, child, key, keys)
    result[field] = _normalize_order(merged, order, current or [], None if key == SET else key)


def _normalize_order(merged: list, patch_order: list, server_order: list, key: str | None) -> list:
    """strategicpatch.normalizeElementOrder: patch items in patch order, live-only items in live order,
    interleaved by their live positions; items new to the live list go before live-only ones."""
    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    def index(items: list, item: Any) -> int:
        wanted = ident(item)
        return next((i for i, other in enumerate(items) if ident(other) == wanted), -1)

    in_patch = [item for item in merged if index(patch_order, item) >= 0]
    server_only = [item for item in merged if index(patch_order, item) < 0]
    in_patch.sort(key=lambda item: index(patch_order, item))
    server_only.sort(key=lambda item: (index(server_order, item) < 0, index(server_order, item)))
    out, i, j = [], 0, 0
    while i < len(server_only) or j < len(in_patch):
        if j >= len(in_patch):
            out.append(server_only[i]); i += 1
        elif i >= len(server_only):
            out.append(in_patch[j]); j += 1
        else:
            left, right = index(server_order, server_only[i]), index(server_order, in_patch[j])
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[i]); i += 1
            else:
                out.append(in_patch[j]); j += 1
    return out


def _where(path: str) -> str:
    return f"field {path!r}" if path else "the patch"
