"""The Pod Security Standards' "restricted" profile, as rules over a pod spec: every pod drills renders (the
scheduled run's CronJob, the fio Job, the load's master and worker Jobs) must pass a namespace labelled
`pod-security.kubernetes.io/enforce: restricted`.

The rules are the restricted profile of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(baseline included, policy version 1.25+): no host namespaces, ports or paths; not privileged; only the
listed volume types; `allowPrivilegeEscalation: false`, `runAsNonRoot: true` and no `runAsUser: 0`, a
`RuntimeDefault` or `Localhost` seccomp profile, every capability dropped (`ALL`) and none added but
`NET_BIND_SERVICE` — each set on the container or inherited from the pod where the standard allows it.
`restricted_violations` returns one sentence per broken rule (empty: it passes).
"""

from __future__ import annotations

from typing import Any

__all__ = ["restricted_violations", "pod_specs", "RESTRICTED_VOLUMES"]

RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
_SECCOMP_OK = ("RuntimeDefault", "Localhost")


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec(s) of a Pod, a workload (Job, Deployment, …) or a CronJob."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "Pod":
        return [spec]
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = (spec.get("template") or {}).get("spec")
    return [template] if template else []


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Why `pod` (a pod spec) fails Pod Security "restricted", one sentence per rule; [] when it passes."""
    out: list[str] = []
    psc = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(f"{key} must be unset or false")
    for volume in pod.get("volumes") or []:
        kinds = [k for k in volume if k != "name"]
        if not set(kinds) <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume.get('name')!r} of type {', '.join(kinds)} is not allowed "
                       f"(allowed: {', '.join(sorted(RESTRICTED_VOLUMES))})")
    if psc.get("runAsUser") == 0:
        out.append("pod securityContext.runAsUser must not be 0")
    if psc.get("seccompProfile", {}).get("type") not in (None, *_SECCOMP_OK):
        out.append(f"pod seccompProfile.type {psc['seccompProfile'].get('type')!r} must be RuntimeDefault or Localhost")
    for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        out += _container(c, psc)
    return out


def _container(c: dict[str, Any], psc: dict[str, Any]) -> list[str]:
    name, sc = c.get("name"), c.get("securityContext") or {}
    out = []
    if sc.get("privileged"):
        out.append(f"container {name!r} must not be privileged")
    if any(p.get("hostPort") for p in c.get("ports") or []):
        out.append(f"container {name!r} must not use hostPort")
    if sc.get("allowPrivilegeEscalation") is not False:
        out.append(f"container {name!r} must set securityContext.allowPrivilegeEscalation=false")
    if not (sc.get("runAsNonRoot") is True or (psc.get("runAsNonRoot") is True and sc.get("runAsNonRoot") is not False)):
        out.append(f"container {name!r} must set runAsNonRoot=true (or inherit it from the pod)")
    if sc.get("runAsUser") == 0:
        out.append(f"container {name!r} must not set runAsUser=0")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    if seccomp not in _SECCOMP_OK:
        out.append(f"container {name!r} must set seccompProfile.type to RuntimeDefault or Localhost "
                   "(or inherit it from the pod)")
    caps = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        out.append(f"container {name!r} must drop ALL capabilities")
    added = [cap for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
    if added:
        out.append(f"container {name!r} must not add capabilities {', '.join(added)} (only NET_BIND_SERVICE)")
    return out
