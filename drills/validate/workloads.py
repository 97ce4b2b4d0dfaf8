"""`drills validate`, the workloads: the training Volcano job and its logs, the inference Deployment,
its Service, endpoint and PDB. Reads only (GET/LIST and HTTP GETs of the endpoint)."""

from __future__ import annotations

import logging

from drills.profile.model import InferenceWorkload, TrainingWorkload
from drills.validate.preflight import Check

__all__ = ["training_checks", "log_format_check", "inference_checks", "MIN_JOB_NODES"]

log = logging.getLogger(__name__)

MIN_JOB_NODES = 2
_VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")
_JOB_LABEL = "volcano.sh/job-name"
_LOG_TAIL = 5000  # lines per worker: a checkpoint every 2000 steps should fall inside
_HEALTH_PATHS = ("/health", "/v1/models")


def training_checks(cluster, w: TrainingWorkload) -> tuple[list[Check], list[dict]]:
    """The Volcano job exists and is Running on ≥ 2 nodes; also its running workers (name, node, container)."""
    from kubernetes.client.exceptions import ApiException

    name = f"training job {w.namespace}/{w.job}"
    try:
        job = cluster.custom.get_namespaced_custom_object(*_VOLCANO[:2], w.namespace, _VOLCANO[2], w.job)
    except ApiException as err:
        if err.status == 404:
            return [Check("training job", False, f"{name} not found (Volcano jobs.batch.volcano.sh): set "
                          "workloads.training.job and namespace in the profile to the job drills should watch")], []
        return [Check("training job", False, f"cannot read {name}: {err.status} {err.reason}; "
                      "grant get on jobs.batch.volcano.sh")], []
    phase = ((job.get("status") or {}).get("state") or {}).get("phase") or "unknown"
    pods = cluster.core.list_namespaced_pod(w.namespace, label_selector=f"{_JOB_LABEL}={w.job}").items
    running = [{"name": p.metadata.name, "node": p.spec.node_name,
                "container": w.container or (p.spec.containers[0].name if p.spec.containers else None)}
               for p in pods if p.status.phase == "Running" and p.spec.node_name]
    nodes = sorted({p["node"] for p in running})
    if phase != "Running":
        return [Check("training job", False, f"{name} is {phase}, not Running: start it (or wait until it runs) "
                      "before drilling", transient=phase in ("Pending", "Restarting", "unknown"))], running
    if len(nodes) < MIN_JOB_NODES:
        return [Check("training job", False, f"{name} is Running on {len(nodes)} node(s); the drills need it on "
                      f"at least {MIN_JOB_NODES} nodes", transient=True)], running
    return [Check("training job", True, f"{name} Running on {len(nodes)} nodes ({', '.join(nodes)})")], running


def log_format_check(cluster, w: TrainingWorkload, pods: list[dict], twin: bool = False) -> Check:
    """The profile's log format finds a step line and a checkpoint line in the workers' recent logs;
    when it does not, name the preset that would."""
    from drills.measure.logformats import PRESETS, parse_lines, preset
    from drills.measure.logread import LogReader

    lines: list[str] = []
    for pod in pods[:2]:
        try:
            text = cluster.core.read_namespaced_pod_log(pod["name"], w.namespace, container=pod["container"],
                                                        tail_lines=_LOG_TAIL, _request_timeout=30)
        except Exception as err:  # noqa: BLE001 — an unreadable log is the check's answer
            return Check("training log format", False, f"cannot read the log of {w.namespace}/{pod['name']} "
                         f"({type(err).__name__}); grant get on pods/log")
        lines += str(text or "").splitlines()
    reader = LogReader(w.log_parser())
    found = _kinds([e for line in lines for e in reader.feed(line)] + reader.close())
    seen = (f"; detected {reader.framework or 'no known framework'}, {reader.unclassified} of {len(lines)} "
            "line(s) not classified")
    if {"step", "checkpoint_saved"} <= found.keys():
        return Check("training log format", True, f"{w.log_format}: {found['step']} step line(s), "
                     f"{found['checkpoint_saved']} checkpoint line(s) in the workers' last {_LOG_TAIL} lines{seen}")
    if {"step", "resumed"} <= found.keys():  # restarted (a drill, a fault) and not saved since: not a wrong format
        return Check("training log format", False, f"{w.log_format}: {found['step']} step line(s) and the job's resume "
                     f"line, but no checkpoint saved since it restarted{seen}; the next save will show whether "
                     "checkpoint lines are read", warn=True)
    missing = " and ".join(k.replace("checkpoint_saved", "checkpoint") for k in ("step", "checkpoint_saved")
                           if k not in found)
    fits = [n for n in PRESETS if n != w.log_format and {"step", "checkpoint_saved"} <= _kinds(parse_lines(preset(n), lines)).keys()]
    if fits:
        todo = f"set workloads.training.log_format: {fits[0]}"
    elif not lines:
        todo = "the workers logged nothing yet; check the job's container (workloads.training.container)"
    else:
        todo = ("no preset reads them either: choose the closest preset (twin, hf-trainer, megatron, deepspeed) and "
                "add workloads.training.log_patterns for step / checkpoint_saved, or wait for a checkpoint")
    return Check("training log format", False, f"{w.log_format} finds no {missing} line in {len(lines)} recent "
                 f"log lines{seen}: {todo}", transient=twin and not fits)  # a wrong preset stays wrong


def inference_checks(cluster, w: InferenceWorkload, twin_info: dict | None) -> list[Check]:
    """The Deployment has its desired replicas Ready, its Service has endpoints and the endpoint answers,
    a PDB covers its pods (a warning when none does)."""
    from kubernetes.client.exceptions import ApiException

    name = f"Deployment {w.namespace}/{w.deployment}"
    try:
        dep = cluster.apps.read_namespaced_deployment(w.deployment, w.namespace)
    except ApiException as err:
        why = ("not found: set workloads.inference.deployment and namespace in the profile" if err.status == 404
               else f"cannot be read ({err.status} {err.reason})")
        return [Check("inference deployment", False, f"{name} {why}")]
    desired, ready = dep.spec.replicas or 0, dep.status.ready_replicas or 0
    if desired == 0:
        out = [Check("inference deployment", False, f"{name} is scaled to 0 replicas: nothing serves; scale it up "
                     f"(kubectl -n {w.namespace} scale deployment {w.deployment} --replicas=2) before drilling")]
    elif ready < desired:
        out = [Check("inference deployment", False, f"{name} has {ready}/{desired} replicas Ready: wait for the "
                     "rollout or fix the failing pods", transient=True)]
    else:
        out = [Check("inference deployment", True, f"{name} {ready}/{desired} replicas Ready")]
    out.append(_endpoint(cluster, w, twin_info, transient=0 < ready < desired or (desired > 0 and ready == 0)))
    out.append(_pdb(cluster, w, dict(dep.spec.template.metadata.labels or {})))
    return out


# -- helpers -----------------------------------------------------------------------------------
def _kinds(events) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    return counts


def _endpoint(cluster, w: InferenceWorkload, twin_info: dict | None, transient: bool) -> Check:
    import requests
    from kubernetes.client.exceptions import ApiException

    try:
        eps = cluster.core.read_namespaced_endpoints(w.service, w.namespace)
        addresses = sum(len(s.addresses or []) for s in (eps.subsets or []))
    except ApiException as err:
        why = "not found: set workloads.inference.service" if err.status == 404 else f"{err.status} {err.reason}"
        return Check("inference endpoint", False, f"Service {w.namespace}/{w.service} endpoints {why}")
    url = (twin_info or {}).get("gateway") if w.endpoint == "from-twin" else w.endpoint
    if not url:
        return Check("inference endpoint", False, "workloads.inference.endpoint is from-twin but the target is no "
                     "twin: set the endpoint's http(s) URL")
    answers = []
    for path in _HEALTH_PATHS:
        try:
            resp = requests.get(url.rstrip("/") + path, timeout=5)
        except requests.RequestException as err:
            answers.append(f"GET {path}: {type(err).__name__}")
            continue
        if resp.ok:
            return Check("inference endpoint", addresses > 0,
                         f"{url}{path} answers {resp.status_code}; Service {w.service} has {addresses} ready "
                         "address(es)" + ("" if addresses else ": no Ready pod behind the Service"))
        answers.append(f"GET {path}: {resp.status_code}")
    return Check("inference endpoint", False, f"{url} does not answer ({'; '.join(answers)}); Service {w.service} has "
                 f"{addresses} ready address(es): check the Deployment's pods and the endpoint URL", transient=transient)


def _pdb(cluster, w: InferenceWorkload, labels: dict[str, str]) -> Check:
    try:
        pdbs = cluster.policy.list_namespaced_pod_disruption_budget(w.namespace).items
    except Exception as err:  # noqa: BLE001 — an unreadable PDB list is only a warning
        return Check("inference PDB", False, f"cannot list PodDisruptionBudgets ({type(err).__name__})", warn=True)
    for pdb in pdbs:
        match = (pdb.spec.selector.match_labels or {}) if pdb.spec.selector else {}
        if match and all(labels.get(k) == v for k, v in match.items()):
            return Check("inference PDB", True, f"{pdb.metadata.name} covers the serving pods")
    return Check("inference PDB", False, f"no PodDisruptionBudget covers {w.namespace}/{w.deployment}'s pods: a drain "
                 "may take every replica at once; add one (minAvailable: 1)", warn=True)
