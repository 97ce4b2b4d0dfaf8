"""OpenAPI v3 documents (`/openapi/v3` and one per group version), so `kubectl explain` works on the twin.

Generated, not written: from the official Python client's models, which are generated from the real
server's OpenAPI document — each model's fields (`openapi_types`, `attribute_map`), whether a field is
required, and the descriptions the client keeps (the kind's, and scalar fields'; the client drops the
description of a field that refers to another model, so `explain` shows those without one). Schemas
are named like the real ones' last segment (`io.k8s.api.core.v1.PodSpec` → `PodSpec`, what kubectl
prints as a field's type). A kind's document also lists its PATCH operations with the query parameters
the twin honours (`fieldValidation`, `dryRun`, `fieldManager`, `force`), which kubectl reads to decide
it may leave validation to the server. Kinds the client has no model for (Volcano's, metrics) are not
described, as a CRD without a schema. Built on first request (importing the client takes a second) in a
worker thread, then kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re

from aiohttp import web

from drills.twin.api import status as st
from drills.twin.api.resources import RESOURCES, ResourceType
from drills.twin.api.schema_build import _candidates

__all__ = ["routes"]

_SCALARS = {"str": {"type": "string"}, "int": {"type": "integer", "format": "int64"},
            "float": {"type": "number", "format": "double"}, "bool": {"type": "boolean"},
            "datetime": {"type": "string", "format": "date-time"}, "date": {"type": "string", "format": "date"},
            "bytes": {"type": "string", "format": "byte"}, "object": {"type": "object"}}
_PATCH_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")
_DOCS: dict[str, bytes] = {}  # "api/v1" → its document
_LOCK = asyncio.Lock()


def routes() -> list[web.RouteDef]:
    return [web.get("/openapi/v3", _root), web.get("/openapi/v3/{gv:.+}", _group_version)]


async def _root(request: web.Request) -> web.Response:
    docs = await _documents()
    return web.json_response({"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={_hash(doc)}"}
                                        for gv, doc in docs.items()}})


async def _group_version(request: web.Request) -> web.Response:
    doc = (await _documents()).get(request.match_info["gv"])
    if doc is None:
        raise st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
    return web.Response(body=doc, content_type="application/json",
                        headers={"Etag": f'"{_hash(doc)}"', "Cache-Control": "public, immutable"})


async def _documents() -> dict[str, bytes]:
    async with _LOCK:
        if not _DOCS:
            _DOCS.update(await asyncio.to_thread(build))
    return _DOCS


def build() -> dict[str, bytes]:
    """Every served group version's OpenAPI v3 document, as JSON bytes."""
    from kubernetes.client import models

    by_gv: dict[str, dict] = {}
    for rt in RESOURCES:
        model = next((c for c in _candidates(rt.group, rt.version, rt.kind) if hasattr(models, c)), None)
        gv = f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"
        doc = by_gv.setdefault(gv, {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
                                    "paths": {}, "components": {"schemas": {}}})
        if model is None:
            continue
        schemas = doc["components"]["schemas"]
        name = _visit(models, model, schemas)
        gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
        schemas[name]["x-kubernetes-group-version-kind"] = [gvk]
        doc["paths"][_item_path(rt)] = {"patch": {
            "operationId": f"patch{rt.kind}", "x-kubernetes-group-version-kind": gvk,
            "parameters": [{"name": p, "in": "query", "schema": {"type": "string"}} for p in _PATCH_PARAMS]}}
    return {gv: json.dumps(doc, separators=(",", ":")).encode() for gv, doc in by_gv.items() if doc["paths"]}


def _visit(models, model: str, schemas: dict) -> str:
    """Add `model` (and every model it refers to) to `schemas`; its schema name."""
    name = _schema_name(model)
    if name in schemas:
        return name
    cls = getattr(models, model)
    schema: dict = {"type": "object", "properties": {}}
    schemas[name] = schema
    description = _description(cls.__doc__ or "")
    if description:
        schema["description"] = description
    fields = getattr(cls, "model_fields", {})
    required = []
    for attr, typ in cls.openapi_types.items():
        json_name = cls.attribute_map[attr]
        prop = _type(models, typ, schemas)
        info = fields.get(attr)
        if info is not None and info.description:
            prop = dict(prop, description=info.description)
        if info is not None and info.is_required():
            required.append(json_name)
        schema["properties"][json_name] = prop
    if required:
        schema["required"] = required
    return name


def _type(models, typ: str, schemas: dict) -> dict:
    if m := re.fullmatch(r"List\[(.+)\]", typ):
        return {"type": "array", "items": _type(models, m[1], schemas)}
    if m := re.fullmatch(r"Dict\[str, (.+)\]", typ):
        return {"type": "object", "additionalProperties": _type(models, m[1], schemas)}
    if typ in _SCALARS:
        return dict(_SCALARS[typ])
    return {"allOf": [{"$ref": f"#/components/schemas/{_visit(models, typ, schemas)}"}], "default": {}}


def _schema_name(model: str) -> str:
    """`V1PodSpec` → `io.k8s.api.core.v1.PodSpec`-like: a package from the model's version prefix, then
    the type's own name (the segment kubectl shows)."""
    m = re.fullmatch(r"(Core|Events|Storage|Discovery|Authentication|Rbac)?(V\d+(?:alpha\d+|beta\d+)?)(.+)", model)
    if not m:
        return f"io.k8s.twin.{model}"
    return f"io.k8s.twin.{m[2].lower()}.{m[3]}"


def _description(doc: str) -> str:
    """The first paragraph of a generated model's docstring (the kind's own description)."""
    text = doc.strip().split("\n\n", 1)[0]
    return "" if text.startswith("NOTE: This class is auto generated") else " ".join(text.split())


def _item_path(rt: ResourceType) -> str:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    return f"{base}{scope}/{rt.plural}/{{name}}"


def _hash(doc: bytes) -> str:
    return hashlib.sha512(doc).hexdigest()[:128].upper()
