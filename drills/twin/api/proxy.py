"""pods/proxy: the API server relays an HTTP request to a pod's port and hands back the answer
(`/api/v1/namespaces/{ns}/pods/{name}[:{port}]/proxy/{path}`; `{scheme}:{name}:{port}` names a scheme too).

This is how a client outside the cluster network reaches a pod over HTTP with only API credentials — a
Prometheus that runs beside the drills scrapes pods this way (relabel `__address__` to the API server and
`__metrics_path__` to the pod's proxy path). What answers is the pod's port program
(drills/twin/workloads/container_ports.py), the same one `kubectl port-forward` reaches; nothing listening is
the real server's 503 "error trying to reach service: dial tcp …: connect: connection refused".
RBAC: verb `get` (GET/HEAD) or `create` (POST) on `pods/proxy`, like the real server.

services/proxy (`/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}`): the same relay to one Ready pod
behind the Service (its selector), on the Service port's targetPort (a number or the container port's name);
none Ready is the real server's 503 "no endpoints available for service". RBAC: `services/proxy`.

nodes/proxy (`/api/v1/nodes/{name}/proxy/metrics`, the kubelet's port 10250): while the node's kubelet runs, the
kubelet's `kubelet_node_name{node}` gauge (k8s.io/kubernetes pkg/kubelet/metrics: NodeName) — enough for `up`
to say the kubelet answers; a stopped kubelet is the dial error, so `up` drops to 0 like a lost node's.
"""

from __future__ import annotations

import logging

import h11
from aiohttp import web

from drills.twin.api import status as st
from drills.twin.api.keys import STORE
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.controllers.nodeutil import kubelet_stopped, node_ip
from drills.twin.workloads import container_ports

__all__ = ["routes"]

log = logging.getLogger(__name__)

_PODS = by_path("", "v1", "pods")
_NODES = by_path("", "v1", "nodes")
_SERVICES = by_path("", "v1", "services")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te", "trailer",
               "content-length", "date", "server"}


def routes() -> list[web.RouteDef]:
    base = "/api/v1/namespaces/{namespace}/pods/{name}/proxy"
    svc = "/api/v1/namespaces/{namespace}/services/{name}/proxy"
    return [*(web.route(m, path, _proxy) for m in ("GET", "HEAD", "POST") for path in (base, base + "/{path:.*}")),
            *(web.route(m, path, _service_proxy) for m in ("GET", "HEAD", "POST") for path in (svc, svc + "/{path:.*}")),
            web.get("/api/v1/nodes/{name}/proxy/{path:.*}", _node_proxy)]


async def _node_proxy(request: web.Request) -> web.Response:
    store: Store = request.app[STORE]
    spec = request.match_info["name"]
    node = store.get(_NODES, None, spec.split(":")[-2] if spec.count(":") == 2 else spec.split(":")[0])
    name = node["metadata"]["name"]
    if kubelet_stopped(node):
        raise st.ApiError(503, "ServiceUnavailable",
                          f"error trying to reach service: dial tcp {node_ip(node)}:10250: connect: connection refused")
    if request.match_info["path"] != "metrics":
        return web.Response(status=404, text="404 page not found\n")
    text = ("# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.\n"
            f"# TYPE kubelet_node_name gauge\nkubelet_node_name{{node=\"{name}\"}} 1\n")
    return web.Response(text=text, content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})


async def _service_proxy(request: web.Request) -> web.StreamResponse:
    store: Store = request.app[STORE]
    ns, spec = request.match_info["namespace"], request.match_info["name"]
    parts = spec.split(":")
    scheme, name, port_ref = (parts if len(parts) == 3 else ["http", parts[0], parts[1] if len(parts) > 1 else ""])
    service = store.get(_SERVICES, ns, name)
    ports = (service.get("spec") or {}).get("ports") or []
    sport = next((p for p in ports if not port_ref or port_ref in (p.get("name"), str(p.get("port")))), None)
    if sport is None:
        raise st.ApiError(503, "ServiceUnavailable", f"no service port {port_ref!r} found for service {name!r}")
    selector = (service.get("spec") or {}).get("selector") or {}
    pods = sorted((p for p in store.list(_PODS, namespace=ns)[0] if selector and _selects(selector, p) and _ready(p)),
                  key=lambda p: p["metadata"]["name"])
    if not pods:
        raise st.ApiError(503, "ServiceUnavailable", f"no endpoints available for service {name!r}")
    target = sport.get("targetPort", sport.get("port"))
    port = target if isinstance(target, int) or str(target).isdigit() else _named_port(pods[0], str(target))
    if port is None:
        raise st.ApiError(503, "ServiceUnavailable", f"no endpoints available for service {name!r}")
    return await _relay(request, pods[0], scheme, int(port))


async def _proxy(request: web.Request) -> web.StreamResponse:
    store: Store = request.app[STORE]
    ns, spec = request.match_info["namespace"], request.match_info["name"]
    parts = spec.split(":")
    if len(parts) == 3:
        scheme, name, port_text = parts
    else:
        scheme, name, port_text = "http", parts[0], (parts[1] if len(parts) > 1 else "80")
    if scheme not in ("http", "https") or not port_text.isdigit():
        raise st.ApiError(400, "BadRequest", f"invalid pod proxy target {spec!r}: want name[:port] or scheme:name:port")
    return await _relay(request, store.get(_PODS, ns, name), scheme, int(port_text))


async def _relay(request: web.Request, pod: dict, scheme: str, port: int) -> web.StreamResponse:
    """Hand the request to the program listening on `port` of `pod`, and its answer back."""
    store: Store = request.app[STORE]
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise st.ApiError(503, "ServiceUnavailable", f"address not allowed: pod {pod['metadata']['name']} has no IP yet")
    factory = container_ports.listener(pod, port, store.clock.timestamp,
                                       request.app.get(container_ports.PORT_PROGRAMS, ()))
    if factory is None or scheme == "https":
        raise st.ApiError(503, "ServiceUnavailable",
                          f"error trying to reach service: dial tcp {ip}:{port}: connect: connection refused")
    target = "/" + request.match_info.get("path", "") + (f"?{request.query_string}" if request.query_string else "")
    body = await request.read() if request.can_read_body else b""
    raw = await factory().feed(_request_bytes(request.method, target, f"{ip}:{port}", request.headers, body))
    status, headers, payload = _parse(raw, request.method)
    resp = web.Response(status=status, body=payload)
    for key, value in headers:
        if key.lower() not in _HOP_BY_HOP:
            resp.headers.add(key, value)
    return resp


def _selects(selector: dict, pod: dict) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return bool(status.get("podIP")) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                             for c in status.get("conditions") or [])


def _named_port(pod: dict, name: str) -> int | None:
    return next((p.get("containerPort") for c in (pod.get("spec") or {}).get("containers") or []
                 for p in c.get("ports") or [] if p.get("name") == name), None)


def _request_bytes(method: str, target: str, host: str, headers, body: bytes) -> bytes:
    conn = h11.Connection(h11.CLIENT)
    keep = [(k, v) for k, v in headers.items() if k.lower() in ("accept", "accept-encoding", "user-agent",
                                                                "content-type", "x-prometheus-scrape-timeout-seconds")
            and not (k.lower() == "accept-encoding")]  # the twin's programs answer uncompressed
    head = [("Host", host), *keep, ("Connection", "close"), ("Content-Length", str(len(body)))]
    return (conn.send(h11.Request(method=method, target=target, headers=head)) or b"") + \
        (conn.send(h11.Data(data=body)) if body else b"") + (conn.send(h11.EndOfMessage()) or b"")


def _parse(raw: bytes, method: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """The program's answer: (status, headers, body); a garbled one is the real proxy's 502."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "pod")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(raw)
    conn.receive_data(b"")
    status, headers, chunks = 502, [], []
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = [(k.decode(), v.decode("latin-1")) for k, v in event.headers]
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif event is h11.NEED_DATA or isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
    except h11.RemoteProtocolError as err:
        log.warning("pod proxy: the pod's answer is not HTTP: %s", err)
        return 502, [], b"Bad Gateway"
    return status, headers, b"".join(chunks)
