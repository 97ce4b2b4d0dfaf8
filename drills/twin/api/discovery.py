"""Discovery documents (/version, /api, /apis, …) generated from the resource registry.

Legacy discovery only: kubectl 1.32 asks for aggregated discovery first and falls back when the
answer's Content-Type is plain `application/json`, which is what these handlers send.
"""

from __future__ import annotations

import hashlib
import logging

from aiohttp import web

from drills.twin.api import metrics, openapi, status as st
from drills.twin.api.resources import RESOURCES, ResourceType, groups

__all__ = ["routes", "version_info", "resource_list", "SUBRESOURCE_KINDS"]

log = logging.getLogger(__name__)

GIT_VERSION = "v1.32.4-twin"


def _pb_string(field_no: int, text: str) -> bytes:
    data = text.encode()
    return bytes([field_no << 3 | 2, len(data)]) + data


# openapi_v2.Document{swagger: "2.0", info: {title: "Kubernetes", version: GIT_VERSION}}
_OPENAPI_V2_PB = _pb_string(1, "2.0") + bytes([2 << 3 | 2]) + bytes(
    [len(_pb_string(1, "Kubernetes") + _pb_string(2, GIT_VERSION))]) + _pb_string(1, "Kubernetes") + _pb_string(2, GIT_VERSION)

# subresource → (group, version, kind, verbs); group None means "the parent's"
_SERVED = RESOURCES + metrics.RESOURCES  # stored kinds, and the computed metrics (metrics.py)

SUBRESOURCE_KINDS: dict[str, tuple[str | None, str | None, str | None, tuple[str, ...]]] = {
    "status": (None, None, None, ("get", "patch", "update")),
    "log": ("", "v1", "Pod", ("get",)),
    "exec": ("", "v1", "PodExecOptions", ("create", "get")),
    "portforward": ("", "v1", "PodPortForwardOptions", ("create", "get")),
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "binding": ("", "v1", "Binding", ("create",)),
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
    "finalize": (None, None, None, ("update",)),
}


def version_info() -> dict:
    return {
        "major": "1", "minor": "32", "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2025-04-22T00:00:00Z", "goVersion": "go1.23.8", "compiler": "gc", "platform": "linux/amd64",
    }


def resource_list(group: str, version: str) -> dict | None:
    """The APIResourceList of one group version (None when the twin does not serve it)."""
    rts = [r for r in _SERVED if r.group == group and r.version == version]
    if not rts:
        return None
    resources: list[dict] = []
    for rt in rts:
        resources.append(_resource(rt))
        for sub in rt.subresources:
            resources.append(_subresource(rt, sub))
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def routes() -> list[web.RouteDef]:
    # each document also answers with a trailing slash, as the real server does (go-restful routes
    # "/" under each web service): the Python client asks for `/version/`, `/api/v1/`, `/apis/apps/`…
    documents = [
        ("/version", _version),
        ("/api", _api_versions),
        ("/api/{version}", _core_resources),
        ("/apis", _group_list),
        ("/apis/{group}", _group),
        ("/apis/{group}/{version}", _group_resources),
    ]
    return [
        *(web.get(path + slash, handler) for path, handler in documents for slash in ("", "/")),
        web.get("/openapi/v2", _openapi_v2),
        *openapi.routes(),
        web.get("/healthz", _ok),
        web.get("/readyz", _ok),
        web.get("/livez", _ok),
    ]


def _resource(rt: ResourceType) -> dict:
    doc = {
        "name": rt.plural,
        "singularName": rt.singular_name,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
        "storageVersionHash": hashlib.sha256(f"{rt.api_version}/{rt.kind}".encode()).hexdigest()[:12],
    }
    if rt.short_names:
        doc["shortNames"] = list(rt.short_names)
    if rt.categories:
        doc["categories"] = list(rt.categories)
    return doc


def _subresource(rt: ResourceType, sub: str) -> dict:
    group, version, kind, verbs = SUBRESOURCE_KINDS.get(sub, (None, None, None, ("get",)))
    doc = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
           "kind": kind or rt.kind, "verbs": list(verbs)}
    if group is not None and (group, version) != (rt.group, rt.version):
        doc["group"], doc["version"] = group, version
    return doc


def _group_doc(name: str, versions: list[str]) -> dict:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


async def _version(request: web.Request) -> web.Response:
    return web.json_response(version_info())


async def _api_versions(request: web.Request) -> web.Response:
    host = request.host or "127.0.0.1"
    return web.json_response({"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})


async def _core_resources(request: web.Request) -> web.Response:
    doc = resource_list("", request.match_info["version"])
    if doc is None:
        raise _not_served()
    return web.json_response(doc)


async def _group_list(request: web.Request) -> web.Response:
    docs = [_group_doc(g, vs) for g, vs in _groups().items() if g]
    return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": docs})


async def _group(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    versions = _groups().get(name)
    if not name or not versions:
        raise _not_served()
    return web.json_response(dict(_group_doc(name, versions), kind="APIGroup", apiVersion="v1"))


async def _group_resources(request: web.Request) -> web.Response:
    doc = resource_list(request.match_info["group"], request.match_info["version"])
    if doc is None:
        raise _not_served()
    return web.json_response(doc)


async def _openapi_v2(request: web.Request) -> web.Response:
    """An OpenAPI v2 document with no definitions, in the protobuf kubectl asks for.

    kubectl apply validates client-side against it (no schema for a kind → nothing to check) and
    patches with strategic merge for built-in kinds, JSON merge for the rest, as with real CRDs.
    """
    if "protobuf" in request.headers.get("Accept", ""):
        return web.Response(body=_OPENAPI_V2_PB, content_type="application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    return web.json_response({"swagger": "2.0", "info": {"title": "Kubernetes", "version": GIT_VERSION},
                              "paths": {}, "definitions": {}})


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _groups() -> dict[str, list[str]]:
    """The stored kinds' groups, and the computed metrics.k8s.io."""
    return {**groups(), metrics.GROUP: [metrics.VERSION]}


def _not_served() -> st.ApiError:
    return st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
