"""fio for other machines: the batch/v1 Job of `job` mode and the job file and command of `clients` mode.

Pure renderers from a `SaturationSpec`: nothing here talks to a cluster or starts a process
(drills/faults/storage/job.py applies the Job, drills/faults/storage/clients.py runs the command).
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from drills.core.errors import InvalidProfile
from drills.faults.storage.spec import LABELS, SaturationSpec, fio_jobs, remote_job
from drills.faults.storage.sweep import files_root
from drills.profile.images import check_image

__all__ = ["render_fio_job", "render_jobfile", "clients_argv", "fio_security_context"]

log = logging.getLogger(__name__)


def render_fio_job(spec: SaturationSpec) -> dict[str, Any]:
    """The batch/v1 Job for `job` mode: `parallelism` pods, each running fio in its own directory of the PVC."""
    if not spec.claim:
        raise InvalidProfile("storage saturation job mode needs the store's PersistentVolumeClaim (claim)")
    try:
        check_image(spec.image, digest=True)
    except ValueError as err:
        raise InvalidProfile(f"storage.saturation.image {err}") from None
    workdir = f"{files_root(spec.mount_path, spec.job_name)}/$(POD_NAME)"  # kubelet expands $(POD_NAME)
    job = remote_job(fio_jobs(spec, "$D")[0], spec)
    argv = ["fio", "--output-format=json", *job.to_argv()]
    fio_cmd = " ".join(shlex.quote(a) if a != "--directory=$D" else '--directory="$D"' for a in argv)
    script = "\n".join([
        f"D={shlex.quote(workdir)}",
        'mkdir -p "$D"',
        # pod deletion: stop fio, remove its files; sh is PID 1 and only gets SIGTERM with a trap
        """trap 'kill -TERM $FIO 2>/dev/null; wait $FIO; rm -rf "$D"; exit 143' TERM INT""",
        f"{fio_cmd} &",
        "FIO=$!",
        "wait $FIO; rc=$?",
        'rm -rf "$D"',
        "exit $rc",
    ])
    labels = {**LABELS, "job-name": spec.job_name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.job_name, "namespace": spec.namespace, "labels": dict(LABELS)},
        "spec": {
            "parallelism": spec.parallelism,
            "completions": spec.parallelism,
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(spec.max_seconds) + 120,  # the cluster's own safety net
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    # spread over nodes: the point is load from several storage clients (per node: required)
                    "affinity": {"podAntiAffinity": _anti_affinity(spec)},
                    "securityContext": _pod_security_context(spec),
                    "containers": [{
                        "name": "fio",
                        "image": spec.image,
                        "command": ["/bin/sh", "-c", script],
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "store", "mountPath": spec.mount_path}],
                        "securityContext": fio_security_context(spec),
                        **({"resources": {k: dict(v) for k, v in spec.resources}} if spec.resources else {}),
                    }],
                    "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": spec.claim}}],
                    **({"tolerations": [dict(t) for t in spec.tolerations]} if spec.tolerations else {}),
                    **({"nodeSelector": dict(spec.node_selector)} if spec.node_selector else {}),
                    **({"priorityClassName": spec.priority_class_name} if spec.priority_class_name else {}),
                },
            },
        },
    }


def fio_security_context(spec: SaturationSpec) -> dict[str, Any]:
    """The fio container's securityContext, Pod Security "restricted" (drills/schedule/podsecurity.py): not root,
    no privilege escalation, no capability, a read-only root file system — fio writes only in its directory on the
    store's volume (the script's `D`, under `mount_path`) and to stdout."""
    return {"runAsNonRoot": True, "runAsUser": spec.run_as_user, "runAsGroup": spec.run_as_group,
            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def render_jobfile(spec: SaturationSpec) -> str:
    """The job file `clients` mode sends to every fio server (paths are the servers' own)."""
    return "".join(remote_job(job, spec, unlink=True).to_jobfile() for job in fio_jobs(spec, spec.directory))


def clients_argv(spec: SaturationSpec, jobfile: str | Path | list[str | Path], output: str | Path | None = None,
                 binary: str = "fio") -> list[str]:
    """The controlling command for `clients` mode: one `--client=<host> <jobfile>` pair per storage client.
    `jobfile` is one file for every client, or one per client (each writing in its own directory)."""
    if not spec.clients:
        raise InvalidProfile("storage saturation clients mode needs at least one client host (clients)")
    files = list(jobfile) if isinstance(jobfile, list) else [jobfile] * len(spec.clients)
    if len(files) != len(spec.clients):
        raise InvalidProfile(f"clients mode: {len(files)} job files for {len(spec.clients)} clients")
    argv = [binary, "--output-format=json"] + ([f"--output={output}"] if output else [])
    for host, file in zip(spec.clients, files):
        argv += [f"--client={host}", str(file)]
    return argv


def _pod_security_context(spec: SaturationSpec) -> dict[str, Any]:
    """The pod's: the same user, and the store's volume group-writable through fsGroup where its type supports it
    (ownership changed only when the volume's root does not match: a large store is not walked at every start)."""
    sc: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": spec.run_as_user, "runAsGroup": spec.run_as_group,
                          "seccompProfile": {"type": "RuntimeDefault"}}
    if spec.fs_group is not None:
        sc.update(fsGroup=spec.fs_group, fsGroupChangePolicy="OnRootMismatch")
    return sc


def _anti_affinity(spec: SaturationSpec) -> dict[str, Any]:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"job-name": spec.job_name}}}
    if spec.per_node:
        return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}
