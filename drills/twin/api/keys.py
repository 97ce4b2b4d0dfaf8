"""The keys of the API server's shared state: the application's (`web.AppKey`) and each request's
(`web.RequestKey`), typed, so aiohttp checks them. Keys owned by one component live beside it
(`watch.WATCH_QUEUES`, `watchlag.WATCH_LAG`, `twin_routes.HEALTH`, ...); these are the server's own."""

from __future__ import annotations

from typing import Any

from aiohttp import web

__all__ = ["STORE", "AUDIT", "OPEN_WATCHES", "WARNINGS", "VERB", "TARGET", "CREATED", "OBJECT_NAME", "USER", "AUTHORIZATION", "ATTRIBUTES",
           "STARTED"]

# the application's
STORE = web.AppKey("store", Any)  # drills.twin.api.store.Store: the objects served
AUDIT = web.AppKey("audit", Any)  # drills.twin.api.audit.AuditLog | None: the audit log of writes
OPEN_WATCHES = web.AppKey("open_watches", dict)  # {token: what one open watch watches} (GET /twin/v1/stats lists them)

# each request's, written while it is handled and read by the audit middleware
VERB = web.RequestKey("verb", str)  # the Kubernetes verb (get, list, watch, create, patch, ...)
TARGET = web.RequestKey("target", Any)  # the resource the URL names
CREATED = web.RequestKey("created", bool)  # a create (or an apply that created): 201
OBJECT_NAME = web.RequestKey("object_name", str)  # the name of the object a create made
USER = web.RequestKey("user", Any)  # drills.twin.api.rbac.User: who the bearer token says sent it
AUTHORIZATION = web.RequestKey("authorization", dict)  # the audit annotations of the RBAC decision
ATTRIBUTES = web.RequestKey("attributes", Any)  # drills.twin.api.rbac.Attributes: what was authorized
WARNINGS = web.RequestKey("warnings", list)  # the Warning header values the response carries (server.py writes them)
STARTED = web.RequestKey("response_started", int)  # the status a streamed response (watch, log follow) began with
