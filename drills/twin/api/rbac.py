"""RBAC authorization as the real API server's RBAC authorizer does it, over the stored Roles,
ClusterRoles and their bindings.

A request is (user, groups) × attributes (verb, apiGroup, resource, subresource, namespace, name, or a
non-resource path). A rule allows it when its verbs, apiGroups, resources (`pods/log`, `*`, `pods/*`),
resourceNames (never for list/watch/create without a name) and nonResourceURLs (`/apis/*`) all match;
RoleBindings grant in their namespace only (a ClusterRole referenced by a RoleBinding too), and
ClusterRoleBindings everywhere. Subjects: ServiceAccount, User, Group (`system:serviceaccounts`,
`system:serviceaccounts:<ns>`, `system:authenticated`). Deny is the default; there are no deny rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from drills.twin.api import status as st
from drills.twin.api.resources import by_path

__all__ = ["Attributes", "User", "authorize", "decide", "forbidden", "rule_allows", "service_account_user",
           "DEFAULT_POLICY"]

_GROUP = "rbac.authorization.k8s.io"
_ROLES = by_path(_GROUP, "v1", "roles")
_CLUSTER_ROLES = by_path(_GROUP, "v1", "clusterroles")
_BINDINGS = by_path(_GROUP, "v1", "rolebindings")
_CLUSTER_BINDINGS = by_path(_GROUP, "v1", "clusterrolebindings")
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attributes:
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # for non-resource requests (resource empty)

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)


def service_account_user(namespace: str, name: str) -> User:
    return User(f"{_SA_PREFIX}{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


def authorize(store, user: User, attrs: Attributes) -> bool:
    """Whether any role bound to `user` allows `attrs`."""
    return decide(store, user, attrs) is not None


def decide(store, user: User, attrs: Attributes) -> str | None:
    """The real authorizer's reason for allowing `attrs` (the audit annotation `authorization.k8s.io/reason`,
    e.g. `RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to ServiceAccount "sa/ns"`), or None
    when nothing allows it."""
    for binding in store.list(_CLUSTER_BINDINGS)[0]:
        subject = _subject(binding, user, "")
        if subject is not None and _role_allows(store, binding, "", attrs):
            return f"RBAC: allowed by ClusterRoleBinding {_q(binding['metadata']['name'])} of {_ref(binding)} to " \
                   f"{_describe(subject, '')}"
    if attrs.namespace:
        for binding in store.list(_BINDINGS, attrs.namespace)[0]:
            subject = _subject(binding, user, attrs.namespace)
            if subject is not None and _role_allows(store, binding, attrs.namespace, attrs):
                meta = binding["metadata"]
                return f"RBAC: allowed by RoleBinding {_q(meta['name'] + '/' + meta['namespace'])} of " \
                       f"{_ref(binding)} to {_describe(subject, attrs.namespace)}"
    return None


def forbidden(user: User, attrs: Attributes) -> st.ApiError:
    """The 403 Status the real server answers, word for word."""
    if not attrs.resource_request:
        return st.ApiError(403, "Forbidden", f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"',
                           {})
    noun = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    what = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    subject = f'{what} "{attrs.name}"' if attrs.name else what
    details = {"kind": attrs.resource, **({"name": attrs.name} if attrs.name else {}),
               **({"group": attrs.api_group} if attrs.api_group else {})}
    return st.ApiError(403, "Forbidden", f'{subject} is forbidden: User "{user.name}" cannot {attrs.verb} resource '
                       f'"{noun}" in API group "{attrs.api_group}" {scope}', details)


# What every authenticated user may do on a real cluster (the bootstrap policy's system:discovery,
# system:basic-user and system:public-info-viewer ClusterRoles, bound to system:authenticated).
DEFAULT_POLICY: list[dict] = [
    {"apiVersion": f"{_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": "system:discovery"},
     "rules": [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                                    "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    {"apiVersion": f"{_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": "system:basic-user"},
     "rules": [{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews",
                                                                       "selfsubjectrulesreviews"], "verbs": ["create"]},
               {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]},
    {"apiVersion": f"{_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": "system:public-info-viewer"},
     "rules": [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    *({"apiVersion": f"{_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
       "roleRef": {"apiGroup": _GROUP, "kind": "ClusterRole", "name": name},
       "subjects": [{"apiGroup": _GROUP, "kind": "Group", "name": "system:authenticated"}]}
      for name in ("system:discovery", "system:basic-user", "system:public-info-viewer")),
    {"apiVersion": f"{_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": "cluster-admin"},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]},
]


def _subject(binding: dict, user: User, namespace: str) -> dict | None:
    """The binding's subject that names `user` (or one of its groups), or None."""
    for subject in binding.get("subjects") or ():
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "ServiceAccount":
            sa_ns = subject.get("namespace") or namespace
            if user.name == f"{_SA_PREFIX}{sa_ns}:{name}":
                return subject
        elif kind == "User" and user.name == name:
            return subject
        elif kind == "Group" and name in user.groups:
            return subject
    return None


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'  # Go's %q for plain names


def _ref(binding: dict) -> str:
    ref = binding.get("roleRef") or {}
    return f"{ref.get('kind', '')} {_q(ref.get('name', ''))}"


def _describe(subject: dict, namespace: str) -> str:
    """kube's describeSubject: a service account as "name/namespace"."""
    if subject.get("kind") == "ServiceAccount":
        return f"ServiceAccount {_q(subject['name'] + '/' + (subject.get('namespace') or namespace))}"
    return f"{subject.get('kind')} {_q(subject.get('name', ''))}"


def _role_allows(store, binding: dict, namespace: str, attrs: Attributes) -> bool:
    ref = binding.get("roleRef") or {}
    if ref.get("kind") == "ClusterRole":
        role = store.find(_CLUSTER_ROLES, None, ref.get("name", ""))
    elif ref.get("kind") == "Role" and namespace:
        role = store.find(_ROLES, namespace, ref.get("name", ""))
    else:
        role = None
    return role is not None and any(rule_allows(rule, attrs) for rule in role.get("rules") or ())


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    """Whether one PolicyRule allows `attrs` (kube's RuleAllows)."""
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(_path_matches(url, attrs.path) for url in rule.get("nonResourceURLs") or ())
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and attrs.api_group not in groups:
        return False
    noun = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or ()
    if not any(r in ("*", noun) or (attrs.subresource and r == f"*/{attrs.subresource}")
               or (r == f"{attrs.resource}/*" and attrs.subresource) for r in resources):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _path_matches(rule: str, path: str) -> bool:
    if rule == "*" or rule == path:
        return True
    return rule.endswith("*") and path.startswith(rule[:-1])
