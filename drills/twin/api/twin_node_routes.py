"""Twin fault endpoints for nodes and containers: they only write annotations on the object (through
the store, like any API write, so watches see them); the controllers do the rest.

- `POST /twin/v1/nodes/{name}/kubelet` `{"action": "stop"|"start"}` — stop: annotations
  `twin.gpu-drills.io/kubelet: stopped` and `…/kubelet-stopped-at: <twin now>` (the last heartbeat);
  heartbeats and pod stages stop, the node goes NotReady after node_monitor_grace_period and its pods
  are evicted after tolerationSeconds. start: the annotations go; the kubelet posts Ready again.
  `GET` answers the current state.
- `POST /twin/v1/nodes/{name}/gpu` `{"state": "unhealthy"|"healthy", "xid": 79, "count": 1}` —
  annotations `…/gpu-health: unhealthy`, `…/gpu-xid`, `…/gpu-unhealthy` (count), `…/gpu-unhealthy-at`.
  The device plugin reacts (allocatable drops, condition, taint) unless the `no-gpu-health-check`
  defect; workloads on the node see the fault through the annotations either way.
- `POST /twin/v1/namespaces/{ns}/pods/{name}/exit` `{"code": 1, "reason": "Error", "message": "…",
  "container": "name"}` — annotation `twin.gpu-drills.io/exit` (JSON); the kubelet terminates the
  container with that code and applies restartPolicy.
Each answers `{"kind": …, "name": …, …}` with the twin time of the change; 404 when the object is gone.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web

from drills.twin.api import status as st
from drills.twin.api.handlers import json_response
from drills.twin.api.keys import STORE
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.controllers.nodeutil import (
    EXIT_ANNOTATION, GPU_HEALTH_ANNOTATION, GPU_UNHEALTHY_AT, GPU_UNHEALTHY_COUNT, GPU_XID_ANNOTATION,
    KUBELET_ANNOTATION, KUBELET_STOPPED_AT,
)

__all__ = ["routes"]

log = logging.getLogger(__name__)

_NODES = by_path("", "v1", "nodes")
_PODS = by_path("", "v1", "pods")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/twin/v1/nodes/{name}/kubelet", _get_kubelet),
        web.post("/twin/v1/nodes/{name}/kubelet", _set_kubelet),
        web.post("/twin/v1/nodes/{name}/gpu", _set_gpu),
        web.post("/twin/v1/namespaces/{namespace}/pods/{name}/exit", _exit_container),
    ]


async def _get_kubelet(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    name = request.match_info["name"]
    ann = store.get(_NODES, None, name)["metadata"].get("annotations") or {}
    stopped = ann.get(KUBELET_ANNOTATION) == "stopped"
    return json_response({"kind": "Node", "name": name, "kubelet": "stopped" if stopped else "running",
                          "stoppedAt": ann.get(KUBELET_STOPPED_AT)})


async def _set_kubelet(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    name = request.match_info["name"]
    body = await _body(request)
    action = str(body.get("action") or body.get("state") or "").lower()
    if action not in ("stop", "stopped", "start", "started", "running"):
        raise st.bad_request('kubelet action must be "stop" or "start"')
    stop = action.startswith("stop")
    now = store.now_iso()

    def change(node: dict) -> dict:
        ann = node["metadata"].setdefault("annotations", {})
        if stop:
            if ann.get(KUBELET_ANNOTATION) != "stopped":
                ann[KUBELET_ANNOTATION] = "stopped"
                ann[KUBELET_STOPPED_AT] = now
        else:
            ann.pop(KUBELET_ANNOTATION, None)
            ann.pop(KUBELET_STOPPED_AT, None)
        return node

    node = store.update(_NODES, None, name, change)
    log.info("twin fault: kubelet on %s %s", name, "stopped" if stop else "started")
    ann = node["metadata"].get("annotations") or {}
    return json_response({"kind": "Node", "name": name, "kubelet": "stopped" if stop else "running",
                          "at": ann.get(KUBELET_STOPPED_AT, now)})


async def _set_gpu(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    name = request.match_info["name"]
    body = await _body(request)
    state = str(body.get("state") or body.get("action") or "").lower()
    if state not in ("unhealthy", "healthy"):
        raise st.bad_request('gpu state must be "unhealthy" or "healthy"')
    try:
        xid, count = int(body.get("xid", 79)), int(body.get("count", 1))
    except (TypeError, ValueError):
        raise st.bad_request("xid and count must be integers") from None
    now = store.now_iso()

    def change(node: dict) -> dict:
        ann = node["metadata"].setdefault("annotations", {})
        if state == "unhealthy":
            ann.update({GPU_HEALTH_ANNOTATION: "unhealthy", GPU_XID_ANNOTATION: str(xid),
                        GPU_UNHEALTHY_COUNT: str(max(1, count)), GPU_UNHEALTHY_AT: now})
        else:
            for key in (GPU_HEALTH_ANNOTATION, GPU_XID_ANNOTATION, GPU_UNHEALTHY_COUNT, GPU_UNHEALTHY_AT):
                ann.pop(key, None)
        return node

    store.update(_NODES, None, name, change)
    log.info("twin fault: GPU on %s %s", name, state)
    return json_response({"kind": "Node", "name": name, "gpu": state, "xid": xid, "count": count, "at": now})


async def _exit_container(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    ns, name = request.match_info["namespace"], request.match_info["name"]
    body = await _body(request)
    try:
        code = int(body.get("code", 1))
    except (TypeError, ValueError):
        raise st.bad_request("code must be an integer") from None
    req = {"code": code, **{k: str(body[k]) for k in ("reason", "message", "container") if body.get(k)}}

    def change(pod: dict) -> dict:
        pod["metadata"].setdefault("annotations", {})[EXIT_ANNOTATION] = json.dumps(req)
        return pod

    store.update(_PODS, ns, name, change)
    return json_response({"kind": "Pod", "namespace": ns, "name": name, "exit": req, "at": store.now_iso()})


async def _body(request: web.Request) -> dict:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise st.bad_request(f"malformed JSON: {err}") from None
    if not isinstance(body, dict):
        raise st.bad_request("the body must be a JSON object")
    return body
