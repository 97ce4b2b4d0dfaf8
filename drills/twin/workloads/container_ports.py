"""What a simulated container serves on its ports, for `pods/portforward` (drills/twin/api/portforward.py).
The twin has no processes: a few well-known programs are modelled as data, found by image and command.

- an `nginx` image: HTTP on port 80 with nginx's welcome page (`pages/nginx-index.html`, verbatim from
  nginx/nginx docs/html/index.html@3f6f7824d4e2eb1ac37dec76683d525ac0ff521c) for `GET /` and
  `/index.html`, nginx's 404 page otherwise; `Server: nginx/<the image tag when it is a version>`.
- a `port-server.py` script (the official python client's e2e port server, run as
  `python -u /opt/port-server.py 1234 1235`): a TCP echo server on each port it is given.
- anything a component registers (`PORT_PROGRAMS` on the API server's app: a list of `Program`s), e.g.
  the inference gateway's vLLM OpenAI API on a model replica's port.

Nothing else listens: the port-forward gets the kubelet's "connection refused".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Protocol

import h11
from aiohttp import web

__all__ = ["Connection", "Echo", "Factory", "HttpConnection", "HttpReply", "HttpRequest", "PORT_PROGRAMS", "Program",
           "listener"]

PORT_PROGRAMS = web.AppKey("twin.port_programs", list)  # app key: extra Programs registered by components
NGINX_VERSION = "1.31.5"  # nginx/nginx src/core/nginx.h at the commit the welcome page is from
_NGINX_PAGE = (Path(__file__).parent / "pages" / "nginx-index.html").read_bytes()
_VERSION_TAG = re.compile(r"^\d+\.\d+\.\d+")


class Connection(Protocol):
    """One TCP connection into the container: bytes in, the bytes the program answers with."""

    closed: bool

    async def feed(self, data: bytes) -> bytes: ...


Factory = Callable[[], Connection]
Program = Callable[[dict, int, Callable[[], float]], "Factory | None"]  # (pod, port, now) → a listener or None


@dataclass
class Echo:
    """A TCP echo server."""

    closed: bool = False

    async def feed(self, data: bytes) -> bytes:
        return data


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


HttpApp = Callable[[HttpRequest], Awaitable[HttpReply]]


@dataclass
class HttpConnection:
    """An HTTP/1.1 server connection (keep-alive, `Connection: close` honoured) answering with `app`."""

    app: HttpApp
    now: Callable[[], float]
    server: str
    closed: bool = False
    _h11: h11.Connection = field(default_factory=lambda: h11.Connection(h11.SERVER))
    _request: h11.Request | None = None
    _body: bytes = b""

    async def feed(self, data: bytes) -> bytes:
        out = b""
        self._h11.receive_data(data)
        while not self.closed:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError:
                self.closed = True
                return out + _bad_request(self.server)
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Request):
                self._request, self._body = event, b""
            elif isinstance(event, h11.Data):
                self._body += event.data
            elif isinstance(event, h11.EndOfMessage):
                out += await self._respond()
                if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
                    self._h11.start_next_cycle()
                else:
                    self.closed = True
            elif isinstance(event, h11.ConnectionClosed):
                self.closed = True
        return out

    async def _respond(self) -> bytes:
        req = self._request
        assert req is not None
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in req.headers}
        reply = await self.app(HttpRequest(req.method.decode(), req.target.decode("latin-1"), headers, self._body))
        body = b"" if req.method == b"HEAD" else reply.body
        head = [("Server", self.server), ("Date", formatdate(self.now(), usegmt=True)), *reply.headers,
                ("Content-Length", str(len(reply.body)))]
        return (self._h11.send(h11.Response(status_code=reply.status, headers=head,
                                                 reason=HTTPStatus(reply.status).phrase)) or b"") + \
            (self._h11.send(h11.Data(data=body)) if body else b"") + (self._h11.send(h11.EndOfMessage()) or b"")


def listener(pod: dict, port: int, now: Callable[[], float], extra: Iterable[Program] = ()) -> Factory | None:
    """What listens on `port` in `pod` (any of its containers: they share the network namespace)."""
    for program in (*extra, _nginx, _port_server):
        found = program(pod, port, now)
        if found is not None:
            return found
    return None


def _containers(pod: dict) -> list[dict]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _nginx(pod: dict, port: int, now: Callable[[], float]) -> Factory | None:
    if port != 80:
        return None
    for c in _containers(pod):
        base, _, tag = (c.get("image") or "").rsplit("/", 1)[-1].split("@")[0].partition(":")
        if base == "nginx":
            version = _VERSION_TAG.match(tag)
            server = f"nginx/{version.group(0) if version else NGINX_VERSION}"
            return lambda: HttpConnection(_nginx_app(server), now, server)
    return None


def _nginx_app(server: str) -> HttpApp:
    async def app(req: HttpRequest) -> HttpReply:
        if req.method not in ("GET", "HEAD"):
            return _nginx_error(405, "Not Allowed", server)
        if req.path.split("?", 1)[0] in ("/", "/index.html"):
            return HttpReply(200, _NGINX_PAGE, (("Content-Type", "text/html"), ("Accept-Ranges", "bytes")))
        return _nginx_error(404, "Not Found", server)
    return app


def _nginx_error(status: int, reason: str, server: str) -> HttpReply:
    page = (f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}"
            f"</h1></center>\r\n<hr><center>{server}</center>\r\n</body>\r\n</html>\r\n")
    return HttpReply(status, page.encode(), (("Content-Type", "text/html"),))


def _bad_request(server: str) -> bytes:
    page = _nginx_error(400, "Bad Request", server).body
    return (f"HTTP/1.1 400 Bad Request\r\nServer: {server}\r\nContent-Type: text/html\r\n"
            f"Content-Length: {len(page)}\r\nConnection: close\r\n\r\n").encode() + page


def _port_server(pod: dict, port: int, now: Callable[[], float]) -> Factory | None:
    for c in _containers(pod):
        argv = [*(c.get("command") or ()), *(c.get("args") or ())]
        script = next((i for i, a in enumerate(argv) if a.endswith("port-server.py")), None)
        if script is not None and str(port) in argv[script + 1:]:
            return Echo
    return None
