"""REST verbs on resources: path → Target, then list/get/create/replace/patch/delete(collection).

Subresources live in subresources.py and watch in watch.py; this module dispatches to them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import yaml
from aiohttp import web

from drills.twin.api import managed, partial, protobuf, schema, status as st
from drills.twin.api.keys import CREATED, OBJECT_NAME, OPEN_WATCHES, STORE, TARGET, USER, VERB, WARNINGS
from drills.twin.api.patch import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, PatchError, apply_patch
from drills.twin.api.resources import ResourceType, by_path
from drills.twin.api.selection import Selection, from_query
from drills.twin.api.selectors import SelectorError
from drills.twin.api.store import Entry, Store
from drills.twin.api.tables import table_body, wants_table

__all__ = ["Target", "resolve", "dispatch", "json_response", "read_body", "is_dry_run", "selection_of",
           "grace_seconds", "check_fields", "PATCH_TYPES", "OPEN_WATCHES", "WARNINGS"]

log = logging.getLogger(__name__)

PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
_TRUE = ("1", "true", "True")


@dataclass(frozen=True)
class Target:
    """What a request addresses: a resource type, optionally one namespace, one object, one subresource."""

    rt: ResourceType
    namespace: str | None = None
    name: str | None = None
    sub: str | None = None

    @property
    def verb_noun(self) -> str:
        return f"{self.rt.plural}/{self.sub}" if self.sub else self.rt.plural


def resolve(group: str, version: str, tail: str) -> tuple[Target, bool]:
    """Parse `[watch/][namespaces/{ns}/]{plural}[/{name}[/{sub}]]` → (Target, legacy watch path); 404 otherwise."""
    parts = [p for p in tail.split("/") if p]
    legacy_watch = bool(parts) and parts[0] == "watch"
    if legacy_watch:
        parts = parts[1:]
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces" and by_path(group, version, parts[2]) is not None:
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise _unknown()
    rt = by_path(group, version, parts[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise _unknown()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    if sub is not None and sub not in rt.subresources:
        raise _unknown()
    return Target(rt, namespace, name, sub), legacy_watch


async def dispatch(request: web.Request, target: Target, legacy_watch: bool = False) -> web.StreamResponse:
    """Route one resource request to its verb."""
    from drills.twin.api import subresources, watch  # cycle: they use this module's helpers

    store: Store = request.app[STORE]
    method = request.method
    request[TARGET] = target
    if target.sub:
        return await subresources.dispatch(request, store, target)
    if target.rt.group == "authorization.k8s.io":
        if method != "POST" or target.name is not None:
            raise st.method_not_allowed("the server does not allow this method on the requested resource")
        request[VERB] = "create"
        return json_response(access_review(request, store, await read_body(request, target.rt)), status=201)
    if method == "GET":
        if legacy_watch or request.query.get("watch") in _TRUE:
            request[VERB] = "watch"
            return await _watch(request, store, target, watch.serve)
        if target.name is None:
            request[VERB] = "list"
            return _list(request, store, target)
        request[VERB] = "get"
        return _render(request, store, target.rt, store.get_entry(target.rt, target.namespace, target.name))
    if method == "POST" and target.name is None:
        request[VERB] = "create"
        return await _create(request, store, target)
    if method == "PUT" and target.name is not None:
        request[VERB] = "update"
        obj = await read_body(request, target.rt)
        check_fields(request, target.rt, obj)
        out = store.replace(target.rt, target.namespace, target.name, obj, dry_run=is_dry_run(request))
        return json_response(out)
    if method == "PATCH" and target.name is not None:
        request[VERB] = "patch"
        out = await patch_object(request, store, target)
        return json_response(out, status=201 if request.get(CREATED) else 200)
    if method == "DELETE":
        if target.name is None:
            request[VERB] = "deletecollection"
            return await _delete_collection(request, store, target)
        request[VERB] = "delete"
        return json_response(await delete_object(request, store, target))
    raise st.method_not_allowed("the server does not allow this method on the requested resource")


# -- helpers shared with subresources and watch -------------------------------------------------------
def json_response(obj: dict, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(obj, separators=(",", ":")).encode(), status=status,
                        content_type="application/json")


def is_dry_run(request: web.Request) -> bool:
    return bool(request.query.getall("dryRun", []))


async def read_body(request: web.Request, rt: ResourceType | None, *, kind: str | None = None) -> dict:
    """Decode a JSON (or YAML) body and check its kind/apiVersion against the resource, as the real decoder does."""
    raw = await request.read()
    expected_kind = kind or (rt.kind if rt else "")
    ctype = request.content_type or ""
    if "protobuf" in ctype:
        try:
            obj = protobuf.decode(raw)
        except protobuf.ProtobufError as err:
            raise st.ApiError(415, "UnsupportedMediaType", str(err)) from None
        ctype, raw = "application/json", json.dumps(obj).encode()
    if "cbor" in ctype:
        raise st.ApiError(415, "UnsupportedMediaType", f"the twin's API server accepts JSON, YAML or protobuf bodies, "
                          f"not {ctype}")
    try:
        if "yaml" in ctype:
            obj = yaml.safe_load(raw)
        else:
            obj = json.loads(raw) if raw else None
    except (ValueError, yaml.YAMLError) as err:
        raise st.bad_request(f"the object provided is unrecognized (must be of type {expected_kind}): "
                             f"couldn't get version/kind; json parse error: {err}") from None
    if not isinstance(obj, dict):
        raise st.bad_request(f"the object provided is unrecognized (must be of type {expected_kind}): "
                             f"the body is not a JSON object")
    if rt is not None and kind is None:
        body_kind, body_av = obj.get("kind"), obj.get("apiVersion")
        if (body_kind and body_kind != rt.kind) or (body_av and body_av != rt.api_version):
            got_kind, got_av = body_kind or rt.kind, body_av or rt.api_version
            raise st.bad_request(
                f'{got_kind} in version "{got_av.split("/")[-1]}" cannot be handled as a {rt.kind}: '
                f'the object provided is a {got_av}, Kind={got_kind} but the {rt.plural} resource expects '
                f'{rt.api_version}, Kind={rt.kind}')
    return obj


def check_fields(request: web.Request, rt: ResourceType, body, *, patch: bool = False) -> None:
    """`fieldValidation`: unknown fields are a 400 (Strict), a Warning header each (Warn, the default) or nothing
    (Ignore); outside Strict they are dropped from `body`, as the real decoder drops them."""
    mode = request.query.get("fieldValidation") or schema.DEFAULT_MODE
    if mode not in schema.MODES:
        raise st.bad_request(f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Warn", '
                             f'"Strict"')
    unknown = schema.unknown_fields(rt, body, drop=mode != "Strict", patch=patch)
    if unknown and mode == "Strict":
        raise schema.strict_error(rt, unknown)
    if unknown and mode == "Warn":
        request.setdefault(WARNINGS, []).extend(schema.warning_header(path) for path in unknown)


def selection_of(request: web.Request, rt: ResourceType) -> Selection:
    """labelSelector and fieldSelector of the query (400 when either does not parse)."""
    try:
        return from_query(request.query.get("labelSelector"), request.query.get("fieldSelector"), rt)
    except SelectorError as err:
        raise st.bad_request(f"unable to parse requested label/field selector: {err}") from None


async def patch_object(request: web.Request, store: Store, target: Target, sub: str | None = None) -> dict:
    """Apply a PATCH of any of the four types to the stored object (server-side apply creates when missing)."""
    ctype = (request.content_type or "").lower()
    if ctype not in PATCH_TYPES:
        raise st.unsupported_media_type(ctype)
    raw = await request.read()
    try:
        body = yaml.safe_load(raw) if ctype == APPLY_PATCH else json.loads(raw)
    except (ValueError, yaml.YAMLError) as err:
        raise st.bad_request(f"error decoding patch: {err}") from None
    rt = target.rt
    if ctype == JSON_PATCH:
        body = _json_patch_operations(body)
    else:
        check_fields(request, rt, body, patch=ctype != APPLY_PATCH)
    if ctype == APPLY_PATCH:
        if not isinstance(body, dict):
            raise st.bad_request("error decoding patch: apply patch must be an object")
        managed.check_apply(body, request.query.get("fieldManager", ""))
    if ctype == APPLY_PATCH and store.find(rt, target.namespace, target.name) is None and sub is None:
        body.setdefault("metadata", {})["name"] = target.name
        request[CREATED] = True
        created = managed.applied(dict(body, apiVersion=rt.api_version, kind=rt.kind), body,
                                  request.query["fieldManager"], store.now_iso())
        return store.create(rt, created, target.namespace, dry_run=is_dry_run(request))

    def change(current: dict) -> dict:
        try:
            new = apply_patch(current, body, ctype, rt.kind, owned=True)  # Store.update decoded a private copy
        except PatchError as err:
            raise st.ApiError(422, "Invalid", f'{rt.kind} "{target.name}" is invalid: {err}') from None
        if ctype == APPLY_PATCH:
            new = managed.applied(new, body, request.query["fieldManager"], store.now_iso(), sub)
        return new

    return store.update(rt, target.namespace, target.name, change, subresource=sub, dry_run=is_dry_run(request))


async def delete_object(request: web.Request, store: Store, target: Target) -> dict:
    opts = await _delete_options(request)
    return store.delete(target.rt, target.namespace, target.name, dry_run=is_dry_run(request) or bool(opts.get("dryRun")),
                        preconditions=opts.get("preconditions"),
                        propagation=opts.get("propagationPolicy") or request.query.get("propagationPolicy"),
                        grace_seconds=grace_seconds(request, opts))


def grace_seconds(request: web.Request, opts: dict) -> int | None:
    """gracePeriodSeconds from DeleteOptions or the query (None: the pod's own)."""
    value = opts.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        raise st.bad_request(f'invalid gracePeriodSeconds "{value}"') from None


def list_body(rt: ResourceType, entries: list[Entry], rv: str, list_meta: dict | None = None) -> bytes:
    """A <Kind>List assembled from each entry's cached JSON (no re-encoding of unchanged objects)."""
    head = json.dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                       "metadata": list_meta or {"resourceVersion": rv}}, separators=(",", ":")).encode()
    items = b",".join([e.raw for e in entries])  # two joins: a list's megabytes copied twice, not four times
    return b"".join((head[:-1], b',"items":[', items, b"]}"))


def access_review(request: web.Request, store: Store, review: dict) -> dict:
    """A (Self)SubjectAccessReview answered by the RBAC authorizer; the admin listener's user may do anything."""
    from drills.twin.api import rbac

    spec = review.get("spec") or {}
    if review.get("kind") == "SubjectAccessReview":
        user = rbac.User(spec.get("user") or "", tuple(spec.get("groups") or ()))
    else:
        user = request.get(USER)
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if ra:
        attrs = rbac.Attributes(verb=ra.get("verb", ""), api_group=ra.get("group", ""), resource=ra.get("resource", ""),
                                subresource=ra.get("subresource", ""), namespace=ra.get("namespace", ""),
                                name=ra.get("name", ""))
    elif nra:
        attrs = rbac.Attributes(verb=nra.get("verb", ""), path=nra.get("path", ""))
    else:
        raise st.invalid(review.get("kind", "SelfSubjectAccessReview"), "", [
            ("spec.resourceAttributes", "Invalid value: exactly one of nonResourceAttributes or resourceAttributes "
                                        "must be specified")], "authorization.k8s.io")
    allowed = user is None or rbac.authorize(store, user, attrs)
    status = {"allowed": allowed}
    if allowed:
        status["reason"] = "the twin's admin listener" if user is None else "RBAC: allowed by a binding"
    out = {"apiVersion": "authorization.k8s.io/v1", "kind": review.get("kind") or "SelfSubjectAccessReview",
           "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    return out


# -- verbs ------------------------------------------------------------------------------------------------
def _list(request: web.Request, store: Store, target: Target) -> web.Response:
    query = request.query
    token, rv, match = query.get("continue", ""), query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    if token and rv not in ("", "0"):
        raise st.bad_request("specifying resource version is not allowed when using continue")
    if match and match not in ("Exact", "NotOlderThan"):
        raise st.bad_request(f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", '
                             f'"NotOlderThan"')
    if match and not rv:
        raise st.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    page = store.list_page(target.rt, target.namespace, selection_of(request, target.rt),
                           limit=_int_param(query, "limit"), continue_token=token,
                           exact_rv=_int_param(query, "resourceVersion") if match == "Exact" else None)
    if wants_table(request.headers.get("Accept")):
        return _table_response(request, store, target.rt, page.entries, page.list_meta())
    if (metadata_only := partial.requested(request.headers.get("Accept"))) is not None:
        body = partial.listed(metadata_only, target.rt, [e.obj for e in page.entries], page.list_meta())
        return web.Response(body=partial.encode(body),
                            headers={"Content-Type": partial.media_type(metadata_only)})
    return web.Response(body=list_body(target.rt, page.entries, page.resource_version, page.list_meta()),
                        content_type="application/json")


def _int_param(query, name: str) -> int:
    raw = query.get(name) or "0"
    try:
        return int(raw)
    except ValueError:
        raise st.bad_request(f'invalid {name} "{raw}"') from None


async def _watch(request: web.Request, store: Store, target: Target, serve) -> web.StreamResponse:
    """Serve a watch, listed in the app's open watches while it lasts (a test can tell kubectl's from a controller's)."""
    open_watches: dict | None = request.app.get(OPEN_WATCHES)
    if open_watches is None:
        return await serve(request, store, target)
    token = object()
    open_watches[token] = {
        "resource": target.rt.plural, "group": target.rt.group, "namespace": target.namespace, "name": target.name,
        "labelSelector": request.query.get("labelSelector", ""), "fieldSelector": request.query.get("fieldSelector", ""),
        "userAgent": request.headers.get("User-Agent", ""),
    }
    try:
        return await serve(request, store, target)
    finally:
        open_watches.pop(token, None)


def _render(request: web.Request, store: Store, rt: ResourceType, entry: Entry) -> web.Response:
    if wants_table(request.headers.get("Accept")):
        return _table_response(request, store, rt, [entry],
                               {"resourceVersion": entry.obj["metadata"].get("resourceVersion", "")})
    if (metadata_only := partial.requested(request.headers.get("Accept"))) is not None:
        return web.Response(body=partial.encode(partial.single(metadata_only, rt, entry.obj)),
                            headers={"Content-Type": partial.media_type(metadata_only)})
    return web.Response(body=entry.raw, content_type="application/json")


def _table_response(request: web.Request, store: Store, rt: ResourceType, entries: list[Entry],
                    list_meta: dict) -> web.Response:
    body = table_body(rt, entries, list_meta, now=store.clock.timestamp(),
                      include_object=request.query.get("includeObject", "Metadata"))
    return web.Response(body=body, headers={"Content-Type": "application/json;as=Table;v=v1;g=meta.k8s.io"})


async def _create(request: web.Request, store: Store, target: Target) -> web.Response:
    obj = await read_body(request, target.rt)
    check_fields(request, target.rt, obj)
    request[OBJECT_NAME] = (obj.get("metadata") or {}).get("name") or ""
    out = store.create(target.rt, obj, target.namespace, dry_run=is_dry_run(request))
    request[OBJECT_NAME] = out["metadata"]["name"]
    return json_response(out, status=201)


async def _delete_collection(request: web.Request, store: Store, target: Target) -> web.Response:
    opts = await _delete_options(request)
    dry = is_dry_run(request) or bool(opts.get("dryRun"))
    deleted = []
    for entry in store.list_entries(target.rt, target.namespace, selection_of(request, target.rt)):
        meta = entry.obj["metadata"]
        deleted.append(store.delete(target.rt, meta.get("namespace"), meta["name"], dry_run=dry,
                                    propagation=opts.get("propagationPolicy"), grace_seconds=grace_seconds(request, opts)))
    return json_response({"kind": f"{target.rt.kind}List", "apiVersion": target.rt.api_version,
                          "metadata": {"resourceVersion": store.resource_version}, "items": deleted})


async def _delete_options(request: web.Request) -> dict:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        opts = json.loads(raw)
    except ValueError as err:
        raise st.bad_request(f"the object provided is unrecognized (must be of type DeleteOptions): {err}") from None
    return opts if isinstance(opts, dict) else {}


def _json_patch_operations(body):
    """The real server decodes a JSON patch into `[]Operation` before applying it: an object (what a client
    sends when it means a merge patch) or a list of non-objects is a 400 with the Go decoder's words; null is
    an empty patch."""
    if body is None:
        return []
    if not isinstance(body, list):
        raise st.bad_request(f"json: cannot unmarshal {_go_kind(body)} into Go value of type jsonpatch.Patch")
    for op in body:
        if not isinstance(op, dict) and op is not None:
            raise st.bad_request(f"json: cannot unmarshal {_go_kind(op)} into Go value of type jsonpatch.Operation")
    return body


def _go_kind(value) -> str:
    """The JSON kind as encoding/json names it in an UnmarshalTypeError."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "string"


def _unknown() -> st.ApiError:
    return st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
