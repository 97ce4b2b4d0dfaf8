"""The validation the twin applies on every write (422 Invalid, with the real server's field errors).

The checks are those of k8s.io/kubernetes/pkg/apis/*/validation that drills and kubectl users run into:
names, required fields (a pod's containers, images; a workload's selector and template; a Service's ports;
a Role's verbs), enums (restart policies), duplicates (container names), selectors that must select their
own template, and a PDB's exclusive fields. Each error is a `FieldError`; the Status lists them all.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from drills.twin.api import status as st
from drills.twin.api.resources import ResourceType
from drills.twin.api.selectors import SelectorError, match_label_selector

__all__ = ["validate", "validate_name", "FieldError"]

log = logging.getLogger(__name__)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_WORKLOADS = ("Deployment", "ReplicaSet", "DaemonSet")


@dataclass(frozen=True)
class FieldError:
    """One field error as field.Error prints it: `path: <type>[: value][: detail]`."""

    path: str
    type: str  # Required | Invalid | Unsupported | Duplicate
    value: object = None
    detail: str = ""

    _REASONS = {"Required": "FieldValueRequired", "Invalid": "FieldValueInvalid",
                "Unsupported": "FieldValueNotSupported", "Duplicate": "FieldValueDuplicate"}

    @property
    def reason(self) -> str:
        return self._REASONS[self.type]

    @property
    def message(self) -> str:
        words = {"Required": "Required value", "Invalid": "Invalid value", "Unsupported": "Unsupported value",
                 "Duplicate": "Duplicate value"}[self.type]
        parts = [words]
        if self.type != "Required":
            parts.append(_go_value(self.value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)


def validate_name(rt: ResourceType, name: str) -> None:
    if rt.group == "rbac.authorization.k8s.io":  # RBAC names are path segments (`system:discovery`)
        if name in (".", "..") or "/" in name or "%" in name:
            raise _invalid(rt, name, [FieldError("metadata.name", "Invalid", name,
                                                 "may not contain '/' or '%' and may not be '.' or '..'")])
        return
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise _invalid(rt, name, [FieldError(
            "metadata.name", "Invalid", name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")])


def validate(rt: ResourceType, obj: dict) -> None:
    """422 Invalid listing every field error of `obj` (after defaulting, as the real server orders them)."""
    name = obj["metadata"].get("name", "")
    errors: list[FieldError] = []
    labels = obj["metadata"].get("labels")
    if labels is not None and (not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values())):
        errors.append(FieldError("metadata.labels", "Invalid", labels, "label values must be strings"))
    check = _BY_KIND.get((rt.group, rt.kind))
    if check is not None:
        errors += check(obj.get("spec") if isinstance(obj.get("spec"), dict) else {}, obj)
    if errors:
        raise _invalid(rt, name, errors)


# -- per kind -----------------------------------------------------------------------------------------
def _pod(spec: dict, obj: dict) -> list[FieldError]:
    return _pod_spec(spec, "spec")


def _workload(spec: dict, obj: dict) -> list[FieldError]:
    errors: list[FieldError] = []
    selector = spec.get("selector")
    template = spec.get("template") if isinstance(spec.get("template"), dict) else None
    if not selector:
        errors.append(FieldError("spec.selector", "Required", detail=""))
    elif not _selector_empty(selector) and template is not None:
        labels = (template.get("metadata") or {}).get("labels") or {}
        try:
            selects = match_label_selector(selector, labels)
        except SelectorError as err:
            errors.append(FieldError("spec.selector", "Invalid", selector, str(err)))
            selects = True
        if not selects:
            errors.append(FieldError("spec.template.metadata.labels", "Invalid", labels,
                                     "`selector` does not match template `labels`"))
    elif selector is not None and _selector_empty(selector):
        errors.append(FieldError("spec.selector", "Invalid", selector, "empty selector is invalid for deployment"
                                 if obj.get("kind") == "Deployment" else "empty selector is invalid"))
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        errors.append(FieldError("spec.replicas", "Invalid", replicas, "must be greater than or equal to 0"))
    if template is None:
        errors.append(FieldError("spec.template.spec.containers", "Required"))
    else:
        errors += _pod_spec(template.get("spec") or {}, "spec.template.spec",
                            only=("Always",) if obj.get("kind") in _WORKLOADS else None)
    return errors


def _batch_job(spec: dict, obj: dict) -> list[FieldError]:
    template = spec.get("template") if isinstance(spec.get("template"), dict) else None
    if template is None:
        return [FieldError("spec.template.spec.containers", "Required")]
    return _pod_spec(template.get("spec") or {}, "spec.template.spec", only=_JOB_RESTART_POLICIES)


def _service(spec: dict, obj: dict) -> list[FieldError]:
    kind = spec.get("type") or "ClusterIP"
    if kind not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        return [FieldError("spec.type", "Unsupported", kind,
                           'supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"')]
    if kind != "ExternalName" and spec.get("clusterIP") != "None" and not spec.get("ports"):
        return [FieldError("spec.ports", "Required")]
    errors = []
    for i, port in enumerate(spec.get("ports") or []):
        if isinstance(port, dict) and not port.get("port"):
            errors.append(FieldError(f"spec.ports[{i}].port", "Required"))
    return errors


def _role(spec: dict, obj: dict) -> list[FieldError]:
    errors = []
    for i, rule in enumerate(obj.get("rules") or []):
        if isinstance(rule, dict) and not rule.get("verbs"):
            errors.append(FieldError(f"rules[{i}].verbs", "Required", detail="verbs must contain at least one value"))
        if isinstance(rule, dict) and not rule.get("nonResourceURLs") and not rule.get("resources"):
            errors.append(FieldError(f"rules[{i}].resources", "Required",
                                     detail="resource rules must supply at least one resource"))
    return errors


def _binding(spec: dict, obj: dict) -> list[FieldError]:
    ref = obj.get("roleRef") or {}
    errors = []
    if ref.get("kind") not in ("Role", "ClusterRole"):
        errors.append(FieldError("roleRef.kind", "Unsupported", ref.get("kind", ""),
                                 'supported values: "Role", "ClusterRole"'))
    if not ref.get("name"):
        errors.append(FieldError("roleRef.name", "Required"))
    return errors


def _pdb(spec: dict, obj: dict) -> list[FieldError]:
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        return [FieldError("spec", "Invalid", spec, "minAvailable and maxUnavailable cannot be both set")]
    return []


_BY_KIND = {
    ("", "Pod"): _pod,
    ("apps", "Deployment"): _workload, ("apps", "ReplicaSet"): _workload, ("apps", "DaemonSet"): _workload,
    ("batch", "Job"): _batch_job,
    ("", "Service"): _service,
    ("rbac.authorization.k8s.io", "Role"): _role, ("rbac.authorization.k8s.io", "ClusterRole"): _role,
    ("rbac.authorization.k8s.io", "RoleBinding"): _binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _binding,
    ("policy", "PodDisruptionBudget"): _pdb,
}


# -- helpers ------------------------------------------------------------------------------------------
def _pod_spec(spec: dict, path: str, only: tuple[str, ...] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errors.append(FieldError(f"{path}.containers", "Required"))
    seen: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            where = f"{path}.{group}[{i}]"
            if not isinstance(c, dict) or not c.get("name"):
                errors.append(FieldError(f"{where}.name", "Required"))
                continue
            if not _DNS_LABEL.match(c["name"]) or len(c["name"]) > 63:
                errors.append(FieldError(f"{where}.name", "Invalid", c["name"],
                                         "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                         "characters or '-', and must start and end with an alphanumeric character"))
            elif c["name"] in seen:
                errors.append(FieldError(f"{where}.name", "Duplicate", c["name"]))
            seen.add(c["name"])
            if not c.get("image"):
                errors.append(FieldError(f"{where}.image", "Required"))
    policy = spec.get("restartPolicy")
    allowed = only or _RESTART_POLICIES
    if policy is not None and policy not in allowed:
        errors.append(FieldError(f"{path}.restartPolicy", "Unsupported", policy,
                                 "supported values: " + ", ".join(f'"{p}"' for p in allowed)))
    return errors


def _selector_empty(selector) -> bool:
    return isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions")


def _go_value(value) -> str:
    """A value as field.Invalid prints it: strings quoted, maps as Go's map syntax, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return "map[string]string{" + ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if not isinstance(value, (int, float)) else str(value)


def _invalid(rt: ResourceType, name: str, errors: list[FieldError]) -> st.ApiError:
    return st.invalid(rt.kind, name, [(e.path, e.message, e.reason) for e in errors], rt.group)
