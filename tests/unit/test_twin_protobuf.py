"""The twin's protobuf body reader (drills/twin/api/protobuf.py): a Deployment as kubectl encodes it, and a
field it cannot read refused rather than dropped. Bodies built here with the wire format's own rules."""

import pytest

from drills.twin.api.protobuf import ProtobufError, decode


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _f(number: int, value) -> bytes:
    """One field: an int as a varint, bytes/str length-delimited."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _body(kind: str, raw: bytes) -> bytes:
    type_meta = _f(1, "apps/v1") + _f(2, kind)
    return b"k8s\x00" + _f(1, type_meta) + _f(2, raw)


def _deployment(container: bytes) -> bytes:
    labels = _f(11, _f(1, "app") + _f(2, "web"))
    template = _f(1, labels) + _f(2, _f(2, container) + _f(3, ""))  # restartPolicy "" as Go writes it
    spec = _f(1, 2) + _f(2, _f(1, _f(1, "app") + _f(2, "web"))) + _f(3, template)
    return _body("Deployment", _f(1, _f(1, "web") + labels) + _f(2, spec) + _f(3, b""))


def test_a_deployment_reads_as_its_json_with_go_zero_values_left_out():
    container = _f(1, "nginx") + _f(2, "nginx:1.27") + _f(6, _f(2, 0) + _f(3, 8080) + _f(4, "TCP")) + _f(16, 0)
    obj = decode(_deployment(container))
    assert obj["kind"] == "Deployment" and obj["metadata"] == {"name": "web", "labels": {"app": "web"}}
    assert obj["spec"]["replicas"] == 2 and obj["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    pod = obj["spec"]["template"]["spec"]
    assert pod == {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                   "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}


def test_a_field_the_twin_cannot_read_is_refused_not_dropped():
    probe = _f(10, _f(2, 5))  # livenessProbe {initialDelaySeconds: 5}
    with pytest.raises(ProtobufError, match="field 10 of a protobuf Container .*send JSON"):
        decode(_deployment(_f(1, "nginx") + _f(2, "nginx:1.27") + probe))
