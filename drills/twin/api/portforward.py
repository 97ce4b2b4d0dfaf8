"""pods/portforward over WebSocket, the kubelet's channel protocol (`v4.channel.k8s.io`, or none): the
`ports` query names the pod's ports (repeated or comma-separated); port i gets data channel 2i and error
channel 2i+1, and the first frame on each is the port number (2 bytes, little-endian). The client's
frames on a data channel are the bytes it writes to that port; the twin feeds them to what the pod
serves there (drills/twin/workloads/container_ports.py) and sends its answer back on the same channel.
A port nothing listens on gets the kubelet's "connection refused" on its error channel at once.
kubectl's SPDY tunnelled through the WebSocket (`SPDY/3.1+portforward.k8s.io`) is portforward_spdy.py;
a plain SPDY upgrade (kubectl's fallback) gets the 400 a server without SPDY would give.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid

from aiohttp import WSMsgType, web

from drills.twin.api import status as st
from drills.twin.api.handlers import Target
from drills.twin.api.keys import VERB
from drills.twin.api.portforward_spdy import PROTOCOL as SPDY_TUNNEL
from drills.twin.api.portforward_spdy import serve as serve_spdy
from drills.twin.api.remotecommand import upgrade
from drills.twin.api.store import Store
from drills.twin.workloads import container_ports

__all__ = ["PROTOCOLS", "portforward_pod"]

PROTOCOLS = (SPDY_TUNNEL, "v4.channel.k8s.io")


async def portforward_pod(request: web.Request, store: Store, target: Target) -> web.StreamResponse:
    request[VERB] = "create" if request.method == "POST" else "get"
    tunnel = SPDY_TUNNEL in [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    ports = [] if tunnel else _ports(request.query.getall("ports", []))  # kubectl names ports in its streams
    pod = store.get(target.rt, target.namespace, target.name)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise st.bad_request(f"pod {target.name} is not running")
    ws = await upgrade(request, PROTOCOLS)
    extra = request.app.get(container_ports.PORT_PROGRAMS, ())
    if tunnel:
        await serve_spdy(ws, pod, lambda port: container_ports.listener(pod, port, store.clock.timestamp, extra),
                         lambda port: _refused(pod, port))
        return ws
    queues: dict[int, asyncio.Queue] = {}
    tasks: list[asyncio.Task] = []
    for ix, port in enumerate(ports):
        number = port.to_bytes(2, "little")
        await _send(ws, 2 * ix, number)
        await _send(ws, 2 * ix + 1, number)
        factory = container_ports.listener(pod, port, store.clock.timestamp, extra)
        if factory is None:
            await _send(ws, 2 * ix + 1, _refused(pod, port).encode())
            continue
        queues[2 * ix] = asyncio.Queue()
        tasks.append(asyncio.create_task(_pump(ws, 2 * ix, factory(), queues[2 * ix])))
    try:
        async for msg in ws:
            if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                continue
            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            if data and data[0] in queues and len(data) > 1:
                queues[data[0]].put_nowait(data[1:])
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, ConnectionResetError):
                await task
    return ws


async def _pump(ws: web.WebSocketResponse, channel: int, conn: container_ports.Connection, queue: asyncio.Queue) -> None:
    """One port's connection: what the client writes, in order, and the program's answers."""
    while not conn.closed:
        out = await conn.feed(await queue.get())
        if out and not ws.closed:
            await _send(ws, channel, out)


def _ports(values: list[str]) -> list[int]:
    ports: list[int] = []
    for text in (p for v in values for p in v.split(",")):
        try:
            port = int(text)
        except ValueError:
            raise st.bad_request(f'unable to parse "{text}" as a port: strconv.ParseUint: parsing "{text}": '
                                 f'invalid syntax') from None
        if not 0 < port < 65536:
            raise st.bad_request(f"port {port} must be > 0")
        ports.append(port)
    if not ports:
        raise st.bad_request('query parameter "port" is required')
    return ports


def _refused(pod: dict, port: int) -> str:
    """The kubelet's (containerd's) message when nothing listens on the port in the pod's network namespace."""
    uid = pod["metadata"].get("uid", pod["metadata"]["name"])
    sandbox = hashlib.sha256(f"sandbox/{uid}".encode()).hexdigest()
    netns = uuid.UUID(hashlib.md5(f"netns/{uid}".encode()).hexdigest())
    return (f'error forwarding port {port} to pod {sandbox}, uid : failed to execute portforward in network '
            f'namespace "/var/run/netns/cni-{netns}": failed to connect to localhost:{port} inside namespace '
            f'"{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 '
            f'[::1]:{port}: connect: connection refused ')


async def _send(ws: web.WebSocketResponse, channel: int, data: bytes) -> None:
    await ws.send_bytes(bytes([channel]) + data)
