"""The resource types the twin serves: data that drives routing, discovery and tables.

Adding a resource is one entry here; the server, discovery and kubectl short names follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ResourceType", "RESOURCES", "by_path", "by_kind", "groups"]

_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # e.g. "status", "log", "eviction", "binding", "scale"
    categories: tuple[str, ...] = ("all",)
    verbs: tuple[str, ...] = _VERBS
    singular: str = field(default="")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _core(plural: str, kind: str, **kw) -> ResourceType:
    return ResourceType("", "v1", plural, kind, **kw)


RESOURCES: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", namespaced=False, short_names=("ns",), subresources=("status", "finalize"),
          categories=()),
    _core("nodes", "Node", namespaced=False, short_names=("no",), subresources=("status",), categories=()),
    _core("pods", "Pod", short_names=("po",), subresources=("status", "log", "eviction", "binding", "exec", "portforward")),
    _core("events", "Event", short_names=("ev",), categories=()),
    _core("services", "Service", short_names=("svc",), subresources=("status",)),
    _core("endpoints", "Endpoints", short_names=("ep",), categories=(), singular="endpoints"),
    _core("configmaps", "ConfigMap", short_names=("cm",), categories=()),
    _core("secrets", "Secret", categories=()),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",), categories=()),
    _core("replicationcontrollers", "ReplicationController", short_names=("rc",), subresources=("status", "scale")),
    ResourceType("apps", "v1", "deployments", "Deployment", short_names=("deploy",), subresources=("status", "scale")),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), subresources=("status", "scale")),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), subresources=("status",)),
    ResourceType("batch", "v1", "jobs", "Job", subresources=("status",)),
    ResourceType("batch", "v1", "cronjobs", "CronJob", short_names=("cj",), subresources=("status",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", categories=()),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", categories=()),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False, categories=()),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False,
                 categories=()),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
                 namespaced=False, categories=(), verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                 namespaced=False, categories=(), verbs=("create",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
                 subresources=("status",), categories=()),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False,
                 short_names=("pc",), categories=()),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", categories=()),
    ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False,
                 subresources=("status",), categories=("api-extensions",)),
    ResourceType("batch.volcano.sh", "v1alpha1", "jobs", "Job", short_names=("vcjob", "vj"),
                 subresources=("status",), categories=("volcano",)),
    ResourceType("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False,
                 short_names=("q", "queue-v1beta1"), subresources=("status",), categories=()),
    ResourceType("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup",
                 short_names=("pg", "podgroup-v1beta1"), subresources=("status",), categories=()),
)

_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES}


def by_path(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource served at /api[s]/{group}/{version}/.../{plural}, or None."""
    return _BY_PATH.get((group, version, plural))


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    return _BY_KIND.get((api_version, kind))


def groups() -> dict[str, list[str]]:
    """Group name → versions served (core group under "")."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        versions = out.setdefault(r.group, [])
        if r.version not in versions:
            versions.append(r.version)
    return out
