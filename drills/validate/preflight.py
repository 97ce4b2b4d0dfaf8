"""`drills validate`: a read-only preflight of a target — profile, cluster, workloads, logs, switches,
storage and tools — one line per check, each failure saying what to do.

Nothing here writes: Kubernetes is only read (GET/LIST through the official client, user agent
`gpu-drills/… validate`), switches only get `show` commands, the checkpoint store is tested with
`os.access` (no probe file), locust is imported in a child process. On a freshly started twin the
workloads are still coming up, so checks that failed for a passing reason ("not Running yet") are
asked again until `settle_s` wall seconds passed; a real cluster is judged as it is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from drills.profile.model import TargetProfile
from drills.profile.safety import check_namespace_allowed, check_node_allowed
from drills.core.errors import DrillError

__all__ = ["Check", "selected_drills", "profile_checks", "cluster_checks", "settle", "ALL_DRILLS"]

log = logging.getLogger(__name__)

ALL_DRILLS = ("gpu-node-loss", "switch-uplink", "inference-pod-kill", "storage-saturation", "inference-rolling-restart",
              "inference-noisy-neighbour")
_AREA = {"gpu-node-loss": "training", "switch-uplink": "network", "inference-pod-kill": "inference",
         "storage-saturation": "storage", "inference-rolling-restart": "inference", "inference-noisy-neighbour": "inference"}
_SERVING_DRILLS = {"inference-pod-kill", "inference-rolling-restart", "inference-noisy-neighbour"}  # they load the endpoint
_TRAINING_DRILLS = {"gpu-node-loss", "switch-uplink", "storage-saturation", "inference-noisy-neighbour"}  # they read the job


@dataclass(frozen=True)
class Check:
    """One preflight verdict: `detail` says what was found (ok) or what to do (not ok). A `warn` check
    never fails the run; a `transient` failure may pass if asked again (the twin is still starting)."""

    name: str
    ok: bool
    detail: str
    warn: bool = False
    transient: bool = False

    @property
    def blocking(self) -> bool:
        return not self.ok and not self.warn

    def line(self) -> str:
        mark = "✓" if self.ok else ("⚠" if self.warn else "✗")
        return f"{mark} {self.name}: {self.detail}"


def selected_drills(markexpr: str | None, features: Path | None = None) -> list[str]:
    """Drill ids (catalog) whose feature tags match the pytest -m expression; all of them without one."""
    from drills.core.catalog import catalog

    drill_tags = {d.id: d.tag for d in catalog().values()}
    tags = {d: {tag, _AREA.get(d, tag)} for d, tag in drill_tags.items()}
    from drills.core.selection import drill_feature_files

    for path in map(Path, drill_feature_files(features or Path(__file__).resolve().parents[2] / "features")):
        first = next((ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()), "")
        names = {t.lstrip("@") for t in first.split() if t.startswith("@")}
        for drill_id, known in tags.items():
            if drill_tags[drill_id] in names:  # this drill's feature: its other tags select it too
                known |= names
    if not markexpr:
        return [d for d in tags if d in ALL_DRILLS] or list(tags)
    from _pytest.mark.expression import Expression

    try:
        expr = Expression.compile(markexpr)
    except Exception as err:  # pytest's ParseError
        raise DrillError(f"-m {markexpr!r}: not a valid marker expression ({err})") from None
    return [d for d, names in tags.items() if expr.evaluate(lambda name, **kw: not kw and name in names)]


def profile_checks(profile: TargetProfile, drills: Iterable[str]) -> list[Check]:
    """Allowlists non-empty and naming the workloads' namespaces; blast-radius caps big enough to run."""
    drills = set(drills)
    allow, caps, w = profile.safety.allow, profile.safety.blast_radius, profile.workloads
    out: list[Check] = []
    problems: list[str] = []
    if "gpu-node-loss" in drills:
        if not allow.nodes:
            problems.append("safety.allow.nodes is empty: add globs of the GPU nodes drills may cordon")
        problems += _namespace_problem(profile, w.training.namespace, "training")
    if drills & _SERVING_DRILLS:
        problems += _namespace_problem(profile, w.inference.namespace, "inference")
    if "inference-noisy-neighbour" in drills:  # the burst's jobs go where the training job runs
        problems += _namespace_problem(profile, w.training.namespace, "training burst")
    if "switch-uplink" in drills:
        if not allow.switches:
            problems.append("safety.allow.switches is empty: add the leaf switches drills may touch")
        if not allow.interfaces:
            problems.append("safety.allow.interfaces is empty: add the uplink interfaces drills may shut")
    if "storage-saturation" in drills and profile.storage.saturation.mode == "job":
        problems += _namespace_problem(profile, profile.storage.saturation.namespace, "fio Job")
    out.append(Check("safety allowlist", not problems,
                     "; ".join(problems) or f"covers the selected drills ({', '.join(sorted(drills)) or 'none'})"))
    short: list[str] = []
    if "gpu-node-loss" in drills and caps.max_nodes < 1:
        short.append("max_nodes is 0 (a node-loss drill needs 1)")
    if "inference-pod-kill" in drills and caps.max_pods < profile.faults.pods_to_kill:
        short.append(f"max_pods {caps.max_pods} < faults.pods_to_kill {profile.faults.pods_to_kill}")
    if "switch-uplink" in drills and caps.max_ports < 1:
        short.append("max_ports is 0 (an uplink drill needs 1)")
    out.append(Check("blast radius", not short,
                     "safety.blast_radius " + "; ".join(short) + ": raise the cap or drop the drill" if short else
                     f"max {caps.max_nodes} node(s), {caps.max_pods} pod(s), {caps.max_ports} port(s) per run"))
    return out


def cluster_checks(cluster, profile: TargetProfile, drills: Iterable[str], twin_info: dict | None = None) -> list[Check]:
    """API version, training job, inference Deployment/Service/endpoint/PDB, job nodes in the allowlist, the
    leaf labels of the job's nodes (uplink drill), the training log format against the workers' recent logs.
    Reads only."""
    from drills.validate.workloads import inference_checks, log_format_check, training_checks

    drills = set(drills)
    out = [_api_version(cluster)]
    if drills & _TRAINING_DRILLS:
        job_checks, pods = training_checks(cluster, profile.workloads.training)
        out += job_checks
        if "gpu-node-loss" in drills and pods:
            out.append(_nodes_allowed(cluster, profile, pods))
        if "switch-uplink" in drills and pods:
            out.append(_leaves(cluster, profile, pods, twin_info))
        if pods:
            out.append(log_format_check(cluster, profile.workloads.training, pods, twin=twin_info is not None))
    if drills & _SERVING_DRILLS:
        out += inference_checks(cluster, profile.workloads.inference, twin_info)
    return out


def settle(run: Callable[[], list[Check]], settle_s: float, poll_s: float = 1.0) -> list[Check]:
    """`run()` until no failure is transient or `settle_s` wall seconds passed; the last answer."""
    deadline = time.monotonic() + settle_s
    while True:
        checks = run()
        if not any(c.transient and c.blocking for c in checks) or time.monotonic() >= deadline:
            return [replace(c, transient=False) for c in checks]
        log.info("waiting for: %s", "; ".join(c.name for c in checks if c.transient and c.blocking))
        time.sleep(poll_s)


# -- helpers -----------------------------------------------------------------------------------
def _namespace_problem(profile: TargetProfile, namespace: str, what: str) -> list[str]:
    try:
        check_namespace_allowed(profile, namespace)
    except DrillError as err:
        return [f"{what}: {err}"]
    return []


def _api_version(cluster) -> Check:
    from kubernetes import client

    try:
        info = client.VersionApi(cluster.api).get_code(_request_timeout=5)
        return Check("Kubernetes API", True, f"{cluster.url} answers, {info.git_version}")
    except Exception as err:  # noqa: BLE001 — any failure is the same answer: no version
        return Check("Kubernetes API", False, f"{cluster.url} answers but /version failed ({type(err).__name__}); "
                     "check the API server and the kubeconfig user's permissions")


def _leaves(cluster, profile: TargetProfile, pods: list[dict], twin_info: dict | None) -> Check:
    from drills.faults.switch.target import switch_inventory
    from drills.validate.site import leaf_check

    try:
        inventory = switch_inventory(profile, twin_info)
    except DrillError:  # no inventory: the switch checks say so
        inventory = None
    return leaf_check(cluster, profile, sorted({p["node"] for p in pods if p.get("node")}), inventory)


def _nodes_allowed(cluster, profile: TargetProfile, pods: list[dict]) -> Check:
    nodes = sorted({p["node"] for p in pods if p.get("node")})
    refused = []
    for name in nodes:
        try:
            labels = dict(cluster.core.read_node(name).metadata.labels or {})
            check_node_allowed(profile, name, labels)
        except DrillError as err:
            refused.append(str(err))
        except Exception as err:  # noqa: BLE001 — an unreadable node cannot be judged
            refused.append(f"node {name}: cannot read it ({type(err).__name__})")
    return Check("job nodes allowed", not refused,
                 "; ".join(refused) or f"{', '.join(nodes)} are in safety.allow")
