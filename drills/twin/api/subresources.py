"""Subresources: status, pods/log, pods/exec (remotecommand.py), pods/portforward (portforward.py),
pods/eviction, pods/binding, {deployments,replicasets}/scale."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from aiohttp import web

from drills.core.clock import parse_iso
from drills.twin.api import status as st
from drills.twin.api.disruption import check_eviction
from drills.twin.api.handlers import Target, grace_seconds, is_dry_run, json_response, patch_object, read_body
from drills.twin.api.keys import VERB
from drills.twin.api.logs import LogLine
from drills.twin.api.patch import PatchError, apply_patch
from drills.twin.api.portforward import portforward_pod
from drills.twin.api.remotecommand import exec_pod
from drills.twin.api.store import Store

__all__ = ["dispatch", "log_container"]

log = logging.getLogger(__name__)

_TRUE = ("1", "true", "True")


async def dispatch(request: web.Request, store: Store, target: Target) -> web.StreamResponse:
    method, sub = request.method, target.sub
    handler = _ROUTES.get((sub, method))
    if handler is None:
        raise st.method_not_allowed(f"the server does not allow this method on the requested resource "
                                    f"({method} {target.verb_noun})")
    return await handler(request, store, target)


def log_container(pod: dict, container: str | None) -> str:
    """The container a log request means: the named one, or the only one; 400 like the real kubelet otherwise."""
    spec = pod.get("spec") or {}
    names = [c["name"] for c in (spec.get("containers") or [])]
    init = [c["name"] for c in (spec.get("initContainers") or [])]
    pod_name = pod["metadata"]["name"]
    if container:
        if container not in names and container not in init:
            raise st.bad_request(f"container {container} is not valid for pod {pod_name}")
        return container
    if len(names) == 1:
        return names[0]
    default = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if default in names:
        return default
    raise st.bad_request(f"a container name must be specified for pod {pod_name}, choose one of: "
                         f"[{' '.join(names)}]" + (f" or one of the init containers: [{' '.join(init)}]" if init else ""))


# -- status ------------------------------------------------------------------------------------------------
async def _get_status(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "get"
    return web.Response(body=store.get_entry(target.rt, target.namespace, target.name).raw,
                        content_type="application/json")


async def _put_status(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "update"
    obj = await read_body(request, target.rt)
    out = store.replace(target.rt, target.namespace, target.name, obj, subresource="status",
                        dry_run=is_dry_run(request))
    return json_response(out)


async def _patch_status(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "patch"
    return json_response(await patch_object(request, store, target, sub="status"))


async def _put_finalize(request: web.Request, store: Store, target: Target) -> web.Response:
    """PUT namespaces/{name}/finalize: the namespace controller clears spec.finalizers once the namespace is empty."""
    request[VERB] = "update"
    obj = await read_body(request, target.rt)
    return json_response(store.replace(target.rt, target.namespace, target.name, obj, subresource="finalize",
                                       dry_run=is_dry_run(request)))


# -- scale -------------------------------------------------------------------------------------------------
def _scale(obj: dict) -> dict:
    meta = obj["metadata"]
    selector = (obj.get("spec") or {}).get("selector") or {}
    selector = selector.get("matchLabels") or {} if obj.get("kind") != "ReplicationController" else selector
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                   "selector": ",".join(f"{k}={v}" for k, v in selector.items())},
    }


async def _get_scale(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "get"
    return json_response(_scale(store.get(target.rt, target.namespace, target.name)))


async def _put_scale(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "update"
    body = await read_body(request, None, kind="Scale")
    return json_response(_set_replicas(request, store, target, body))


async def _patch_scale(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "patch"
    raw = await request.read()
    try:
        patch = json.loads(raw)
        scale = apply_patch(_scale(store.get(target.rt, target.namespace, target.name)), patch,
                            request.content_type, "Scale")
    except (ValueError, PatchError) as err:
        raise st.bad_request(f"error decoding patch: {err}") from None
    return json_response(_set_replicas(request, store, target, scale))


def _set_replicas(request: web.Request, store: Store, target: Target, scale: dict) -> dict:
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise st.invalid("Scale", target.name or "", [("spec.replicas", f"Invalid value: {replicas}: must be "
                                                        "greater than or equal to 0")], "autoscaling")
    rv = (scale.get("metadata") or {}).get("resourceVersion")

    def change(obj: dict) -> dict:
        if rv and rv != obj["metadata"]["resourceVersion"]:
            raise st.conflict(target.rt.plural, target.name or "", target.rt.group)
        obj.setdefault("spec", {})["replicas"] = replicas
        return obj

    return _scale(store.update(target.rt, target.namespace, target.name, change, dry_run=is_dry_run(request)))


# -- pods/binding and pods/eviction ------------------------------------------------------------------------
async def _binding(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "create"
    body = await read_body(request, None, kind="Binding")
    node = (body.get("target") or {}).get("name")
    if not node:
        raise st.invalid("Binding", target.name or "", [("target.name", "Required value")])
    now = store.now_iso()

    def bind(pod: dict) -> dict:
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise st.conflict("pods/binding", target.name or "", "",
                              f'pod {target.name} is already assigned to node "{current}"')
        pod["spec"]["nodeName"] = node
        conds = [c for c in (pod.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
        conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
        pod["status"]["conditions"] = conds
        return pod

    store.update(target.rt, target.namespace, target.name, bind, subresource="binding", dry_run=is_dry_run(request))
    return json_response(st.success(201), status=201)


async def _eviction(request: web.Request, store: Store, target: Target) -> web.Response:
    request[VERB] = "create"
    body = await read_body(request, None, kind="Eviction")
    meta = body.get("metadata") or {}
    if meta.get("name") not in (None, target.name):
        raise st.bad_request("name in URL does not match name in Eviction object")
    pod = store.get(target.rt, target.namespace, target.name)
    check_eviction(store, pod)
    opts = body.get("deleteOptions") or {}
    store.delete(target.rt, target.namespace, target.name, dry_run=is_dry_run(request) or bool(opts.get("dryRun")),
                 preconditions=opts.get("preconditions"), grace_seconds=grace_seconds(request, opts))
    return json_response(st.success(201), status=201)


# -- pods/log ----------------------------------------------------------------------------------------------
async def _log(request: web.Request, store: Store, target: Target) -> web.StreamResponse:
    request[VERB] = "get"
    q = request.query
    pod = store.get(target.rt, target.namespace, target.name)
    container = log_container(pod, q.get("container"))
    previous = q.get("previous") in _TRUE
    lines = store.logs.read(target.namespace or "", target.name or "", container, previous=previous)
    if previous and not lines:
        raise st.bad_request(f'previous terminated container "{container}" in pod "{target.name}" not found')
    since = _since(q, store)
    if since is not None:
        lines = [ln for ln in lines if ln.ts >= since]
    if q.get("tailLines"):
        tail = _int(q["tailLines"], "tailLines")
        lines = lines[-tail:] if tail > 0 else []
    stamps = q.get("timestamps") in _TRUE
    limit = _int(q["limitBytes"], "limitBytes") if q.get("limitBytes") else None
    text = b"".join(_fmt(ln, stamps) for ln in lines)
    if limit is not None:
        text = text[:limit]
    if q.get("follow") not in _TRUE or previous:
        return web.Response(body=text, content_type="text/plain")
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    await resp.write(text)
    try:
        async for line in store.logs.follow(target.namespace or "", target.name or "", container):
            if request.transport is None or request.transport.is_closing():
                break
            await resp.write(_fmt(line, stamps))
    except ConnectionResetError:
        pass
    try:
        await resp.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass
    return resp


async def _exec(request: web.Request, store: Store, target: Target) -> web.StreamResponse:
    pod = store.get(target.rt, target.namespace, target.name)
    return await exec_pod(request, store, target, log_container(pod, request.query.get("container")))


def _fmt(line: LogLine, stamps: bool) -> bytes:
    if not stamps:
        return line.text.encode() + b"\n"
    moment = datetime.fromtimestamp(line.ts, timezone.utc)
    return (moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z " + line.text + "\n").encode()


def _since(q, store: Store) -> float | None:
    if q.get("sinceSeconds"):
        return store.clock.timestamp() - _int(q["sinceSeconds"], "sinceSeconds")
    if q.get("sinceTime"):
        try:
            return parse_iso(q["sinceTime"]).timestamp()
        except ValueError:
            raise st.bad_request(f'invalid sinceTime "{q["sinceTime"]}"') from None
    return None


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise st.bad_request(f'invalid {name} "{value}"') from None


_ROUTES = {
    ("status", "GET"): _get_status,
    ("status", "PUT"): _put_status,
    ("status", "PATCH"): _patch_status,
    ("finalize", "PUT"): _put_finalize,
    ("scale", "GET"): _get_scale,
    ("scale", "PUT"): _put_scale,
    ("scale", "PATCH"): _patch_scale,
    ("binding", "POST"): _binding,
    ("eviction", "POST"): _eviction,
    ("log", "GET"): _log,
    ("exec", "GET"): _exec,
    ("exec", "POST"): _exec,
    ("portforward", "GET"): portforward_pod,
    ("portforward", "POST"): portforward_pod,
}
