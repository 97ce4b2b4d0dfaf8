"""Endpoints controller: one Endpoints object per selector Service, listing its pods' IPs — Ready
pods under `addresses`, the others under `notReadyAddresses` — with target ports resolved per pod
(named ports looked up in the container ports), as kube's endpoints controller does.

Defect `not-in-endpoints` (profile `endpoints_skip_replacements` on an inference Deployment): once its
Service has listed all the Deployment's replicas as Ready, the controller only keeps those pods — a
replacement becomes Ready but never joins the Endpoints."""

from __future__ import annotations

import logging
from collections import defaultdict

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.podutil import is_ready

__all__ = ["EndpointsController", "endpoint_subsets"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
SERVICES = by_kind("v1", "Service")
ENDPOINTS = by_kind("v1", "Endpoints")


class EndpointsController(Controller):
    name = "endpoints"

    def setup(self) -> None:
        self.services = self.ctx.informers.informer(SERVICES)
        self.pods = self.ctx.informers.informer(PODS)
        self.endpoints = self.ctx.informers.informer(ENDPOINTS)
        self.by_ns: dict[str, set[str]] = defaultdict(set)
        profile = self.ctx.profile
        deps = profile.workloads.inference.values() if profile is not None else ()
        # (ns, service) → desired replicas, for the services whose replacements are left out (a defect)
        self.frozen_at: dict[tuple[str, str], int] = {(d.namespace, d.service_name): d.replicas for d in deps
                                                      if d.endpoints_skip_replacements}
        self.admitted: dict[tuple[str, str], set[str]] = {}
        self.services.add_handler(self._on_service)
        self.pods.add_handler(self._on_pod)

    def _on_service(self, etype: str, obj: dict, old: dict | None) -> None:
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        if etype == "DELETED":
            self.by_ns[ns].discard(name)
        else:
            self.by_ns[ns].add(name)
        self.enqueue((ns, name))

    def _on_pod(self, etype: str, obj: dict, old: dict | None) -> None:
        ns = obj["metadata"].get("namespace", "")
        labels = [obj["metadata"].get("labels") or {}, ((old or {}).get("metadata") or {}).get("labels") or {}]
        for name in tuple(self.by_ns.get(ns, ())):
            svc = self.services.get(ns, name)
            selector = ((svc or {}).get("spec") or {}).get("selector")
            if selector and any(all(lab.get(k) == v for k, v in selector.items()) for lab in labels):
                self.enqueue((ns, name))

    async def reconcile(self, key) -> None:
        ns, name = key
        svc = self.services.get(ns, name)
        current = self.endpoints.get(ns, name)
        if svc is None:
            if current is not None:
                await self.ctx.client.delete(ENDPOINTS, ns, name)
            return
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            return  # services without selectors have hand-made Endpoints
        pods = [p for p in self.pods.in_namespace(ns)
                if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
        if key in self.frozen_at:
            pods = self._admit(key, pods)
        subsets = endpoint_subsets(svc, pods)
        labels = dict(svc["metadata"].get("labels") or {})
        if (svc.get("spec") or {}).get("clusterIP") == "None":
            labels["service.kubernetes.io/headless"] = ""
        if current is None:
            body = {"apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}, "subsets": subsets}
            try:
                await self.ctx.client.create(ENDPOINTS, body)
                return
            except ApiError as err:
                if err.status != 409:
                    raise
        elif (current.get("subsets") or []) == subsets and (current["metadata"].get("labels") or {}) == labels:
            return
        await self.ctx.client.patch(ENDPOINTS, ns, name, {"metadata": {"labels": labels}, "subsets": subsets})

    def _admit(self, key: tuple[str, str], pods: list[dict]) -> list[dict]:
        """The defect: every pod until the Service had all its replicas Ready, then only those pods."""
        admitted = self.admitted.get(key)
        if admitted is not None:
            return [p for p in pods if p["metadata"]["name"] in admitted]
        ready = {p["metadata"]["name"] for p in pods if is_ready(p) and not p["metadata"].get("deletionTimestamp")}
        if len(ready) >= self.frozen_at[key] > 0:
            self.admitted[key] = ready
            log.info("endpoints of %s/%s no longer admit new pods (defect): %s", *key, ", ".join(sorted(ready)))
        return pods


def endpoint_subsets(svc: dict, pods: list[dict]) -> list[dict]:
    """Subsets for `svc` from `pods` (grouped by resolved port set, sorted for stable output)."""
    spec = svc.get("spec") or {}
    publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
    groups: dict[tuple, dict] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status = pod.get("status") or {}
        ip = status.get("podIP")
        if not ip or status.get("phase") in ("Succeeded", "Failed"):
            continue
        if pod["metadata"].get("deletionTimestamp") and not publish_not_ready:
            continue
        ports = tuple(_port(sp, pod) for sp in spec.get("ports") or ())
        if any(p is None for p in ports):
            continue
        address = {"ip": ip, "targetRef": {"kind": "Pod", "namespace": pod["metadata"]["namespace"],
                                           "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}}
        if (pod.get("spec") or {}).get("nodeName"):
            address["nodeName"] = pod["spec"]["nodeName"]
        group = groups.setdefault(ports, {"addresses": [], "notReadyAddresses": []})
        ready = is_ready(pod) or publish_not_ready
        group["addresses" if ready else "notReadyAddresses"].append(address)
    out = []
    for ports, group in groups.items():
        subset = {k: v for k, v in group.items() if v}
        subset["ports"] = [dict(p) for p in ports]
        out.append(subset)
    return out


def _port(service_port: dict, pod: dict) -> tuple | None:
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, str) and not target.isdigit():
        target = next((cp.get("containerPort") for c in (pod.get("spec") or {}).get("containers") or ()
                       for cp in c.get("ports") or () if cp.get("name") == target), None)
        if target is None:
            return None
    out = {"port": int(target), "protocol": service_port.get("protocol", "TCP")}
    if service_port.get("name"):
        out["name"] = service_port["name"]
    if service_port.get("appProtocol"):
        out["appProtocol"] = service_port["appProtocol"]
    return tuple(sorted(out.items()))
