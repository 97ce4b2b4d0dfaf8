"""meta.k8s.io PartialObjectMetadata(List): the metadata-only form a client asks for with
`Accept: application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io` (client-go's metadata client, the
python dynamic client's `header_params`). Pure functions.

As the real server's transformObject (apiserver/pkg/endpoints/handlers/response.go): the first Accept clause
naming one of these kinds in meta.k8s.io v1 or v1beta1 is the target; asking for the list form of one
object (or the single form of a list) is 406 NotAcceptable; a list keeps its resourceVersion and continue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from drills.twin.api import status as st
from drills.twin.api.resources import ResourceType

__all__ = ["Target", "requested", "single", "listed", "media_type", "encode"]

_KINDS = ("PartialObjectMetadata", "PartialObjectMetadataList")
_VERSIONS = ("v1", "v1beta1")


@dataclass(frozen=True)
class Target:
    kind: str  # PartialObjectMetadata | PartialObjectMetadataList
    version: str  # v1 | v1beta1

    @property
    def api_version(self) -> str:
        return f"meta.k8s.io/{self.version}"


def requested(accept: str | None) -> Target | None:
    """The PartialObjectMetadata(List) an Accept header asks for (its first such clause), else None."""
    for clause in (accept or "").split(","):
        params = dict(_param(p) for p in clause.split(";")[1:])
        if params.get("as") in _KINDS and params.get("g") == "meta.k8s.io" and params.get("v") in _VERSIONS:
            return Target(params["as"], params["v"])
    return None


def _param(raw: str) -> tuple[str, str]:
    key, _, value = raw.strip().partition("=")
    return key.strip().lower(), value.strip()


def single(target: Target, rt: ResourceType, obj: dict) -> dict:
    """One object's PartialObjectMetadata (406 when the list form was asked for)."""
    if target.kind != "PartialObjectMetadata":
        raise _not_acceptable(f"you requested PartialObjectMetadataList, but the requested object is not a list "
                              f"({_go_type(rt)})")
    return _partial(target, obj)


def listed(target: Target, rt: ResourceType, objs: list[dict], list_meta: dict) -> dict:
    """A list's PartialObjectMetadataList: resourceVersion and continue kept (406 when the single form was asked for)."""
    if target.kind != "PartialObjectMetadataList":
        raise _not_acceptable(f"you requested PartialObjectMetadata, but the requested object is a list "
                              f"({_go_type(rt)}List)")
    meta = {key: list_meta[key] for key in ("resourceVersion", "continue") if list_meta.get(key)}
    return {"kind": "PartialObjectMetadataList", "apiVersion": target.api_version, "metadata": meta,
            "items": [_partial(target, obj) for obj in objs]}


def media_type(target: Target) -> str:
    return f"application/json;as={target.kind};v={target.version};g=meta.k8s.io"


def encode(body: dict) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _partial(target: Target, obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": target.api_version, "metadata": obj.get("metadata", {})}


def _go_type(rt: ResourceType) -> str:
    """The `%T` of the server's internal object in its message: `*core.Pod`, `*apps.Deployment`."""
    package = rt.group.split(".")[0] if rt.group else "core"
    return f"*{package}.{rt.kind}"


def _not_acceptable(message: str) -> st.ApiError:
    return st.ApiError(406, "NotAcceptable", message)
