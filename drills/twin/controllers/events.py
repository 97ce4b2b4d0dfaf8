"""Record core/v1 Events the way client-go's recorder does: one Event per (object, reason, message),
repeats bump `count` and `lastTimestamp` instead of piling up new objects.

Every controller uses this so `kubectl describe` and `kubectl get events` read like a real cluster.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from drills.core.clock import Clock, to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.client import ApiError, TwinClient

__all__ = ["record_event", "involved_object", "event_name"]

log = logging.getLogger(__name__)

_EVENTS = by_kind("v1", "Event")
_SEEN_MAX = 4096
# (client id, namespace, uid-or-name, reason, message, component) -> (event name, count)
_seen: "OrderedDict[tuple, tuple[str, int]]" = OrderedDict()
_last_ns = 0  # the last name's nanosecond stamp: names strictly increase in this process


def event_name(base: str, at: float) -> str:
    """client-go's recorder names an Event `<object>.<UnixNano in hex>` (tools/record/event.go, makeEvent): the
    API server lists in key order, so one object's events list in the order they were made — what a reader of
    events stamped within one second (RFC 3339) gets. The twin's clock reads one instant twice while it waits
    for the twin's work (drills/core/gatedclock.py), so an event made later in that instant takes the next
    nanosecond: a name is never taken twice, and the order stays the order of making."""
    global _last_ns
    _last_ns = max(int(at * 1e9), _last_ns + 1)
    return f"{base}.{_last_ns:x}"


async def record_event(client: TwinClient, obj: dict, reason: str, message: str, type: str = "Normal",
                       component: str = "twin-controller", *, clock: Clock | None = None,
                       host: str | None = None) -> dict | None:
    """Record (or bump) an Event about `obj`; never raises — events are best effort, as upstream.

    Pass the controller's `clock` (ctx.clock) so timestamps are twin time; `host` is the node name
    for kubelet events (`source.host`)."""
    at = clock.timestamp() if clock is not None else time.time()
    now = to_iso(at)
    ref = involved_object(obj)
    namespace = ref.get("namespace") or "default"
    key = (id(client), namespace, ref.get("uid") or ref.get("name"), reason, message, component)
    try:
        prior = _seen.get(key)
        if prior is not None:
            name, count = prior
            patched = await client.patch(_EVENTS, namespace, name, {"count": count + 1, "lastTimestamp": now})
            if patched is not None:
                _remember(key, name, count + 1)
                return patched
        source: dict[str, Any] = {"component": component}
        if host:
            source["host"] = host
        base = ref.get("name") or "unknown"
        event = {
            "metadata": {"name": event_name(base, at), "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": host or "",
            "action": reason,
        }
        created = await client.create(_EVENTS, event, namespace)
        _remember(key, created["metadata"]["name"], 1)
        return created
    except (ApiError, OSError) as err:
        log.debug("event %s on %s/%s not recorded: %s", reason, namespace, ref.get("name"), err)
        return None


def involved_object(obj: dict) -> dict:
    """The ObjectReference an Event points at."""
    meta = obj.get("metadata", {})
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return {k: v for k, v in ref.items() if v != ""}


def _remember(key: tuple, name: str, count: int) -> None:
    _seen[key] = (name, count)
    _seen.move_to_end(key)
    while len(_seen) > _SEEN_MAX:
        _seen.popitem(last=False)
