"""A small asyncio Kubernetes REST client for the twin's own controllers.

Controllers talk to the twin's API server as a real controller would; this is the thin layer that builds
paths, encodes patches and turns failures into ApiError. Given the server's `app` (the twin's own components, in
its process), requests go through that application in-process (drills/twin/api/inprocess.py): the same routing,
audit, admission and store, without the loopback; watches stay on HTTP.
"""

from __future__ import annotations

import json
import logging
from typing import Any, AsyncIterator

import aiohttp

from drills.twin.api.inprocess import call
from drills.twin.api.resources import ResourceType

__all__ = ["ApiError", "TwinClient", "key_of"]

log = logging.getLogger(__name__)

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class ApiError(Exception):
    """A non-2xx answer from the API server, carrying its Status."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


def key_of(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", "") or "", meta["name"]


class TwinClient:
    """REST verbs over one aiohttp session; `user_agent` names the controller in the audit log."""

    def __init__(self, base_url: str, user_agent: str = "twin-controller", app: Any = None):
        self.base_url = base_url.rstrip("/")
        self.user_agent = user_agent
        self.app = app  # the API server's aiohttp application, when this client runs in its process
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"User-Agent": self.user_agent},
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
                connector=aiohttp.TCPConnector(limit=64),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # -- paths -----------------------------------------------------------------------------------
    def path(self, rt: ResourceType, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:
        prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        if rt.namespaced and namespace:
            prefix += f"/namespaces/{namespace}"
        prefix += f"/{rt.plural}"
        if name:
            prefix += f"/{name}"
            if sub:
                prefix += f"/{sub}"
        return prefix

    # -- verbs -----------------------------------------------------------------------------------
    async def list(self, rt: ResourceType, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None) -> tuple[list[dict], str]:
        params = _params(labelSelector=label_selector, fieldSelector=field_selector)
        body = await self._request("GET", self.path(rt, namespace), params=params)
        return body.get("items") or [], body.get("metadata", {}).get("resourceVersion", "")

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict | None:
        try:
            return await self._request("GET", self.path(rt, namespace, name))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def create(self, rt: ResourceType, obj: dict, namespace: str | None = None) -> dict:
        namespace = namespace or obj.get("metadata", {}).get("namespace")
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
        return await self._request("POST", self.path(rt, namespace), json_body=obj)

    async def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Any, *,
                    sub: str | None = None, kind: str = "merge") -> dict | None:
        """Patch an object (or its `sub`resource); None when it no longer exists."""
        try:
            return await self._request("PATCH", self.path(rt, namespace, name, sub), json_body=patch,
                                       content_type=_PATCH_TYPES[kind])
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def delete(self, rt: ResourceType, namespace: str | None, name: str, *,
                     grace_period_s: int | None = None, uid: str | None = None) -> bool:
        """Delete; False when it was already gone. `uid`: only that incarnation (409 if a namesake replaced it)."""
        params = _params(gracePeriodSeconds=grace_period_s)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            await self._request("DELETE", self.path(rt, namespace, name), params=params, json_body=body)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    async def replace(self, rt: ResourceType, namespace: str | None, name: str, obj: dict, *,
                      sub: str | None = None) -> dict:
        """PUT the whole object (or its `sub`resource, e.g. a namespace's `finalize`)."""
        return await self._request("PUT", self.path(rt, namespace, name, sub), json_body=obj)

    async def post(self, path: str, body: Any, *, content_type: str = "application/json") -> Any:
        return await self._request("POST", path, json_body=body, content_type=content_type)

    async def watch(self, rt: ResourceType, resource_version: str, namespace: str | None = None, *,
                    timeout_s: int = 300) -> AsyncIterator[tuple[str, dict]]:
        """Yield (type, object) watch events from `resource_version` until the server ends the stream."""
        params = _params(watch="true", resourceVersion=resource_version, timeoutSeconds=timeout_s,
                         allowWatchBookmarks="true")
        async with self.session.get(self.base_url + self.path(rt, namespace), params=params) as resp:
            if resp.status >= 400:
                raise await _error(resp)
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    event = json.loads(line)
                    yield event.get("type", ""), event.get("object") or {}

    async def _request(self, method: str, path: str, *, params: dict | None = None, json_body: Any = None,
                       content_type: str = "application/json") -> Any:
        data = None if json_body is None else json.dumps(json_body)
        headers = {"Content-Type": content_type} if data is not None else {}
        if self.app is not None:
            status, body = await call(self.app, method, path, query=params,
                                      body=None if data is None else data.encode(),
                                      headers={**headers, "User-Agent": self.user_agent})
            text = body.decode()
            if status >= 400:
                raise _status_error(status, text)
            return json.loads(text) if text else {}
        async with self.session.request(method, self.base_url + path, params=params, data=data,
                                        headers=headers) as resp:
            if resp.status >= 400:
                raise await _error(resp)
            text = await resp.text()
            return json.loads(text) if text else {}


def _params(**kw: Any) -> dict:
    return {k: str(v) for k, v in kw.items() if v is not None}


async def _error(resp: aiohttp.ClientResponse) -> ApiError:
    return _status_error(resp.status, await resp.text(), resp.reason or "")


def _status_error(code: int, text: str, reason: str = "") -> ApiError:
    try:
        status = json.loads(text)
        return ApiError(code, status.get("reason", ""), status.get("message", text))
    except (ValueError, AttributeError):
        return ApiError(code, reason, text)
