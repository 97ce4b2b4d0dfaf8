"""The structural validation the twin applies on every write (422 Invalid, with the real messages).

The real API server validates far more; these are the checks drills and kubectl users run into.
"""

from __future__ import annotations

import logging
import re

from drills.twin.api import status as st
from drills.twin.api.resources import ResourceType

__all__ = ["validate", "validate_name"]

log = logging.getLogger(__name__)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_name(rt: ResourceType, name: str) -> None:
    if rt.group == "rbac.authorization.k8s.io":  # RBAC names are path segments (`system:discovery`)
        if name in (".", "..") or "/" in name or "%" in name:
            raise st.invalid(rt.kind, name, [("metadata.name", f'Invalid value: "{name}": may not contain '
                                              "'/' or '%' and may not be '.' or '..'")], rt.group)
        return
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise st.invalid(rt.kind, name, [(
            "metadata.name",
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
            "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
            "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")],
            rt.group)


def validate(rt: ResourceType, obj: dict) -> None:
    """The few structural checks drills rely on (the real server's validation is far wider)."""
    name = obj["metadata"].get("name", "")
    if rt.kind == "Pod" and not rt.group:
        containers = (obj.get("spec") or {}).get("containers")
        if not containers:
            raise st.invalid("Pod", name, [("spec.containers", "Required value")])
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                raise st.invalid("Pod", name, [(f"spec.containers[{i}].name", "Required value")])
            if not c.get("image"):
                raise st.invalid("Pod", name, [(f"spec.containers[{i}].image", "Required value")])
    labels = obj["metadata"].get("labels")
    if labels is not None and (not isinstance(labels, dict)
                               or not all(isinstance(v, str) for v in labels.values())):
        raise st.invalid(rt.kind, name, [("metadata.labels", "Invalid value: label values must be strings")], rt.group)
