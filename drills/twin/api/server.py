"""The twin's API server: an aiohttp application over a Store, and its lifecycle on 127.0.0.1.

Routes: discovery (discovery.py), `/api/v1/...` and `/apis/{group}/{version}/...` (handlers.py),
the twin's own `/twin/v1/...` (twin_routes.py). Failures are rendered as Status objects; every
mutating request is written to the audit log (the twin's own log appends excepted, see audit.py).
With `tls` (tls.py) the same app is also served over HTTPS, where a request must carry the
service-account bearer token (401 otherwise), as a pod talks to a real API server; there every API
request, reads included, is audited with its user and the authorizer's decision and reason (the real
audit annotations), so a test can tell which granted rule a run used and that none was refused.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
from email.utils import formatdate

from aiohttp import hdrs, web

from drills.twin.api import discovery, metrics, proxy, rbac, status as st, twin_routes, watch
from drills.twin.api.audit import MUTATING_METHODS, TWIN_GROUP, TWIN_PREFIX, AuditLog, twin_target
from drills.twin.api.handlers import OPEN_WATCHES, WARNINGS, dispatch, resolve
from drills.twin.api.keys import ATTRIBUTES, AUDIT, AUTHORIZATION, OBJECT_NAME, STARTED, STORE, TARGET, USER, VERB
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.api.tls import NAMESPACE as SERVICE_ACCOUNT_NAMESPACE, TlsFiles, server_context

__all__ = ["build_app", "ApiServer"]

log = logging.getLogger(__name__)

_SECRETS = by_path("", "v1", "secrets")
SERVICE_ACCOUNT_NAME = "gpu-drills"  # the TLS token's service account (what `drills schedule` creates)
_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


_TOKEN = web.AppKey("bearer_token", str)


def build_app(store: Store, audit: AuditLog | None = None, token: str | None = None) -> web.Application:
    """The aiohttp application serving `store` (the audit log is optional for in-process tests); `token`:
    the bearer token HTTPS requests must carry."""
    app = web.Application(middlewares=[_status_errors, _audited, _authenticated], client_max_size=64 * 1024 * 1024)
    app[STORE] = store
    app[AUDIT] = audit
    app[_TOKEN] = token or ""
    app[watch.WATCH_QUEUES] = set()
    app[OPEN_WATCHES] = {}
    app.add_routes(discovery.routes())
    app.add_routes(twin_routes.routes())
    app.add_routes(metrics.routes())  # before the stored kinds' catch-all routes
    app.add_routes(proxy.routes())
    app.add_routes([
        web.route("*", "/api/{version}/{tail:.+}", _core),
        web.route("*", "/apis/{group}/{version}/{tail:.+}", _grouped),
    ])
    app.on_shutdown.append(_on_shutdown)
    app.on_response_prepare.append(_on_response_prepare)
    return app


class ApiServer:
    """Runs the app on `host:port` (0 = a free port) inside the current event loop; with `tls`, also on an
    HTTPS port (`tls_url`) that requires the service-account token."""

    def __init__(self, store: Store, audit: AuditLog | None = None, host: str = "127.0.0.1", port: int = 0,
                 tls: TlsFiles | None = None):
        self.app = build_app(store, audit, token=tls.token if tls else None)
        self.host, self.port = host, port
        self.tls, self.tls_port = tls, 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def tls_url(self) -> str | None:
        return f"https://{self.host}:{self.tls_port}" if self.tls else None

    async def start(self) -> str:
        # handler_cancellation: a client that hangs up ends its watch / log follow at once
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2.0, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = _bound_port(site) or self.port
        if self.tls is not None:
            secure = web.TCPSite(self._runner, self.host, 0, ssl_context=server_context(self.tls), backlog=1024)
            await secure.start()
            self.tls_port = _bound_port(secure)
            log.info("twin API server also listening on %s (TLS, bearer token)", self.tls_url)
        log.info("twin API server listening on %s", self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _bound_port(site: web.TCPSite) -> int:
    sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
    return sockets[0].getsockname()[1] if sockets else 0


async def _core(request: web.Request) -> web.StreamResponse:
    target, legacy_watch = resolve("", request.match_info["version"], request.match_info["tail"])
    return await dispatch(request, target, legacy_watch)


async def _grouped(request: web.Request) -> web.StreamResponse:
    mi = request.match_info
    target, legacy_watch = resolve(mi["group"], mi["version"], mi["tail"])
    return await dispatch(request, target, legacy_watch)


@web.middleware
async def _status_errors(request: web.Request, handler) -> web.StreamResponse:
    """Every failure as a Status body with the matching code (and never a traceback to the client); the
    request's warnings as Warning headers."""
    try:
        resp = await handler(request)
        if request.get(WARNINGS) and not resp.prepared:
            for value in request[WARNINGS]:
                resp.headers.add("Warning", value)
        return resp
    except st.ApiError as err:
        return _status_response(err.body(), err.code)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        reason = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status, exc.reason)
        message = ("the server could not find the requested resource" if exc.status == 404
                   else "the server does not allow this method on the requested resource")
        return _status_response(st.status_body(exc.status, reason, message, {}), exc.status)
    except Exception as err:  # noqa: BLE001 — a server bug must still answer like a server
        log.exception("twin API handler failed: %s %s", request.method, request.path_qs)
        return _status_response(st.status_body(500, "InternalError", f"Internal error occurred: {err}"), 500)


@web.middleware
async def _authenticated(request: web.Request, handler) -> web.StreamResponse:
    """Over HTTPS, a service-account bearer token or 401, then RBAC or 403 (the plain listener is the twin's
    own and the admin's: open). Tokens: the one the TLS service-account dir holds, and those of
    service-account token Secrets. The twin's own `/twin/` routes are not part of the simulated API."""
    token = request.app[_TOKEN]
    if token and request.secure:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        user = _user_of(request, given.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise st.ApiError(401, "Unauthorized", "Unauthorized")
        request[USER] = user
        if not request.path.startswith(TWIN_PREFIX):
            attrs = request_attributes(request)
            reason = rbac.decide(request.app[STORE], user, attrs)
            request[AUTHORIZATION] = {"authorization.k8s.io/decision": "allow" if reason else "forbid",
                                        "authorization.k8s.io/reason": reason or ""}
            request[ATTRIBUTES] = attrs
            if reason is None:
                raise rbac.forbidden(user, attrs)
    return await handler(request)


def _user_of(request: web.Request, given: str) -> rbac.User | None:
    token = request.app[_TOKEN]
    if hmac.compare_digest(given.encode(), token.encode()):
        return rbac.service_account_user(SERVICE_ACCOUNT_NAMESPACE, SERVICE_ACCOUNT_NAME)
    store: Store = request.app[STORE]
    for secret in store.list(_SECRETS)[0]:
        if secret.get("type") != "kubernetes.io/service-account-token":
            continue
        stored = ((secret.get("data") or {}).get("token") or "")
        try:
            stored = base64.b64decode(stored).decode()
        except ValueError:
            continue
        if stored and hmac.compare_digest(given.encode(), stored.encode()):
            meta = secret["metadata"]
            return rbac.service_account_user(meta["namespace"], (meta.get("annotations") or {}).get(
                "kubernetes.io/service-account.name", ""))
    return None


def request_attributes(request: web.Request) -> rbac.Attributes:
    """What RBAC judges: the verb and resource of an API path, or the path of a non-resource request."""
    parts = [p for p in request.path.split("/") if p]
    resource_path = (len(parts) >= 3 and parts[0] == "api") or (len(parts) >= 4 and parts[0] == "apis")
    if not resource_path:
        return rbac.Attributes(verb=request.method.lower().replace("head", "get"), path=request.path)
    group, version, tail = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
    try:
        target, legacy_watch = resolve(group, version, "/".join(tail))
        resource, sub, namespace, name = target.rt.plural, target.sub, target.namespace, target.name
    except st.ApiError:  # not a stored kind (metrics.k8s.io, or unknown: authorized before the 404, as kube does)
        legacy_watch, resource, sub, namespace, name = _parse_path(tail)
    method = request.method
    if method in ("GET", "HEAD"):
        if legacy_watch or request.query.get("watch") in ("1", "true", "True"):
            verb = "watch"
        else:
            verb = "get" if name else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERB_BY_METHOD.get(method, method.lower())
    return rbac.Attributes(verb=verb, api_group=group, resource=resource, subresource=sub or "",
                           namespace=namespace or "", name=name or "")


def _parse_path(parts: list[str]) -> tuple[bool, str, str | None, str | None, str | None]:
    """(watch, resource, subresource, namespace, name) of `[watch/][namespaces/{ns}/]{plural}[/{name}[/{sub}]]`,
    whatever the resource (kube's RequestInfoFactory)."""
    watch = bool(parts) and parts[0] == "watch"
    parts = parts[1:] if watch else parts
    namespace = None
    if len(parts) > 2 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    return (watch, parts[0] if parts else "", parts[2] if len(parts) > 2 else None, namespace,
            parts[1] if len(parts) > 1 else None)


@web.middleware
async def _audited(request: web.Request, handler) -> web.StreamResponse:
    audit: AuditLog | None = request.app[AUDIT]
    if audit is None:
        return await handler(request)
    if request.path.startswith(TWIN_PREFIX):
        if request.method not in MUTATING_METHODS:
            return await handler(request)
        return await _twin_audited(request, handler, audit)
    by_token = request.secure and bool(request.app[_TOKEN])  # the service-account listener: reads too
    if not by_token and (request.method not in MUTATING_METHODS or not request.path.startswith("/api")):
        return await handler(request)
    code = 500
    try:
        resp = await handler(request)
        code = resp.status
        return resp
    except st.ApiError as err:
        code = err.code
        raise
    except web.HTTPException as exc:
        code = exc.status
        raise
    except asyncio.CancelledError:  # the client hung up: a watch or log follow ends so
        code = request.get(STARTED, 499)
        raise
    finally:
        _record(audit, request, code)


def _record(audit: AuditLog, request: web.Request, code: int) -> None:
    target = request.get(TARGET)
    attrs: rbac.Attributes | None = request.get(ATTRIBUTES)
    verb = request.get(VERB) or (attrs.verb if attrs else _VERB_BY_METHOD.get(request.method,
                                                                                   request.method.lower()))
    user: rbac.User | None = request.get(USER)
    if target is not None:
        where = {"group": target.rt.group, "resource": target.rt.plural, "subresource": target.sub,
                 "namespace": target.namespace, "name": target.name or request.get(OBJECT_NAME)}
    elif attrs is not None and attrs.resource_request:
        where = {"group": attrs.api_group, "resource": attrs.resource, "subresource": attrs.subresource,
                 "namespace": attrs.namespace, "name": attrs.name}
    else:
        where = {"group": "", "resource": request.path, "subresource": None, "namespace": None,
                 "name": request.get(OBJECT_NAME)}
    audit.record(verb=verb, **where, user_agent=request.headers.get("User-Agent", ""), code=code,
                 dry_run=bool(request.query.getall("dryRun", [])), method=request.method, path=request.path,
                 user={"username": user.name, "groups": list(user.groups)} if user else None,
                 annotations=request.get(AUTHORIZATION))


async def _twin_audited(request: web.Request, handler, audit: AuditLog) -> web.StreamResponse:
    """The twin's own writes (fault endpoints, bulk load), recorded under the twin's group (see audit.py)."""
    target = twin_target(request.path)
    if target is None:
        return await handler(request)
    code = 500
    try:
        resp = await handler(request)
        code = resp.status
        return resp
    except (st.ApiError, web.HTTPException) as err:
        code = err.code if isinstance(err, st.ApiError) else err.status
        raise
    finally:
        audit.record(verb=_VERB_BY_METHOD.get(request.method, request.method.lower()), group=TWIN_GROUP, **target,
                     user_agent=request.headers.get("User-Agent", ""), code=code,
                     dry_run=bool(request.query.getall("dryRun", [])), method=request.method, path=request.path)


def _status_response(body: dict, code: int) -> web.Response:
    return web.Response(body=st.encode(body), status=code, content_type="application/json")


async def _on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    request[STARTED] = response.status
    # The server's clock is the cluster's: `Date` in cluster time, as a real API server's is its own clock (a
    # client narrows the stamp of its write with it: drills/core/stamp.py); aiohttp would send the wall clock.
    response.headers[hdrs.DATE] = formatdate(request.app[STORE].clock.timestamp(), usegmt=True)


async def _on_shutdown(app: web.Application) -> None:
    watch.close_all(app)
    app[STORE].logs.close_all()
