"""The twin's own components' requests to its API server, handed to the server's application in this process.

A twin's controllers, kubelets and gateway run in the API server's process and event loop. Over HTTP each of their
~600 writes per twin was encoded, sent through the loopback, parsed by the server, answered and parsed back — half
the CPU a twin spends on bringing its pods up. `call` builds the request aiohttp's server would have built from the
same method, path, query, headers and body, and runs it through the same application (routing, middlewares: errors
as Status, audit with the component's User-Agent, authentication; handlers, admission, the store, watch events),
so the cluster's state, its audit log and what every other client sees are the same. Only the socket is gone.

Clients outside the twin (the drills, kubectl, Prometheus, the tests) always use HTTP; so do the components'
watches (a stream), which are not requests here.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11, RawRequestMessage
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

__all__ = ["call", "InProcessError"]

_PEER = ("127.0.0.1", 0)


class InProcessError(RuntimeError):
    """The handler answered with a stream (a watch, a log follow): not a request this path serves."""


class _Transport:
    """The connection a handler may look at: open, local."""

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return _PEER if name in ("peername", "sockname") else default


class _Protocol:
    """What aiohttp's Request reads from the server's protocol object."""

    ssl_context = None
    peername = _PEER
    sockname = _PEER
    transport = _Transport()
    writer = None
    _reading_paused = False

    def pause_reading(self, *args: Any, **kwargs: Any) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


_PROTOCOL = _Protocol()


async def call(app: web.Application, method: str, path: str, *, query: Mapping[str, str] | None = None,
               body: bytes | None = None, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """Run one request through `app` in this task; (status, body) of its answer. Yields to the loop once after, as
    the round trip over the loopback did, so a component writing in a loop does not hold up the others."""
    loop = asyncio.get_running_loop()
    url = URL(path)  # a path may carry its own query string, as on the wire
    if query:
        url = url.extend_query(dict(query))
    head = CIMultiDict(headers or {})
    head[hdrs.HOST] = "127.0.0.1"
    if body is not None:
        head[hdrs.CONTENT_LENGTH] = str(len(body))
    frozen = CIMultiDictProxy(head)
    raw = tuple((k.encode(), v.encode()) for k, v in frozen.items())
    message = RawRequestMessage(method, str(url), HttpVersion11, frozen, raw, False, None, False, False, url)
    payload = EMPTY_PAYLOAD
    if body:
        payload = StreamReader(_PROTOCOL, max(2 * len(body), 2 ** 16), loop=loop)  # type: ignore[arg-type]
        payload.feed_data(body)
        payload.feed_eof()
    task = asyncio.current_task()
    request = web.Request(message, payload, _PROTOCOL, None, task, loop,  # type: ignore[arg-type]
                          client_max_size=app._client_max_size)  # noqa: SLF001 — the app's own limit
    response = await app._handle(request)  # noqa: SLF001 — what aiohttp's server calls for each request
    if not isinstance(response, web.Response) or response.prepared:
        raise InProcessError(f"{method} {path} answered with a stream: use HTTP for it")
    await asyncio.sleep(0)
    data = response.body
    if data is None:
        return response.status, b""
    if not isinstance(data, (bytes, bytearray)):
        data = data._value if hasattr(data, "_value") else bytes(data)  # noqa: SLF001 — a BytesPayload
    return response.status, bytes(data)
