"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the few kinds kubectl
sends that way and the twin decodes: what `kubectl create namespace|configmap|secret generic|
serviceaccount|deployment` and `kubectl auth can-i` post.

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
_S, _B, _I, _M, _MAP, _MAPB, _MAPQ = "string", "bytes", "varint", "message", "map", "mapbytes", "mapquantity"
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
    "Quantity": {1: ("string", _S, None, False)},
    # `kubectl create deployment NAME --image=… [--replicas=N] [--port=P] [-- COMMAND ARGS…]` (apps/v1 and core/v1
    # generated.proto, k8s.io/api v0.26): every field that command can send; anything else is refused (_STRICT).
    "Deployment": {1: ("metadata", _M, "ObjectMeta", False), 2: ("spec", _M, "DeploymentSpec", False),
                   3: ("status", _M, "Empty", False)},
    "DeploymentSpec": {1: ("replicas", _I, None, False), 2: ("selector", _M, "LabelSelector", False),
                       3: ("template", _M, "PodTemplateSpec", False), 4: ("strategy", _M, "DeploymentStrategy", False),
                       5: ("minReadySeconds", _I, None, False), 6: ("revisionHistoryLimit", _I, None, False),
                       7: ("paused", _I, "bool", False), 9: ("progressDeadlineSeconds", _I, None, False)},
    "DeploymentStrategy": {1: ("type", _S, None, False), 2: ("rollingUpdate", _M, "RollingUpdateDeployment", False)},
    "RollingUpdateDeployment": {1: ("maxUnavailable", _M, "IntOrString", False), 2: ("maxSurge", _M, "IntOrString", False)},
    "IntOrString": {1: ("type", _I, None, False), 2: ("intVal", _I, None, False), 3: ("strVal", _S, None, False)},
    "LabelSelector": {1: ("matchLabels", _MAP, None, False), 2: ("matchExpressions", _M, "LabelSelectorRequirement", True)},
    "LabelSelectorRequirement": {1: ("key", _S, None, False), 2: ("operator", _S, None, False),
                                 3: ("values", _S, None, True)},
    "PodTemplateSpec": {1: ("metadata", _M, "ObjectMeta", False), 2: ("spec", _M, "PodSpec", False)},
    "PodSpec": {2: ("containers", _M, "Container", True), 3: ("restartPolicy", _S, None, False),
                4: ("terminationGracePeriodSeconds", _I, None, False), 6: ("dnsPolicy", _S, None, False),
                8: ("serviceAccountName", _S, None, False), 19: ("schedulerName", _S, None, False)},
    "Container": {1: ("name", _S, None, False), 2: ("image", _S, None, False), 3: ("command", _S, None, True),
                  4: ("args", _S, None, True), 5: ("workingDir", _S, None, False),
                  6: ("ports", _M, "ContainerPort", True), 7: ("env", _M, "EnvVar", True),
                  8: ("resources", _M, "ResourceRequirements", False), 13: ("terminationMessagePath", _S, None, False),
                  14: ("imagePullPolicy", _S, None, False), 20: ("terminationMessagePolicy", _S, None, False)},
    "ContainerPort": {1: ("name", _S, None, False), 2: ("hostPort", _I, None, False),
                      3: ("containerPort", _I, None, False), 4: ("protocol", _S, None, False),
                      5: ("hostIP", _S, None, False)},
    "EnvVar": {1: ("name", _S, None, False), 2: ("value", _S, None, False)},
    "ResourceRequirements": {1: ("limits", _MAPQ, None, False), 2: ("requests", _MAPQ, None, False)},
    "Empty": {},  # a status the client leaves empty (the server owns it)
}
SUPPORTED = ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "SelfSubjectAccessReview", "Deployment")
# Messages whose every field the twin must understand: a field it would drop (a volume, a probe) changes the object
# the user asked for, so the body is refused with the way round it instead of being stored without it. A zero value
# (false, 0, "") says nothing and is skipped: Go's encoder writes every non-pointer field.
_STRICT = frozenset({"Deployment", "DeploymentSpec", "DeploymentStrategy", "RollingUpdateDeployment", "IntOrString",
                     "LabelSelector", "LabelSelectorRequirement", "PodTemplateSpec", "PodSpec", "Container",
                     "ContainerPort", "EnvVar", "ResourceRequirements", "Empty"})
# Non-pointer integers whose zero JSON leaves out (omitempty); a pointer's explicit 0 (`--replicas=0`) is kept.
_OMIT_ZERO = frozenset({("ContainerPort", "hostPort"), ("DeploymentSpec", "minReadySeconds")})
_JSON_HINT = "send JSON: `kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`"


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
                            f"({_JSON_HINT})")
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
            if name in _STRICT and value not in (0, b""):  # Go's encoder writes every non-pointer field, zero or not
                raise ProtobufError(f"the twin cannot read field {number} of a protobuf {name} ({_JSON_HINT})")
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
        elif kind == _MAPQ:  # map<string, resource.Quantity>: a Quantity is a message holding its string (field 1)
            entry = {k: _message(v, "Quantity")["string"] for k, v in _map_entry(value, raw=True).items()}
            out.setdefault(json_name, {}).update(entry)
            continue
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
    if name in _STRICT or name == "ObjectMeta":  # Go writes a non-pointer field even when empty; JSON omits it
        out = {k: v for k, v in out.items() if v != "" and not (v == 0 and (name, k) in _OMIT_ZERO)}
    if name == "IntOrString":  # JSON holds the value itself: 25 or "25%"
        return out.get("strVal", "") if out.get("type") == 1 else out.get("intVal", 0)
    return out


def _map_entry(data: bytes, binary: bool = False, raw: bool = False) -> dict:
    key, value, pos = "", b"", 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        size, pos = _varint(data, pos)
        chunk, pos = data[pos:pos + size], pos + size
        if tag >> 3 == 1:
            key = chunk.decode()
        else:
            value = chunk
    if raw:
        return {key: bytes(value)}
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
