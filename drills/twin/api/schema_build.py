"""Writes schemas.json: the fields of every built-in kind the twin serves, from the official Python client.

The client's models are generated from the Kubernetes OpenAPI document; their `attribute_map` and
`openapi_types` are the field names and types the real API server decodes. Importing the client takes
over a second, so the twin reads the JSON this writes instead. Run after upgrading `kubernetes`:

    .venv/bin/python -m drills.twin.api.schema_build
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from drills.twin.api.resources import RESOURCES

__all__ = ["build", "SCHEMAS_JSON"]

log = logging.getLogger(__name__)

SCHEMAS_JSON = Path(__file__).with_name("schemas.json")
_SCALARS = {"str": "s", "int": "s", "float": "s", "bool": "s", "datetime": "s", "date": "s", "bytes": "s",
            "object": "*"}


def build() -> dict:
    """{"source", "kinds": {"apiVersion/Kind": model}, "types": {model: {jsonField: type}}}; a type is "s" (a
    scalar), "*" (anything: IntOrString, RawExtension, free-form), a model name, "[t]" (a list) or "{t}" (a map)."""
    import kubernetes
    from kubernetes.client import models

    types: dict[str, dict[str, str]] = {}

    def encode(t: str) -> str:
        if m := re.fullmatch(r"List\[(.+)\]", t):
            return "[" + encode(m[1]) + "]"
        if m := re.fullmatch(r"Dict\[str, (.+)\]", t):
            return "{" + encode(m[1]) + "}"
        if t in _SCALARS:
            return _SCALARS[t]
        visit(t)
        return t

    def visit(name: str) -> None:
        if name in types:
            return
        cls = getattr(models, name)
        types[name] = {}
        types[name] = {cls.attribute_map[attr]: encode(t) for attr, t in cls.openapi_types.items()}

    kinds = {}
    for rt in RESOURCES:
        for candidate in _candidates(rt.group, rt.version, rt.kind):
            if hasattr(models, candidate):
                visit(candidate)
                kinds[f"{rt.api_version}/{rt.kind}"] = candidate
                break
    return {"source": f"kubernetes python client {kubernetes.__version__} (kubernetes.client.models)",
            "kinds": kinds, "types": dict(sorted(types.items()))}


def _candidates(group: str, version: str, kind: str) -> list[str]:
    v = version.capitalize()
    if not group:
        return [f"Core{v}{kind}", f"{v}{kind}"]
    if group == "events.k8s.io":
        return [f"Events{v}{kind}"]
    if "." in group and not group.endswith(".k8s.io"):
        return []  # custom resources (Volcano): their CRDs' schemas, not the client's
    return [f"{v}{kind}"]


if __name__ == "__main__":
    data = build()
    SCHEMAS_JSON.write_text(json.dumps(data, indent=0, sort_keys=False, separators=(",", ":")) + "\n")
    print(f"wrote {SCHEMAS_JSON}: {len(data['kinds'])} kinds, {len(data['types'])} types")
