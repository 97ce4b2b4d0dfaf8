"""pods/portforward as kubectl ≥ 1.31 speaks it: SPDY/3.1 tunnelled through a WebSocket
(`SPDY/3.1+portforward.k8s.io`; every binary message carries SPDY bytes), the kubelet's port-forward
protocol on top. For each local connection kubectl opens an error stream and a data stream, both with
the headers `streamtype` (error | data), `port` and `requestid`; the server replies to each, then
carries the data stream's bytes to what the pod serves on that port (container_ports.py) and back.
When kubectl half-closes the data stream (its local connection closed), or the program closes the
connection, the server ends both streams; a port nothing listens on gets the kubelet's error on the
error stream, then both end. SPDY PINGs are answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import WSMsgType, web

from drills.twin.api import spdy
from drills.twin.workloads import container_ports

__all__ = ["PROTOCOL", "serve"]

PROTOCOL = "SPDY/3.1+portforward.k8s.io"


@dataclass
class _Pair:
    port: int
    error: int = 0
    data: int = 0
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    task: asyncio.Task | None = None


async def serve(ws: web.WebSocketResponse, pod: dict, listener: Callable[[int], container_ports.Factory | None],
                refused: Callable[[int], str]) -> None:
    """Serve one tunnelled SPDY session until kubectl closes it. `listener(port)` is what listens there."""
    session = spdy.Session()
    pairs: dict[str, _Pair] = {}
    by_data: dict[int, _Pair] = {}
    lock = asyncio.Lock()

    async def send(*frames: bytes) -> None:
        async with lock:
            if not ws.closed:
                await ws.send_bytes(b"".join(frames))

    async def forward(pair: _Pair, conn: container_ports.Connection) -> None:
        while not conn.closed:
            data = await pair.queue.get()
            if data is None:
                break
            out = await conn.feed(data)
            if out:
                await send(session.data(pair.data, out))
        await send(session.data(pair.data, b"", fin=True), session.data(pair.error, b"", fin=True))

    async def start(pair: _Pair) -> None:
        factory = listener(pair.port)
        if factory is None:
            await send(session.data(pair.error, refused(pair.port).encode()), session.data(pair.error, b"", fin=True),
                       session.data(pair.data, b"", fin=True))
            return
        pair.task = asyncio.create_task(forward(pair, factory()))

    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                continue
            for frame in session.feed(msg.data):
                if frame.type == spdy.SYN_STREAM:
                    await send(session.syn_reply(frame.stream))
                    pair = pairs.setdefault(frame.headers.get("requestid", ""),
                                            _Pair(_port(frame.headers.get("port", ""))))
                    if frame.headers.get("streamtype") == "error":
                        pair.error = frame.stream
                    else:
                        pair.data = frame.stream
                        by_data[frame.stream] = pair
                    if pair.error and pair.data:
                        await start(pair)
                elif frame.type == spdy.DATA and frame.stream in by_data:
                    pair = by_data[frame.stream]
                    if frame.data:
                        pair.queue.put_nowait(frame.data)
                    if frame.fin:
                        pair.queue.put_nowait(None)
                elif frame.type == spdy.RST_STREAM and frame.stream in by_data:
                    by_data[frame.stream].queue.put_nowait(None)
                elif frame.type == spdy.PING:
                    await send(session.ping(frame.value))
                elif frame.type == spdy.GOAWAY:
                    await ws.close()
    finally:
        tasks = [p.task for p in pairs.values() if p.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, ConnectionResetError):
                await task


def _port(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0
