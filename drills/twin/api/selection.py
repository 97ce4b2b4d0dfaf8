"""A parsed label + field selector as the store uses it: a predicate, and the index keys that narrow it.

Equality terms the store can index (a label `k=v` / `k in (v)`, `spec.nodeName=n` on pods, `metadata.name`,
`metadata.namespace`) become keys: only objects carrying every key are looked at, so a selective list or
watch costs what it returns, not what the cluster holds. The predicate still decides every match.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from drills.twin.api.resources import ResourceType
from drills.twin.api.selectors import (field_equalities, field_value, label_equalities, parse_field_selector,
                                       parse_label_selector)

__all__ = ["Selection", "ALL", "from_query", "of_predicate", "index_keys", "route_keys", "INDEXED_FIELDS"]

log = logging.getLogger(__name__)

# Fields kept in an index, per kind (like the apiserver's pod spec.nodeName index, which kubelets rely on).
INDEXED_FIELDS: dict[str, tuple[str, ...]] = {"Pod": ("spec.nodeName",)}

IndexKey = tuple  # ("label", key, value) | ("field", path, value)


@dataclass(frozen=True)
class Selection:
    """What a list or watch selects: `predicate` decides; `name`, `namespace` and `keys` narrow the search."""

    predicate: Callable[[dict], bool] | None = None
    name: str | None = None
    namespace: str | None = None
    keys: tuple[IndexKey, ...] = field(default=())

    @property
    def empty(self) -> bool:
        """No selector at all (the real server only counts remainingItemCount then)."""
        return self.predicate is None

    def matches(self, obj: dict) -> bool:
        return self.predicate is None or self.predicate(obj)

    def route_key(self, namespace: str | None) -> tuple | None:
        """The most selective key an object must carry to be selected (None: any object may be)."""
        if self.name is not None:
            return ("name", self.name)
        if self.keys:
            return self.keys[0]
        ns = namespace or self.namespace
        return ("ns", ns) if ns else None


ALL = Selection()


def of_predicate(predicate: Callable[[dict], bool] | Selection | None) -> Selection:
    """A Selection from a plain predicate (the store's in-process callers), or the Selection itself."""
    if isinstance(predicate, Selection):
        return predicate
    return ALL if predicate is None else Selection(predicate)


def from_query(labels: str | None, fields: str | None, rt: ResourceType) -> Selection:
    """labelSelector + fieldSelector of a request (SelectorError when either does not parse or names a
    field the kind does not make selectable)."""
    if not (labels and labels.strip()) and not (fields and fields.strip()):
        return ALL
    by_labels = parse_label_selector(labels)
    by_fields = parse_field_selector(fields, rt.kind if not rt.group or rt.group in _BUILTIN_GROUPS else _CUSTOM)
    if not (labels and labels.strip()):
        predicate = by_fields
    elif not (fields and fields.strip()):
        def predicate(obj: dict) -> bool:
            return by_labels(obj.get("metadata", {}).get("labels") or {})
    else:
        def predicate(obj: dict) -> bool:
            return by_labels(obj.get("metadata", {}).get("labels") or {}) and by_fields(obj)
    equal_fields = field_equalities(fields)
    indexed = INDEXED_FIELDS.get(rt.kind, ()) if not rt.group else ()
    keys = [("field", f, v) for f, v in equal_fields.items() if f in indexed]
    keys += [("label", k, v) for k, v in label_equalities(labels)]
    return Selection(predicate, name=equal_fields.get("metadata.name"),
                     namespace=equal_fields.get("metadata.namespace"), keys=tuple(keys))


def index_keys(rt: ResourceType, obj: dict) -> frozenset:
    """The index keys an object carries: each of its labels, and its indexed fields."""
    labels = obj.get("metadata", {}).get("labels") or {}
    keys = {("label", k, v) for k, v in labels.items() if isinstance(v, str)}
    for f in (INDEXED_FIELDS.get(rt.kind, ()) if not rt.group else ()):
        keys.add(("field", f, field_value(obj, f)))
    return frozenset(keys)


def route_keys(rt: ResourceType, obj: dict) -> set:
    """Every key a watcher may be routed by that this object carries (index keys, name, namespace)."""
    meta = obj.get("metadata", {})
    keys = set(index_keys(rt, obj))
    keys.add(("name", meta.get("name")))
    if meta.get("namespace"):
        keys.add(("ns", meta["namespace"]))
    return keys


_CUSTOM = "CustomResource"  # a kind with no field selectors of its own: metadata.name/namespace only
# Groups whose kinds have the field sets listed in selectors.FIELD_SELECTORS (custom resources: name/namespace).
_BUILTIN_GROUPS = ("apps", "batch", "policy", "events.k8s.io", "rbac.authorization.k8s.io", "coordination.k8s.io",
                   "scheduling.k8s.io", "discovery.k8s.io", "storage.k8s.io", "networking.k8s.io")
