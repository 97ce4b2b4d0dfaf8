# WARNING: makes DCGM report a GPU fault (an XID, or double-bit ECC errors) on one GPU of a node: whatever consumes
# DCGM (exporter, alerts, a health agent, remediation) acts on it as on a real fault. `revert` injects the healthy value.
"""A GPU fault injected with DCGM's field injection, in the node's DCGM host-engine pod (the seed's drill 1).

The fault contract (drills/faults/__init__.py): `plan(target, profile, node=)` finds the node's DCGM pod (by
label and spec.nodeName, in the profile's namespace: `faults.gpu_fault`, drills/profile/gpu_fault.py) and
chooses the GPU (`pick_gpu`: the profile's, else at random with a recorded seed); `inject` runs
`dcgmi test --inject` there (drills/faults/dcgm.py) and reads the value back with `dcgmi dmon` — a value that does
not read back is InjectionFailed, not a fault in place; `revert` injects the healthy value (0: no XID, no
error) into the same GPU of whichever DCGM pod runs on the node now (a restarted host engine starts with an
empty cache, and is cleared all the same); no DCGM pod on a node that still exists is RevertFailed (what
cannot be read is not healthy); `verify` reads it back. The fault is one field of one GPU: the GPU
itself keeps working, so what happens next is the platform's doing (drills/measure/gpu_chain.py).

DCGM's health system keeps a devastating XID it saw in its history until nv-hostengine restarts (NVIDIA/DCGM
modules/health/DcgmHealthWatch.cpp `m_gpuXidHistory`): a site whose health agent reads DCGM health (not the
field) may need its DCGM pod restarted after the drill; the read-back here is of the field.
"""

from __future__ import annotations

import logging
import random
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from drills.core.errors import InjectionFailed, RevertFailed
from drills.core.kube import obj_get
from drills.faults import NOTHING_TO_UNDO, REVERTED, Plan, Reach
from drills.faults.dcgm import INJECTED, DcgmPod, dmon_command, find_pod, inject_command, parse_dmon, run
from drills.faults.node_taints import read_node
from drills.faults.readback import Observation, Reading, read
from drills.profile.gpu_fault import GpuFault

__all__ = ["KIND", "HEALTHY", "GpuXidRecord", "pick_gpu", "gpu_fault_config", "plan", "inject", "revert", "verify"]

log = logging.getLogger(__name__)

KIND = "gpu-xid"
HEALTHY = 0  # the field's value for "no XID" / "no double-bit error"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuXidRecord:
    """Exactly what `inject` changed, and how it was read back."""

    node: str
    gpu: int
    field: int
    value: int
    namespace: str
    pod: str
    injected_at: str  # cluster time, ISO: the middle of the injecting exec
    seed: int | None  # the random choice's seed (None: the profile named the GPU)
    read_back: str  # "GPU 3 field 230 = 79 (dcgmi dmon in gpu-operator/nvidia-dcgm-x @ …)"

    def to_dict(self) -> dict:
        return asdict(self)


def pick_gpu(count: int, seed: int) -> int:
    """The GPU to fail among a node's `count`, from `seed` (recorded, so a run can be replayed). One small
    function on purpose: a project-wide random target choice can replace it."""
    return random.Random(seed).randrange(count)


def gpu_fault_config(profile) -> GpuFault:
    """The profile's `faults.gpu_fault`, or the GPU Operator's defaults (the twin's)."""
    return profile.faults.gpu_fault or GpuFault()


def plan(target, profile, *, node: str, gpu: int | None = None) -> Plan:
    """Read-only: the node exists, has GPUs and a DCGM pod; which GPU (`gpu`: the run's own random pick, else the
    profile's, else drawn here with a recorded seed); what the journal keeps."""
    from kubernetes.client.exceptions import ApiException

    cluster, cfg = target.cluster, gpu_fault_config(profile)
    try:
        current = read_node(cluster, node)
    except ApiException as err:
        raise InjectionFailed(f"cannot read node {node}: {err.status} {err.reason}; nothing injected") from None
    count = int(float(obj_get(current, "status", "capacity", GPU, default=0) or 0))
    if count <= 0:
        raise InjectionFailed(f"node {node} has no {GPU} capacity: no GPU to fail; nothing injected")
    pod = _dcgm_pod(cluster, cfg, node)
    if pod is None:
        raise InjectionFailed(f"no DCGM host-engine pod ({cfg.dcgm_selector} in {cfg.dcgm_namespace}"
                              f"{', container ' + cfg.dcgm_container if cfg.dcgm_container else ''}) runs on node "
                              f"{node}: nothing to inject into (faults.gpu_fault names it); nothing injected")
    seed = None
    if gpu is not None:  # drills run --random/--replay chose it (fixtures/picks.py records the choice)
        if not 0 <= gpu < count:
            raise InjectionFailed(f"GPU {gpu} is not a GPU of node {node} (it has {count}); nothing injected")
    elif cfg.gpu is not None:
        if cfg.gpu >= count:
            raise InjectionFailed(f"faults.gpu_fault.gpu {cfg.gpu} is not a GPU of node {node} (it has {count}); "
                                  "nothing injected")
        gpu = cfg.gpu
    else:
        seed = cfg.seed if cfg.seed is not None else random.SystemRandom().randrange(2 ** 32)
        gpu = pick_gpu(count, seed)
    undo = {"node": node, "namespace": pod.namespace, "pod": pod.name, "container": pod.container,
            "selector": cfg.dcgm_selector, "gpu": gpu, "field": cfg.field, "value": cfg.value, "healthy": HEALTHY,
            "seed": seed}
    labels = obj_get(current, "metadata", "labels", default=None) or {}
    what = f"inject DCGM field {cfg.field} = {cfg.value} on GPU {gpu} of node {node} (dcgmi in {pod.namespace}/{pod.name})"
    return Plan(KIND, f"{node}/gpu{gpu}", what, undo, Reach(nodes=((node, labels),), namespaces=(pod.namespace,)),
                spec=pod)


def inject(target, plan: Plan) -> GpuXidRecord:
    """Inject the value, then read it back from DCGM; InjectionFailed when either does not hold."""
    cluster, undo, pod = target.cluster, plan.undo, plan.spec
    before = cluster.clock.timestamp()
    code, out, err = run(cluster, pod, inject_command(undo["gpu"], undo["field"], undo["value"]))
    after = cluster.clock.timestamp()
    if code != 0 or INJECTED not in out:
        raise InjectionFailed(f"dcgmi test --inject in {pod.namespace}/{pod.name} exited {code}: "
                              f"{(out + err).strip()[:200] or 'no output'}")
    seen = _read(cluster, pod, undo["gpu"], undo["field"])
    if not seen.found or seen.value != undo["value"]:
        raise InjectionFailed(f"DCGM does not read back the injected value: {seen.sentence}")
    at = datetime.fromtimestamp((before + after) / 2, timezone.utc)
    log.info("injected DCGM field %s = %s on GPU %s of %s", undo["field"], undo["value"], undo["gpu"], undo["node"])
    return GpuXidRecord(node=undo["node"], gpu=undo["gpu"], field=undo["field"], value=undo["value"],
                        namespace=pod.namespace, pod=pod.name, injected_at=cluster.clock.iso(at), seed=undo.get("seed"),
                        read_back=seen.sentence)


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Inject the healthy value into the same GPU of the node's DCGM pod (found again: it may have restarted)."""
    from kubernetes.client.exceptions import ApiException

    cluster = target.cluster
    pod = _pod_now(cluster, undo)
    if pod is None:
        try:
            read_node(cluster, undo["node"])
        except ApiException as err:
            if err.status == 404:  # the node is gone, and its host engine with its cache: nothing of ours is left
                log.warning("node %s is gone: nothing to undo", undo["node"])
                return NOTHING_TO_UNDO
            raise RevertFailed(f"cannot read node {undo['node']}: {err.status} {err.reason}; run `drills revert` "
                               "again once the API answers") from None
        raise RevertFailed(f"no DCGM pod ({undo['selector']} in {undo['namespace']}) runs on node {undo['node']} now: "
                           f"the value injected into GPU {undo['gpu']} cannot be cleared or read; run `drills revert` "
                           "again once it runs")
    code, out, err = run(cluster, pod, inject_command(undo["gpu"], undo["field"], undo["healthy"]))
    if code != 0 or INJECTED not in out:
        raise RevertFailed(f"dcgmi test --inject of the healthy value in {pod.namespace}/{pod.name} exited {code}: "
                           f"{(out + err).strip()[:200] or 'no output'}; run `drills revert` again")
    log.info("reverted DCGM field %s on GPU %s of %s", undo["field"], undo["gpu"], undo["node"])
    return REVERTED


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read the field back: healthy (0, or no value at all) on the node's DCGM pod."""
    return read(KIND, f"{undo['node']}/gpu{undo['gpu']}", lambda: _read_back(target.cluster, undo))


@dataclass(frozen=True)
class _Seen:
    value: int | None
    sentence: str
    found: bool = True  # dmon printed a row for the GPU (False: the exec failed or the output was not dmon's)


def _read(cluster, pod: DcgmPod, gpu: int, field: int) -> _Seen:
    code, out, err = run(cluster, pod, dmon_command(gpu, field))
    found, value = parse_dmon(out, gpu) if code == 0 else (False, None)
    source = f"dcgmi dmon in {pod.namespace}/{pod.name} @ {cluster.clock.iso(cluster.clock.now())}"
    if not found:
        return _Seen(None, f"GPU {gpu} field {field} unreadable (exit {code}: {(out + err).strip()[:120]}; {source})",
                     found=False)
    return _Seen(value, f"GPU {gpu} field {field} = {'N/A' if value is None else value} ({source})")


def _read_back(cluster, undo: dict) -> tuple[list[Observation], tuple[str, ...]]:
    pod = _pod_now(cluster, undo)
    what = f"node {undo['node']} GPU {undo['gpu']}"
    if pod is None:
        return [Observation(what, "no DCGM pod on the node: its cache cannot be read",
                            f"pods -n {undo['namespace']} -l {undo['selector']} on {undo['node']}", False)], ()
    seen = _read(cluster, pod, undo["gpu"], undo["field"])
    healthy = seen.found and seen.value in (None, undo["healthy"])
    return [Observation(what, seen.sentence, f"{pod.namespace}/{pod.name}", healthy)], ()


def _pod_now(cluster, undo: dict) -> DcgmPod | None:
    return find_pod(cluster, undo["namespace"], undo["selector"], undo.get("container"), undo["node"])


DCGM_START_S = 120.0  # cluster seconds a node's DCGM pod may take to be Running (a DaemonSet pod still starting)


def _dcgm_pod(cluster, cfg, node: str):
    """The node's DCGM pod, waited for while one is still starting (a twin just up, a node just joined): read
    again on the cluster's clock until it runs or DCGM_START_S pass; None when none runs by then."""
    import time

    deadline = cluster.clock.deadline(DCGM_START_S, wall_floor_s=5.0)
    while True:
        pod = find_pod(cluster, cfg.dcgm_namespace, cfg.dcgm_selector, cfg.dcgm_container, node)
        if pod is not None or cluster.clock.timestamp() >= deadline:
            return pod
        time.sleep(0.05)
