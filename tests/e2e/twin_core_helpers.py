"""Helpers for the cluster-core e2e tests (scheduler, kubelet, node lifecycle): pod builders, event
lookups, twin-time parsing, the twin's fault endpoints, and waiting on a condition (never on time)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, TypeVar

import requests
from kubernetes import client

from drills.core.clock import parse_iso
from fixtures.twin import api_client_for

__all__ = ["NS", "TRAINER", "core_of", "wait_for", "ts", "gpu_pod", "events", "first_event", "fault", "kubectl",
           "condition"]

T = TypeVar("T")
NS = "ai-platform"
TRAINER = "registry.local/ai-platform/llm-trainer:2.4.0"  # cached on the minimal profile's training nodes
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def core_of(handle) -> client.CoreV1Api:
    return client.CoreV1Api(api_client_for(handle))


def wait_for(probe: Callable[[], T], what: str, deadline_s: float = 30.0, every_s: float = 0.05) -> T:
    """Poll `probe` until it returns something truthy; AssertionError naming `what` at the deadline."""
    end = time.monotonic() + deadline_s
    last = probe()
    while not last:
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}; last value {last!r}")
        time.sleep(every_s)
        last = probe()
    return last


def ts(value) -> float:
    """Twin epoch seconds of an RFC 3339 string or a datetime from the kubernetes client."""
    if value is None:
        raise AssertionError("timestamp missing")
    return value.timestamp() if hasattr(value, "timestamp") else parse_iso(value).timestamp()


def gpu_pod(name: str, gpus: int = 8, image: str = TRAINER, node: str | None = None, role: str = "training",
            tolerations: list | None = None, annotations: dict | None = None, priority_class: str | None = None,
            restart_policy: str | None = None, scheduler: str | None = None) -> dict:
    selector = {"kubernetes.io/hostname": node} if node else {"gpu-drills.io/role": role}
    spec: dict = {
        "nodeSelector": selector,
        "tolerations": [GPU_TOLERATION] if tolerations is None else tolerations,
        "containers": [{"name": "main", "image": image,
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": spec}


def events(core: client.CoreV1Api, name: str, reason: str | None = None, namespace: str = NS) -> list:
    out = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == name]
    return [e for e in out if reason is None or e.reason == reason]


def first_event(core: client.CoreV1Api, name: str, reason: str, namespace: str = NS):
    found = events(core, name, reason, namespace)
    return min(found, key=lambda e: ts(e.first_timestamp)) if found else None


def condition(obj, ctype: str):
    return next((c for c in (obj.status.conditions or []) if c.type == ctype), None)


def fault(handle, path: str, body: dict) -> dict:
    resp = requests.post(f"{handle.url}/twin/v1/{path}", json=body, timeout=10)
    resp.raise_for_status()
    return resp.json()


def kubectl(handle, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=60, check=check,
                          env=dict(os.environ, KUBECONFIG=handle.kubeconfig))
