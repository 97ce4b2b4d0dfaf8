"""Cluster facts for the report's Environment widget, captured while the run's cluster is up.

A twin is stopped after its scenario, long before the report is built, so the target fixture asks
the cluster once (Kubernetes `/version`, nodes, GPUs) and keeps the answer in
`<run>/environment.json`; `make_report` reads it back into `environment.properties`.
Best effort: a fact the cluster does not give is left out, and asking never fails a drill.
"""

from __future__ import annotations

import json
import os
import logging
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["cluster_facts", "save_environment", "load_environment", "ENVIRONMENT_FILE", "framework_version"]

log = logging.getLogger(__name__)

ENVIRONMENT_FILE = "environment.json"
_TIMEOUT_S = 5


def cluster_facts(cluster, *, target: str, run_id: str, defects: list[str] | None = None,
                  twin_info: dict | None = None) -> dict[str, str | int]:
    """Environment-widget facts of one connected cluster (keys are what the reviewer reads; the
    widget shows the first five rows, so target, Kubernetes, nodes, GPUs and defects come first)."""
    facts: dict[str, str | int] = {"Target": target}
    kube = _kubernetes_version(cluster)
    if kube:
        facts["Kubernetes"] = kube
    nodes = _nodes(cluster)
    if nodes is not None:
        facts["Nodes"] = len(nodes)
        facts["GPUs"] = sum(_gpus(n) for n in nodes)
    facts["Defects"] = ", ".join(defects or []) or "none"
    if twin_info:
        facts["Twin profile"] = str(twin_info.get("profile") or "?")
        facts["Twin scale"] = f"{float(twin_info.get('scale') or 1):g}x"
    facts["Run id"] = run_id
    facts["Framework"] = f"gpu-drills {framework_version()}"
    return facts


def save_environment(run_dir: Path, facts: dict) -> Path | None:
    """Write `<run>/environment.json` unless an earlier scenario of the run already did."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    if path.exists():
        return None
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # lanes of one run may both save it: each its own tmp
    tmp.write_text(json.dumps(facts, ensure_ascii=False, indent=2), encoding="utf-8")
    tmp.replace(path)
    log.debug("cluster facts saved to %s", path)
    return path


def load_environment(run_dir: Path) -> dict:
    """The facts saved during the run, or {} (a run that never reached a cluster has none)."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as err:
        log.warning("ignoring unreadable %s: %s", path, err)
        return {}
    return data if isinstance(data, dict) else {}


def framework_version() -> str:
    try:
        return version("gpu-drills")
    except PackageNotFoundError:
        return "unknown"


def _kubernetes_version(cluster) -> str | None:
    from kubernetes import client

    try:
        info = client.VersionApi(cluster.api).get_code(_request_timeout=_TIMEOUT_S)
        return str(info.git_version)
    except Exception as err:  # noqa: BLE001 — a fact for the report must never fail the drill
        log.info("Kubernetes version not read from %s: %s", getattr(cluster, "url", "?"), err)
        return None


def _nodes(cluster) -> list[dict] | None:
    try:
        from drills.core.watch import list_pages

        return list_pages(cluster.core.list_node, _request_timeout=_TIMEOUT_S)[0]  # in chunks, as kubectl lists
    except Exception as err:  # noqa: BLE001 — as above
        log.info("nodes not listed on %s: %s", getattr(cluster, "url", "?"), err)
        return None


def _gpus(node: dict) -> int:
    """GPUs a node has (capacity: a drill may have marked some unhealthy in allocatable)."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    total = 0
    for name, value in capacity.items():
        if name.endswith("/gpu"):
            try:
                total += int(str(value))
            except ValueError:
                continue
    return total
