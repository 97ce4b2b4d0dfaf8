"""Helpers for the workload-controller e2e tests: act like a kubelet on pods the scheduler will never
place (they select no node), and wait for conditions on the API without timing anything."""

from __future__ import annotations

import itertools
import time
from typing import Callable, TypeVar

from kubernetes import client

__all__ = ["NOWHERE", "wait_for", "set_pod_phase", "owned_pods"]

T = TypeVar("T")
NOWHERE = {"twin.gpu-drills.io/test-nowhere": "true"}  # no node carries it: pods stay unbound
_ips = itertools.count(10)


def wait_for(probe: Callable[[], T], what: str, deadline_s: float = 30.0, every_s: float = 0.05) -> T:
    """Poll `probe` until it returns something truthy; AssertionError naming `what` at the deadline."""
    end = time.monotonic() + deadline_s
    last: T = probe()
    while not last:
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}; last value {last!r}")
        time.sleep(every_s)
        last = probe()
    return last


def set_pod_phase(core: client.CoreV1Api, pod, phase: str = "Running", ready: bool = True,
                  exit_code: int | None = None, reason: str | None = None) -> None:
    """Patch pod status through the API like a kubelet: phase, Ready condition, container states, podIP."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cond = "True" if ready and phase == "Running" else "False"
    if phase in ("Failed", "Succeeded"):
        state = {"terminated": {"exitCode": exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1),
                                "reason": reason or ("Completed" if phase == "Succeeded" else "Error"),
                                "startedAt": now, "finishedAt": now}}
    else:
        state = {"running": {"startedAt": now}}
    ip = f"10.244.0.{next(_ips) % 250 + 2}"
    status = {
        "phase": phase,
        "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "10.0.0.1",
        "conditions": [{"type": t, "status": cond if t in ("Ready", "ContainersReady") else "True",
                        "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{"name": c.name, "image": c.image, "imageID": "sha256:0", "ready": cond == "True",
                               "restartCount": 0, "started": phase == "Running", "state": state}
                              for c in pod.spec.containers],
    }
    if reason:
        status["reason"] = reason
    core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": status})


def owned_pods(core: client.CoreV1Api, namespace: str, owner_uid: str, *, active_only: bool = True) -> list:
    pods = core.list_namespaced_pod(namespace).items
    out = [p for p in pods if any(r.uid == owner_uid for r in (p.metadata.owner_references or ()))]
    if active_only:
        out = [p for p in out if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")]
    return sorted(out, key=lambda p: p.metadata.name)
