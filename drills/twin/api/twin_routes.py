"""The twin's own endpoints under /twin/v1: things a real cluster has no API for.

- `GET  /twin/v1/clock` → `{"now": twin epoch seconds, "scale": x, "nowIso": "…Z"}`
- `GET  /twin/v1/audit[?since=SEQ]` → JSON list of audit records (see audit.py)
- `POST /twin/v1/namespaces/{ns}/pods/{name}/log[?container=c][&restart=true]` with a text/plain body:
  each line is appended to the container's log, stamped with twin now (or `?at=<epoch>`);
  `restart=true` first rotates the current log to `previous` (a container restart).
  Answers `{"appended": n}`; 404 when the pod does not exist.
- `POST /twin/v1/load` with `{"items": [obj, …]}` → creates them in one request (benchmarks and seeding).
- `GET  /twin/v1/health` → `{"ok": bool, "broken": [{component, error, message, where, key, count, traceback}]}`
  (see drills/twin/health.py); 503 while a component is broken, so `curl -f` fails.
- `GET  /twin/v1/stats` → object counts, open watches (`watches`: how many; `watchers`: each one's resource,
  group, namespace, name, labelSelector, fieldSelector, userAgent), resourceVersion.

Writes here are audited under the group `twin.gpu-drills.io`, except log appends (see audit.py).
"""

from __future__ import annotations

import json
import logging

from aiohttp import web

from drills.core.clock import to_iso
from drills.twin.api import status as st
from drills.twin.api import twin_node_routes
from drills.twin.api.handlers import OPEN_WATCHES, json_response
from drills.twin.api.keys import AUDIT, STORE
from drills.twin.api.resources import RESOURCES, by_kind, by_path
from drills.twin.api.store import Store
from drills.twin.api.subresources import log_container

__all__ = ["routes", "HEALTH", "write_stdout"]

log = logging.getLogger(__name__)

_PODS = by_path("", "v1", "pods")
HEALTH = web.AppKey("twin_health", object)  # app key: the twin's Health (set by the runtime; absent in bare API-server tests)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/twin/v1/clock", _clock),
        web.get("/twin/v1/audit", _audit),
        web.get("/twin/v1/stats", _stats),
        web.get("/twin/v1/health", _health),
        web.post("/twin/v1/namespaces/{namespace}/pods/{name}/log", _append_log),
        web.post("/twin/v1/load", _load),
        *twin_node_routes.routes(),  # node faults and container exits (C1)
    ]


async def _clock(request: web.Request) -> web.Response:
    clock = request.app[STORE].clock
    now = clock.timestamp()
    first = getattr(clock, "first_hold", None)  # the gated clock: what keeps it now (diagnosis)
    return json_response({"now": now, "scale": clock.scale, "nowIso": to_iso(now),
                          **({"held": first()} if first is not None else {})})


async def _audit(request: web.Request) -> web.Response:
    audit = request.app.get(AUDIT)
    since = int(request.query.get("since", "0") or 0)
    return json_response(audit.records(since) if audit else [])  # type: ignore[arg-type]


async def _stats(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    counts = {f"{rt.plural}.{rt.group}" if rt.group else rt.plural: store.count(rt) for rt in RESOURCES}
    watchers = list(request.app.get(OPEN_WATCHES, {}).values())
    return json_response({"resourceVersion": store.resource_version, "watches": store.watcher_count(),
                          "watchers": watchers, "objects": counts})


async def _health(request: web.Request) -> web.Response:
    health = request.app.get(HEALTH)
    snapshot = health.snapshot() if health is not None else {"ok": True, "broken": []}
    return json_response(snapshot, status=200 if snapshot["ok"] else 503)


async def _append_log(request: web.Request) -> web.Response:
    text = await request.text()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    at = float(request.query["at"]) if request.query.get("at") else None
    restart = request.query.get("restart") in ("1", "true", "True")
    appended = write_stdout(request.app[STORE], request.match_info["namespace"], request.match_info["name"],
                            request.query.get("container"), lines, at, restart=restart)
    return json_response({"appended": appended})


def write_stdout(store: Store, ns: str, name: str, container: str | None, lines: list[str], at: float | None = None,
                 restart: bool = False) -> int:
    """What a container prints reaching its log file (the kubelet's, not the API server's: a workload in the twin's
    own process writes here directly, as the HTTP route above does for the others). ApiError 404 once the pod is
    gone, 400 for a container it does not have."""
    pod = store.get(_PODS, ns, name)
    container = log_container(pod, container)
    if restart:
        store.logs.restart(ns, name, container)
    return store.logs.append(ns, name, container, lines, at)


async def _load(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    try:
        body = json.loads(await request.read())
    except ValueError as err:
        raise st.bad_request(f"malformed JSON: {err}") from None
    created = 0
    for obj in body.get("items", []) if isinstance(body, dict) else []:
        rt = by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            raise st.bad_request(f'no resource for apiVersion "{obj.get("apiVersion")}" kind "{obj.get("kind")}"')
        store.create(rt, obj, (obj.get("metadata") or {}).get("namespace"))
        created += 1
    return json_response({"created": created}, status=201)
