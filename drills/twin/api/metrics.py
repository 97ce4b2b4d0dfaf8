"""metrics.k8s.io/v1beta1 (what metrics-server serves, so `kubectl top nodes|pods` works on the twin).

The twin has no cgroups to sample: a running container uses what it asks for (its requests, else its
limits; an idle 5m CPU / 16Mi without either), and a node uses the sum of its running pods plus the
kubelet and container runtime (`_SYSTEM`). Quantities are written as metrics-server writes them: CPU in
nanocores (`n`), memory in KiB (`Ki`); `timestamp` is twin time and `window` the scrape window.
Read-only, like the real aggregated API (get, list; label selectors on list).
"""

from __future__ import annotations

from aiohttp import web

from drills.core.clock import to_iso
from drills.twin.api import status as st
from drills.twin.api.handlers import json_response
from drills.twin.api.keys import STORE
from drills.twin.api.resources import ResourceType, by_path
from drills.twin.api.selectors import parse_label_selector
from drills.twin.controllers.nodeutil import parse_quantity

__all__ = ["GROUP", "RESOURCES", "routes"]

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
RESOURCES = (
    ResourceType(GROUP, VERSION, "nodes", "NodeMetrics", namespaced=False, categories=(), verbs=("get", "list")),
    ResourceType(GROUP, VERSION, "pods", "PodMetrics", categories=(), verbs=("get", "list")),
)
_NODES = by_path("", "v1", "nodes")
_PODS = by_path("", "v1", "pods")
_IDLE = {"cpu": 0.005, "memory": 16 * 2**20}  # a container that asks for nothing
_SYSTEM = {"cpu": 0.25, "memory": 2 * 2**30}  # kubelet, container runtime, system daemons on every node
_WINDOW = "20.035s"  # metrics-server's scrape window (--metric-resolution 15s plus the scrape)
_BASE = f"/apis/{GROUP}/{VERSION}"


def routes() -> list[web.RouteDef]:
    return [web.get(f"{_BASE}/nodes", _node_list), web.get(f"{_BASE}/nodes/{{name}}", _node),
            web.get(f"{_BASE}/pods", _pod_list), web.get(f"{_BASE}/namespaces/{{ns}}/pods", _pod_list),
            web.get(f"{_BASE}/namespaces/{{ns}}/pods/{{name}}", _pod)]


async def _node_list(request: web.Request) -> web.Response:
    store = request.app[STORE]
    selected = parse_label_selector(request.query.get("labelSelector"))
    nodes = [n for n in store.list(_NODES)[0] if selected(n["metadata"].get("labels"))]
    usage = _usage_by_node(store)
    return json_response(_list("NodeMetricsList", [_node_metrics(store, n, usage) for n in nodes]))


async def _node(request: web.Request) -> web.Response:
    store = request.app[STORE]
    node = store.find(_NODES, None, request.match_info["name"])
    if node is None:
        raise _not_found("nodes", request.match_info["name"])
    return json_response(_node_metrics(store, node, _usage_by_node(store)))


async def _pod_list(request: web.Request) -> web.Response:
    store = request.app[STORE]
    selected = parse_label_selector(request.query.get("labelSelector"))
    pods = [p for p in store.list(_PODS, request.match_info.get("ns"))[0]
            if _running(p) and selected(p["metadata"].get("labels"))]
    return json_response(_list("PodMetricsList", [_pod_metrics(store, p) for p in pods]))


async def _pod(request: web.Request) -> web.Response:
    store = request.app[STORE]
    pod = store.find(_PODS, request.match_info["ns"], request.match_info["name"])
    if pod is None or not _running(pod):
        raise _not_found("pods", request.match_info["name"])
    return json_response(_pod_metrics(store, pod))


def _list(kind: str, items: list[dict]) -> dict:
    return {"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}


def _node_metrics(store, node: dict, usage: dict[str, dict[str, float]]) -> dict:
    meta = node["metadata"]
    used = usage.get(meta["name"], {})
    return {"metadata": {"name": meta["name"], "creationTimestamp": _now(store), "labels": meta.get("labels") or {}},
            "timestamp": _now(store), "window": _WINDOW,
            "usage": _quantities({k: v + used.get(k, 0.0) for k, v in _SYSTEM.items()})}


def _pod_metrics(store, pod: dict) -> dict:
    meta = pod["metadata"]
    return {"metadata": {"name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": _now(store),
                         "labels": meta.get("labels") or {}},
            "timestamp": _now(store), "window": _WINDOW,
            "containers": [{"name": c["name"], "usage": _quantities(_container_usage(c))}
                           for c in pod["spec"].get("containers") or ()]}


def _usage_by_node(store) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for pod in store.list(_PODS)[0]:
        node = pod["spec"].get("nodeName")
        if not node or not _running(pod):
            continue
        total = out.setdefault(node, {"cpu": 0.0, "memory": 0.0})
        for container in pod["spec"].get("containers") or ():
            for name, value in _container_usage(container).items():
                total[name] += value
    return out


def _container_usage(container: dict) -> dict[str, float]:
    res = container.get("resources") or {}
    asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {name: parse_quantity(asked[name]) if name in asked else idle for name, idle in _IDLE.items()}


def _quantities(usage: dict[str, float]) -> dict[str, str]:
    return {"cpu": f"{round(usage['cpu'] * 1e9)}n", "memory": f"{round(usage['memory'] / 1024)}Ki"}


def _running(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _now(store) -> str:
    return to_iso(store.clock.timestamp())


def _not_found(plural: str, name: str) -> st.ApiError:
    return st.ApiError(404, "NotFound", f'{plural}.{GROUP} "{name}" not found',
                       {"name": name, "group": GROUP, "kind": plural})
