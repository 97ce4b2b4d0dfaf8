"""pods/exec over WebSocket, the channel protocol kubectl ≥ 1.30 speaks first (`v5.channel.k8s.io`, and
`v4.channel.k8s.io`): each binary message is one channel byte then data — 0 stdin, 1 stdout, 2 stderr,
3 error (the exec's Status as JSON: Success, or NonZeroExitCode with the exit code as an ExitCode cause),
4 resize; v5 adds 255, a close signal for one channel. The twin answers from the container's model
(drills/twin/workloads/container_exec.py): what the client writes on stdin goes to the command (a shell
reading its commands, `cat`); a v5 close of stdin is its end of input. When the command ends, the exit
Status and the close. A request without the WebSocket upgrade (SPDY,
kubectl's fallback) gets the 400 a server without SPDY would give; kubectl then reports it.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import WSMsgType, web

from drills.twin.api import status as st
from drills.twin.api.handlers import Target
from drills.twin.api.keys import VERB
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.workloads import container_exec

__all__ = ["PROTOCOLS", "exec_pod", "upgrade"]

log = logging.getLogger(__name__)

V5 = "v5.channel.k8s.io"
PROTOCOLS = (V5, "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
_TRUE = ("1", "true", "True")
# Wall seconds from the upgrade to the command's first byte: a real exec goes API server → kubelet → runtime →
# `runc exec` before the process prints anything. Answering at once raced kubectl's own WebSocket client, which
# registers its streams after it starts reading ("Unknown stream id 1, discarding message": the output was lost).
EXEC_START_S = 0.05
_NODES = by_path("", "v1", "nodes")


async def exec_pod(request: web.Request, store: Store, target: Target, container: str) -> web.StreamResponse:
    """`container` is the one the request names (or the pod's only/default one: subresources.log_container)."""
    request[VERB] = "create" if request.method == "POST" else "get"
    q = request.query
    command = q.getall("command", [])
    if not command:
        raise st.bad_request("you must specify at least 1 command")
    pod = store.get(target.rt, target.namespace, target.name)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise st.bad_request(f"container {container} is not running in pod {target.name}")
    ws = await upgrade(request, PROTOCOLS)
    await asyncio.sleep(EXEC_START_S)
    node_name = pod["spec"].get("nodeName")
    node = store.find(_NODES, None, node_name) if node_name else None
    wanted = {STDOUT: q.get("stdout") in _TRUE, STDERR: q.get("stderr") in _TRUE}
    try:
        session = container_exec.start(command, pod, container, node, store.clock.timestamp(),
                                       stdin=q.get("stdin") in _TRUE, volume_dir=getattr(store, "volume_dir", None),
                                       unlink_denied=getattr(store, "unlink_denied", False))
    except container_exec.NotFound as missing:
        await _send(ws, ERROR, json.dumps(st.status_body(
            500, "InternalError", f'Internal error occurred: error executing command in container: failed to exec in '
            f'container: OCI runtime exec failed: exec failed: unable to start container process: exec: '
            f'"{missing.executable}": executable file not found in $PATH: unknown', {})).encode())
        await ws.close()
        return ws
    if session.output.node_annotations and node_name:  # the command changed its node's state (dcgmi test --inject)
        _annotate(store, node_name, session.output.node_annotations)
    await _flush(ws, session, wanted, store)
    if not session.finished:
        async for msg in ws:
            if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                continue
            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            if data[:1] == bytes([STDIN]):
                session.feed(data[1:])
            elif data[:2] == bytes([CLOSE, STDIN]) and ws.ws_protocol == V5:
                session.close_stdin()
            await _flush(ws, session, wanted, store)
            if session.finished:
                break
        else:
            return ws  # the client went away before the command ended
    await _send(ws, ERROR, json.dumps(_exit_status(command, session.output.code)).encode())
    await ws.close()
    return ws


def _annotate(store: Store, node: str, annotations: dict) -> None:
    """Write what a command changed on its node, through the store like any API write (watches see it)."""
    def change(obj: dict) -> dict:
        obj["metadata"].setdefault("annotations", {}).update(annotations)
        return obj

    store.update(_NODES, None, node, change)


async def upgrade(request: web.Request, protocols: tuple[str, ...]) -> web.WebSocketResponse:
    """The WebSocket of an exec/attach/port-forward request, one of `protocols` negotiated; 400 as the real
    server answers a request that is not an upgrade."""
    ws = web.WebSocketResponse(protocols=protocols)
    if not ws.can_prepare(request).ok:
        raise st.bad_request("Upgrade request required")
    await ws.prepare(request)
    return ws


async def _flush(ws: web.WebSocketResponse, session: container_exec.Session, wanted: dict[int, bool],
                 store: Store) -> None:
    """Send what the command printed since the last flush, once the (twin) time it took has passed."""
    out = session.take()
    if out.seconds:
        await asyncio.sleep(store.clock.wall_seconds(out.seconds))
    for channel, data in ((STDOUT, out.stdout), (STDERR, out.stderr)):
        if data and wanted[channel]:
            await _send(ws, channel, data)


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
