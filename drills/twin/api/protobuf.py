"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the few kinds kubectl
sends that way and the twin decodes: what `kubectl create namespace|configmap|secret generic|
serviceaccount` and `kubectl auth can-i` post.

The wire format is plain protobuf behind the `k8s\\0` magic and a `runtime.Unknown` envelope
(k8s.io/apimachinery/pkg/runtime/generated.proto); field numbers below are those of the k8s.io/api
generated.proto files. A kind without a schema here stays a 415 with a message naming the way round it.
No protobuf library is needed: the wire format is five lines of varint arithmetic.
"""

from __future__ import annotations

import base64

__all__ = ["decode", "ProtobufError", "SUPPORTED"]

MAGIC = b"k8s\x00"

# message name → {field number: (json name, kind, sub-message or None, repeated)}
_S, _B, _I, _M, _MAP, _MAPB = "string", "bytes", "varint", "message", "map", "mapbytes"
_SCHEMAS: dict[str, dict[int, tuple]] = {
    "TypeMeta": {1: ("apiVersion", _S, None, False), 2: ("kind", _S, None, False)},
    "Unknown": {1: ("typeMeta", _M, "TypeMeta", False), 2: ("raw", _B, None, False),
                3: ("contentEncoding", _S, None, False), 4: ("contentType", _S, None, False)},
    "ObjectMeta": {1: ("name", _S, None, False), 2: ("generateName", _S, None, False), 3: ("namespace", _S, None, False),
                   5: ("uid", _S, None, False), 6: ("resourceVersion", _S, None, False),
                   11: ("labels", _MAP, None, False), 12: ("annotations", _MAP, None, False),
                   14: ("finalizers", _S, None, True)},
    "Namespace": {1: ("metadata", _M, "ObjectMeta", False), 2: ("spec", _M, "NamespaceSpec", False)},
    "NamespaceSpec": {1: ("finalizers", _S, None, True)},
    "ConfigMap": {1: ("metadata", _M, "ObjectMeta", False), 2: ("data", _MAP, None, False),
                  3: ("binaryData", _MAPB, None, False), 4: ("immutable", _I, "bool", False)},
    "Secret": {1: ("metadata", _M, "ObjectMeta", False), 2: ("data", _MAPB, None, False), 3: ("type", _S, None, False),
               4: ("stringData", _MAP, None, False), 5: ("immutable", _I, "bool", False)},
    "ObjectReference": {1: ("kind", _S, None, False), 2: ("namespace", _S, None, False), 3: ("name", _S, None, False)},
    "LocalObjectReference": {1: ("name", _S, None, False)},
    "ServiceAccount": {1: ("metadata", _M, "ObjectMeta", False), 2: ("secrets", _M, "ObjectReference", True),
                       3: ("imagePullSecrets", _M, "LocalObjectReference", True),
                       4: ("automountServiceAccountToken", _I, "bool", False)},
    "SelfSubjectAccessReview": {1: ("metadata", _M, "ObjectMeta", False),
                                2: ("spec", _M, "SelfSubjectAccessReviewSpec", False)},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", _M, "ResourceAttributes", False),
                                    2: ("nonResourceAttributes", _M, "NonResourceAttributes", False)},
    "ResourceAttributes": {1: ("namespace", _S, None, False), 2: ("verb", _S, None, False), 3: ("group", _S, None, False),
                           4: ("version", _S, None, False), 5: ("resource", _S, None, False),
                           6: ("subresource", _S, None, False), 7: ("name", _S, None, False)},
    "NonResourceAttributes": {1: ("path", _S, None, False), 2: ("verb", _S, None, False)},
}
SUPPORTED = ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "SelfSubjectAccessReview")


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf message the twin can read (the text says why)."""


def decode(body: bytes) -> dict:
    """The JSON-shaped object inside a Kubernetes protobuf body."""
    if not body.startswith(MAGIC):
        raise ProtobufError("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    unknown = _message(body[len(MAGIC):], "Unknown")
    tm = unknown.get("typeMeta") or {}
    kind = tm.get("kind", "")
    if kind not in SUPPORTED:
        raise ProtobufError(f"the twin decodes protobuf bodies of {', '.join(SUPPORTED)} only, not {kind or 'this'} "
                            f"(send JSON: `kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`)")
    obj = _message(base64.b64decode(unknown["raw"]) if isinstance(unknown.get("raw"), str) else unknown.get("raw", b""),
                   kind)
    return {"apiVersion": tm.get("apiVersion", ""), "kind": kind, **obj}


def _message(data: bytes, name: str) -> dict:
    schema, out, pos = _SCHEMAS[name], {}, 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire} in {name}")
        field = schema.get(number)
        if field is None:
            continue  # a field the twin has no use for
        json_name, kind, sub, repeated = field
        if kind == _S:
            value = value.decode()
        elif kind == _B:
            value = bytes(value)
        elif kind == _I:
            value = bool(value) if sub == "bool" else value
        elif kind == _M:
            value = _message(value, sub)
        elif kind in (_MAP, _MAPB):
            entry = _map_entry(value, kind == _MAPB)
            out.setdefault(json_name, {}).update(entry)
            continue
        if repeated:
            out.setdefault(json_name, []).append(value)
        else:
            out[json_name] = value
    if name == "Unknown" and isinstance(out.get("raw"), bytes):
        out["raw"] = base64.b64encode(out["raw"]).decode()
    return out


def _map_entry(data: bytes, binary: bool) -> dict:
    key, value, pos = "", b"", 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        size, pos = _varint(data, pos)
        chunk, pos = data[pos:pos + size], pos + size
        if tag >> 3 == 1:
            key = chunk.decode()
        else:
            value = chunk
    return {key: base64.b64encode(value).decode() if binary else value.decode()}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated protobuf message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
