"""fio containers on the twin: a pod whose container runs fio (the storage drill's saturation Job) runs the
real fio, here, against the twin's checkpoint store, and ends as the container would — fio's JSON report
printed to the pod's log, then the container exits with fio's code.

The container is recognised by its command: a shell script with a line `fio --output-format=json …`
(drills/faults/storage/remote.py renders it), or a command whose program is fio. That fio line runs with:
- `--directory` → a folder of its own under the twin's store (its PVC is the store), removed afterwards;
- `--runtime` in twin time: the twin runs fio for runtime / scale wall seconds (at least one second),
  so a saturation ends when the cluster's clock says it does;
- the twin's store adapting the I/O path as a real node's kernel would not need to: a FUSE mount has no
  O_DIRECT (`--direct=0` there) and a missing libaio falls back to psync.
A container that may not create its directory on the store — its uid/gid/fsGroup against the store's owner, mode
and whether it applies fsGroup (twin profile `storage`, workloads/volume_access.py) — fails as busybox's
`mkdir -p` does, before fio starts (defect store-ignores-fsgroup); so does one whose directory is not on a volume
while its root file system is read-only.
fio writes where the script's `D=` says, on the volume (`{mount}/.drills-fio-{job}/{pod}` is
`.drills-fio-{job}/{pod}` in the store), so a reader pod mounting the store sees it; like the script, fio's end
removes that directory and leaves the Job's parent directory.
A pod deleted while fio runs stops it (SIGTERM, as the kubelet would: the trap removes its directory) and its log is
gone with it — unless the twin profile says `storage.fio_stop: killed`: fio ignores SIGTERM, the kubelet kills the
container, the trap never runs and fio's files stay on the store; `hung` (defect fio-files-left) also makes the first
fio pod of each Job hang once its I/O is done — no report, no exit — until its pod is deleted (then killed as above).
The store's modelled bandwidth is shared with the probe and the training job, as on a real store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import shlex
import shutil
from pathlib import Path
from typing import Any, Hashable

from drills.twin.workloads.hub import hub_for
from drills.twin.workloads.process_pods import ProcessPodController
from drills.twin.workloads.volume_access import VolumeRoot, denied_line, identity, may_create

__all__ = ["FioPodController", "fio_command"]

log = logging.getLogger(__name__)

_RUNTIME = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT_S = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}


def fio_command(pod: dict) -> tuple[str, list[str]] | None:
    """(container name, fio's arguments) of the pod's first container that runs fio with a JSON report; None
    if none does."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        lines = [argv[2]] if argv[:2] in (["/bin/sh", "-c"], ["sh", "-c"]) and len(argv) > 2 else [shlex.join(argv)]
        for text in lines:
            for line in text.splitlines():
                line = line.strip().removesuffix("&").strip()
                if line.startswith("fio ") and "--output-format=json" in line:
                    try:
                        return container["name"], shlex.split(line)[1:]
                    except ValueError:
                        return None
    return None


class FioPodController(ProcessPodController):
    name = "fio-pods"

    def __init__(self, ctx: Any):
        super().__init__(ctx)
        self.hub = hub_for(ctx.twin)  # type: ignore[attr-defined]
        self._hung: set[tuple[str, str]] = set()  # (namespace, Job) whose first fio pod hangs (fio_stop: hung)

    def command(self, pod: dict) -> Any:
        return fio_command(pod)

    def launch(self, key: Hashable, pod: dict) -> asyncio.Task:
        return asyncio.create_task(self._run_fio(pod), name=f"fio:{key}")

    async def _run_fio(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        container, args = fio_command(pod)  # type: ignore[misc]
        fs_group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        target, on_volume = _target_dir(pod, container, args)
        if not on_volume and _read_only_root(pod, container):
            await self._finish(ns, name, container, denied_line(target, "Read-only file system") + "\n", 1)
            return
        if not may_create(identity(pod, container), VolumeRoot.from_storage(self.hub.storage), fs_group):
            await self._finish(ns, name, container, denied_line(target) + "\n", 1)
            return
        stop = self.hub.storage.fio_stop if self.hub.storage is not None else "trap"
        job = ((pod["metadata"].get("labels") or {}).get("job-name"), ns)
        hang = stop == "hung" and job[0] is not None and job not in self._hung
        if hang:
            self._hung.add(job)
        below = _volume_relpath(pod, container)
        workdir = Path(self.hub.store_root) / (below or f".drills-fio-pod-{ns}-{name}")
        workdir.mkdir(parents=True, exist_ok=True)
        argv = ["fio", *self._adapt(args, workdir)]
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:
            killed = stop in ("killed", "hung")
            if proc.returncode is None:
                proc.kill() if killed else proc.terminate()  # killed: SIGTERM ignored, SIGKILL after the grace
                await proc.wait()
            if not killed:  # the script's trap: `rm -rf "$D"` (its own directory; the Job's parent stays)
                self._remove(workdir)
            raise
        if hang:  # stuck after its I/O: no report, no exit, its files in place until the kubelet kills it
            log.info("fio in pod %s/%s hangs (twin storage.fio_stop: hung)", ns, name)
            await asyncio.Event().wait()
        self._remove(workdir)
        text = out.decode(errors="replace") + ("" if proc.returncode == 0 else err.decode(errors="replace"))
        await self._finish(ns, name, container, text, int(proc.returncode or 0))

    def _remove(self, workdir: Path) -> None:
        """The script's `rm -rf "$D"`; a store that refuses unlinking (storage.unlink_denied) keeps the files."""
        if self.hub.storage is None or not self.hub.storage.unlink_denied:
            shutil.rmtree(workdir, ignore_errors=True)

    async def _finish(self, ns: str, name: str, container: str, text: str, code: int) -> None:
        """The container's output into the pod's log, then its exit."""
        client = self.ctx.client
        base = f"{client.base_url}/twin/v1/namespaces/{ns}/pods/{name}"
        async with client.session.post(f"{base}/log", params={"container": container}, data=text,
                                       headers={"Content-Type": "text/plain"}) as resp:
            if resp.status >= 400:
                log.debug("fio log of %s/%s: HTTP %s", ns, name, resp.status)
        exit_body = {"code": code, "reason": "Completed" if code == 0 else "Error", "container": container}
        async with client.session.post(f"{base}/exit", json=exit_body) as resp:
            if resp.status >= 400:
                log.debug("fio exit of %s/%s: HTTP %s", ns, name, resp.status)
        log.info("fio in pod %s/%s ended with code %d", ns, name, code)

    def _adapt(self, args: list[str], workdir: Path) -> list[str]:
        from drills.faults.storage.fio import available_ioengines, supports_direct

        direct_ok = supports_direct(workdir)
        engines = available_ioengines()
        out = []
        for arg in args:
            key, _, value = arg.partition("=")
            if key == "--directory":
                arg = f"--directory={workdir}"
            elif key == "--runtime":
                arg = f"--runtime={self._wall_seconds(value)}"
            elif key == "--direct" and value == "1" and not direct_ok:
                arg = "--direct=0"
            elif key == "--ioengine" and value not in engines:
                arg = "--ioengine=psync"
            elif key == "--output":
                continue
            out.append(arg)
        return out

    def _wall_seconds(self, value: str) -> int:
        match = _RUNTIME.match(value.strip())
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)] if match else 60.0
        return max(1, math.ceil(seconds / self.ctx.clock.scale))


def _read_only_root(pod: dict, container: str) -> bool:
    spec = next((c for c in pod["spec"]["containers"] if c.get("name") == container), {})
    return bool((spec.get("securityContext") or {}).get("readOnlyRootFilesystem"))


def _volume_relpath(pod: dict, container: str) -> str | None:
    """The script's `D=` (with the kubelet's $(POD_NAME) expanded) relative to the volume it lies on, or None when
    it names none, lies on no volume, or steps up (`..`)."""
    spec = next((c for c in pod["spec"]["containers"] if c.get("name") == container), {})
    argv = list(spec.get("command") or []) + list(spec.get("args") or [])
    line = next((x for x in (argv[2] if len(argv) > 2 else "").splitlines() if x.startswith("D=")), None)
    try:
        (target,) = shlex.split(line[2:]) if line else ("",)
    except ValueError:
        return None
    target = target.replace("$(POD_NAME)", pod["metadata"]["name"])
    for mount in sorted((m.get("mountPath", "").rstrip("/") for m in spec.get("volumeMounts") or []), key=len,
                        reverse=True):
        if mount and target.startswith(mount + "/"):
            parts = [p for p in target[len(mount) + 1:].split("/") if p]
            return "/".join(parts) if parts and ".." not in parts else None
    return None


def _target_dir(pod: dict, container: str, args: list[str]) -> tuple[str, bool]:
    """The first directory the container would create for fio (the script's `D=` of the Job drills renders, or
    fio's `--directory`): its first component below the volume it lies on — what `mkdir -p` names when the
    volume's root refuses it — and whether it lies on a volume at all (else on the image's root file system)."""
    spec = next((c for c in pod["spec"]["containers"] if c.get("name") == container), {})
    argv = list(spec.get("command") or []) + list(spec.get("args") or [])
    target = next((a.partition("=")[2] for a in args if a.startswith("--directory=")), "")
    for line in (argv[2] if len(argv) > 2 else "").splitlines():
        if line.startswith("D="):
            try:
                (target,) = shlex.split(line[2:])
            except ValueError:
                pass
            break
    target = target.replace("$(POD_NAME)", pod["metadata"]["name"])
    for mount in (m.get("mountPath", "").rstrip("/") for m in spec.get("volumeMounts") or []):
        if mount and target.startswith(mount + "/"):
            return f"{mount}/{target[len(mount) + 1:].split('/')[0]}", True
    parts = [p for p in target.split("/") if p]
    return "/" + (parts[0] if parts else ""), False
