"""One batch/v1 Job per (node, check), pinned to the node, built from the profile's image and command.

The node is chosen by `nodeSelector: kubernetes.io/hostname`, the Job tolerates the gate taint and the
GPU taint, requests every GPU of the node when the check needs them, never restarts, and carries the
labels the run (and its revert) find it by: `gpu-drills.io/accept-run`, `…/accept-check`, `…/accept-node`.
Inputs reach the command as environment variables only (drills/profile/acceptance.py).
"""

from __future__ import annotations

import hashlib
import re

from drills.faults.accept_jobs import RUN_LABEL
from drills.profile.acceptance import GATE_TAINT_KEY, AcceptanceConfig

__all__ = ["CHECK_LABEL", "NODE_LABEL", "PEER_LABEL", "job_name", "render_job"]

CHECK_LABEL = "gpu-drills.io/accept-check"
NODE_LABEL = "gpu-drills.io/accept-node"
PEER_LABEL = "gpu-drills.io/accept-peer"


def job_name(run_id: str, check: str, node: str, peer: str | None = None) -> str:
    """A DNS-1123 name ≤ 63 characters, unique per (run, check, node, peer)."""
    digest = hashlib.sha1(f"{run_id}/{check}/{node}/{peer}".encode()).hexdigest()[:6]
    stem = re.sub(r"[^a-z0-9-]", "-", f"acc-{check}-{node}".lower())[:55].strip("-")
    return f"{stem}-{digest}"


def render_job(cfg: AcceptanceConfig, run_id: str, check: str, node: str, *, gpus: int, env: dict[str, str],
               peer: str | None = None) -> dict:
    spec = cfg.job(check)
    labels = {RUN_LABEL: run_id, CHECK_LABEL: check, NODE_LABEL: node, **({PEER_LABEL: peer} if peer else {})}
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if spec.gpus and gpus else {}
    container = {"name": check, "image": spec.image, "command": list(spec.command),
                 "env": [{"name": k, "value": str(v)} for k, v in sorted(env.items())],
                 "resources": resources, "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
    pod = {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
           "tolerations": [{"key": GATE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
                           {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [container]}
    if check == "storage":
        pod["volumes"] = [{"name": "store", "hostPath": {"path": cfg.store_dir, "type": "DirectoryOrCreate"}}]
        container["volumeMounts"] = [{"name": "store", "mountPath": "/store"}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(run_id, check, node, peer), "namespace": cfg.namespace, "labels": labels},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": int(spec.timeout_s),
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}
