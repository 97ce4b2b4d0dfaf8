"""Whether the training job's processes use the GPUs their pods were given (the seed's §5.1, read-only).

A pod can hold its GPUs while its process runs on the CPU — a driver/CUDA mismatch, a launcher that hides the
devices (`CUDA_VISIBLE_DEVICES=`), an image without the CUDA build of torch. Volcano says Running, the step lines
flow (slowly), and a drill rehearsed on it proves nothing about GPU training. Two keys, read per Running worker:

- non-text, from the driver: `nvidia-smi --query-gpu=utilization.gpu --format=csv` and `nvidia-smi
  --query-compute-apps=pid,used_memory --format=csv`, exec'd in the worker's container (the container sees
  exactly the GPUs it was given): a GPU job holds its GPUs with compute processes and keeps them busy;
- text, the job's own log: torch's `UserWarning: CUDA initialization: …` — what c10 prints when CUDA cannot
  initialise and `torch.cuda.is_available()` turns False (c10/cuda/CUDAFunctions.cpp; real lines in
  tests/data/real/cuda/torch-cuda-init-*.log). It is printed once, at start: the head of the log is read.

Reading only; the judgement is drills/verdicts/steady.py `gpu_use_reading`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from drills.core.podexec import exec_in_pod
from drills.core.errors import ToolOutputError
from drills.measure.accept.nvidia_smi import COMPUTE_APPS_QUERY, UTILIZATION_QUERY, parse_compute_apps, parse_utilization

__all__ = ["WorkerGpuUse", "read_gpu_use", "cuda_unavailable", "LOG_HEAD_BYTES"]

log = logging.getLogger(__name__)

LOG_HEAD_BYTES = 256 * 1024  # torch warns once, when the process starts: the head of the log holds it
# Python's warning line for c10's TORCH_WARN("CUDA initialization: ", msg): `<file>:<line>: UserWarning: CUDA
# initialization: <msg> (Triggered internally at <path>/CUDAFunctions.cpp:<n>.)`, with any prefix a log shipper adds
_CUDA_INIT = re.compile(r"UserWarning: CUDA initialization: (?P<cause>.+?)(?:\s+\(Triggered internally at [^)]*\))?\s*$")


@dataclass(frozen=True)
class WorkerGpuUse:
    """One Running worker: the GPUs it was given, what nvidia-smi said of them, and the log's CUDA line."""

    pod: str
    node: str
    gpus: int  # its container's nvidia.com/gpu limit
    utilization: tuple[int, ...] | None  # per GPU, %; None: not read (why in `smi_error`)
    apps: tuple[tuple[int, int | None], ...] | None  # (pid, MiB) per compute process; None: not read
    smi_error: str = ""
    cuda_line: str | None = None  # torch's "CUDA initialization: …" cause, when the log has one
    log_error: str = ""

    @property
    def source(self) -> str:
        return (f"pods/exec {self.pod} on {self.node}: {' '.join(UTILIZATION_QUERY)}; "
                f"{' '.join(COMPUTE_APPS_QUERY)}; pods/log {self.pod} (first {LOG_HEAD_BYTES // 1024} KiB)")


def read_gpu_use(cluster, workload) -> tuple[list[WorkerGpuUse], str]:
    """Every Running worker of `workload`'s job, read; (readings, what was listed — for a reading of none)."""
    from drills.measure.steady import JOB_LABEL

    resp = cluster.core.list_namespaced_pod(workload.namespace, label_selector=f"{JOB_LABEL}={workload.job}",
                                            _preload_content=False)
    pods = [p for p in json.loads(resp.data).get("items", [])
            if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    listed = f"pods -l {JOB_LABEL}={workload.job} in {workload.namespace}: {len(pods)} Running"
    return [_worker(cluster, workload, p) for p in sorted(pods, key=lambda p: p["metadata"]["name"])], listed


def cuda_unavailable(text: str) -> str | None:
    """The cause torch gave for CUDA not initialising (the first such warning line), or None."""
    for line in text.splitlines():
        if (m := _CUDA_INIT.search(line)):
            return m["cause"].strip()
    return None


def _worker(cluster, workload, pod: dict) -> WorkerGpuUse:
    name, ns = pod["metadata"]["name"], workload.namespace
    container = workload.container or pod["spec"]["containers"][0]["name"]
    spec = next((c for c in pod["spec"]["containers"] if c["name"] == container), pod["spec"]["containers"][0])
    limit = ((spec.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", "0")
    gpus = int(limit) if str(limit).isdigit() else 0
    utilization = apps = None
    smi_error = ""
    try:
        util_out = _run(cluster, ns, name, container, UTILIZATION_QUERY)
        apps_out = _run(cluster, ns, name, container, COMPUTE_APPS_QUERY)
        utilization, apps = parse_utilization(util_out), parse_compute_apps(apps_out)
    except ToolOutputError as err:
        smi_error = str(err)
    cuda_line, log_error = None, ""
    try:
        kwargs = {"limit_bytes": LOG_HEAD_BYTES, "_preload_content": False, "container": container}
        text = cluster.core.read_namespaced_pod_log(name, ns, **kwargs).data.decode("utf-8", errors="replace")
        cuda_line = cuda_unavailable(text)
    except Exception as err:  # noqa: BLE001 — an unread log is named, never taken as clean
        log_error = f"log not read: {str(err).splitlines()[0] if str(err) else err}"
    return WorkerGpuUse(name, pod["spec"].get("nodeName", "?"), gpus, utilization, apps, smi_error, cuda_line,
                        log_error)


def _run(cluster, ns: str, pod: str, container: str, command: list[str]) -> str:
    """nvidia-smi's answer; ToolOutputError (naming the command, its exit code and first line) otherwise."""
    code, out, err = _exec_in(cluster, ns, pod, container, command)
    if code != 0:
        said = (err or out).strip()
        raise ToolOutputError(f"`{' '.join(command)}` exited {code}: {said.splitlines()[0] if said else 'no output'}")
    return out


def _exec_in(cluster, ns: str, pod: str, container: str, command: list[str]) -> tuple[int, str, str]:
    return exec_in_pod(cluster, ns, pod, command, container)


