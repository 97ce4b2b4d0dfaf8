"""pods/exec over WebSocket, the channel protocol kubectl ≥ 1.30 speaks first (`v5.channel.k8s.io`, and
`v4.channel.k8s.io`): each binary message is one channel byte then data — 0 stdin, 1 stdout, 2 stderr,
3 error (the exec's Status as JSON: Success, or NonZeroExitCode with the exit code as an ExitCode cause),
4 resize; v5 adds 255, a close signal for one channel. The twin answers from the container's model
(drills/twin/workloads/container_exec.py) and closes. A request without the WebSocket upgrade (SPDY,
kubectl's fallback) gets the 400 a server without SPDY would give; kubectl then reports it.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web

from drills.twin.api import status as st
from drills.twin.api.handlers import Target
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.workloads import container_exec

__all__ = ["PROTOCOLS", "exec_pod"]

log = logging.getLogger(__name__)

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDOUT, STDERR, ERROR = 1, 2, 3
_NODES = by_path("", "v1", "nodes")


async def exec_pod(request: web.Request, store: Store, target: Target, container: str) -> web.StreamResponse:
    """`container` is the one the request names (or the pod's only/default one: subresources.log_container)."""
    request["verb"] = "create" if request.method == "POST" else "get"
    q = request.query
    command = q.getall("command", [])
    if not command:
        raise st.bad_request("you must specify at least 1 command")
    pod = store.get(target.rt, target.namespace, target.name)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise st.bad_request(f"container {container} is not running in pod {target.name}")
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    if not ws.can_prepare(request).ok:
        raise st.bad_request("Upgrade request required")
    await ws.prepare(request)
    node_name = pod["spec"].get("nodeName")
    node = store.find(_NODES, None, node_name) if node_name else None
    try:
        result = container_exec.run(command, pod, container, node)
    except container_exec.NotFound as missing:
        await _send(ws, ERROR, json.dumps(st.status_body(
            500, "InternalError", f'Internal error occurred: error executing command in container: failed to exec in '
            f'container: OCI runtime exec failed: exec failed: unable to start container process: exec: '
            f'"{missing.executable}": executable file not found in $PATH: unknown', {})).encode())
        await ws.close()
        return ws
    if result.stdout and q.get("stdout") in ("1", "true"):
        await _send(ws, STDOUT, result.stdout.encode())
    if result.stderr and q.get("stderr") in ("1", "true"):
        await _send(ws, STDERR, result.stderr.encode())
    await _send(ws, ERROR, json.dumps(_exit_status(command, result.code)).encode())
    await ws.close()
    return ws


def _exit_status(command: list[str], code: int) -> dict:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {_go_list(command)}, "
                       f"exit code {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def _go_list(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


async def _send(ws: web.WebSocketResponse, channel: int, data: bytes) -> None:
    await ws.send_bytes(bytes([channel]) + data)
