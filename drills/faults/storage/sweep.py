# WARNING: creates one short-lived pod in the saturation Job's namespace that mounts the store's PersistentVolumeClaim
# as fio's own user and removes the one directory the Job's fio pods wrote under (`{mount}/.drills-fio-{job}`);
# the pod is deleted before the revert returns (and found by its labels and deleted by the next revert after a crash).
"""Job mode's files on the store, read and swept: deleting the fio Job proves its pods are gone, not their files.

Each fio pod writes under `{mount}/.drills-fio-{job}/{pod}` and its shell's trap removes that directory on SIGTERM —
but a fio that does not stop within the grace period, a lost node or a restarted kubelet kill the container without
the trap, and up to size × numjobs per pod stay on the very store the training job checkpoints to. So after the
Job's pods are gone the revert looks at the store itself, through a pod that mounts the same claim
(drills/faults/store_reader.py's pod, journaled with the saturation's own entry, in its allowlisted namespace):
`test -e` of the Job's directory, `find` of what is there, `rm -rf` of exactly that directory — its path built here
from the journal's mount path and Job name, each checked against its grammar — and `test -e` again. The
saturation's `verify` reads the same directory through a read-only pod: what was listed, by which pod, when.

`files_root(mount_path, job_name)` is the one place the directory's path is made (remote.py renders the Job with
it); `read_leftovers(cluster, undo)` reads; `sweep(cluster, undo)` reads, removes, reads again (RevertFailed when
anything stays); `delete_sweep_pods` removes every pod of ours a killed run left, by its labels.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from drills.core.errors import DrillError, InvalidProfile, RevertFailed
from drills.core.grammar import GrammarError, check
from drills.core.podexec import exec_in_pod
from drills.faults import Plan, Reach, Target
from drills.faults import store_reader
from drills.faults.storage.spec import FILES_PREFIX, SaturationSpec

__all__ = ["SWEEP_LABEL", "ROLE", "Leftovers", "files_root", "sweep_undo", "read_leftovers", "sweep",
           "delete_sweep_pods"]

log = logging.getLogger(__name__)

ROLE = "store-sweep"
SWEEP_LABEL = "gpu-drills.io/sweep-of"  # the Job whose files the pod reads or sweeps (never `job-name`: not its pod)
START_TIMEOUT_S = 120.0  # cluster seconds for the sweep pod to run
SHOWN = 12  # entries of a listing kept in the reading


@dataclass(frozen=True)
class Leftovers:
    """One look at the Job's directory on the store: whether it is there, what it holds, read by which pod, when."""

    root: str
    present: bool
    entries: tuple[str, ...]  # `find ROOT -maxdepth 2` (the pods' directories and fio's files), first SHOWN
    count: int  # how many entries the listing had in all
    source: str  # "test -e + find in pod ai-platform/x (pvc/ckpt-store, read-only) @ 2026-…"

    def value(self) -> str:
        if not self.present:
            return "absent"
        if not self.count:
            return "present, empty"
        more = f", … {self.count - len(self.entries)} more" if self.count > len(self.entries) else ""
        return f"present, {self.count} entr{'y' if self.count == 1 else 'ies'}: {', '.join(self.entries)}{more}"


def files_root(mount_path: str, job_name: str) -> str:
    """`{mount}/.drills-fio-{job}`: the directory every fio pod of the Job writes under; InvalidProfile when either
    part is outside its grammar (an absolute path without `..`, `$`, ':' or space; a DNS name)."""
    try:
        check("remote_path", mount_path, "storage.saturation.mount_path")
        check("dns_subdomain", job_name, "the fio Job's name")
        return check("remote_path", f"{mount_path.rstrip('/')}/{FILES_PREFIX}{job_name}", "fio's files directory")
    except GrammarError as err:
        raise InvalidProfile(str(err)) from None


def sweep_undo(spec: SaturationSpec) -> dict:
    """What the journal keeps so a revert in any process can mount the store as fio did."""
    return {"claim": spec.claim, "mount_path": spec.mount_path, "image": spec.image, "run_as_user": spec.run_as_user,
            "run_as_group": spec.run_as_group, "fs_group": spec.fs_group}


def read_leftovers(cluster, undo: dict) -> Leftovers:
    """The Job's directory as a read-only pod on the same claim sees it; DrillError when it cannot be read."""
    with _StorePod(cluster, undo, write=False) as pod:
        return _look(cluster, undo, pod, "read-only")


def sweep(cluster, undo: dict) -> tuple[Leftovers, Leftovers | None]:
    """Read the Job's directory; if anything is there, remove exactly it and read again: (before, after — None when
    nothing was there). RevertFailed, naming the listing and `rm`'s answer, when it stays or cannot be read."""
    try:
        with _StorePod(cluster, undo, write=True) as pod:
            before = _look(cluster, undo, pod, "read-write")
            if not before.present:
                return before, None
            code, out, said = exec_in_pod(cluster, undo["namespace"], pod, ["rm", "-rf", "--", before.root])
            after = _look(cluster, undo, pod, "read-write")
    except DrillError as err:
        if isinstance(err, RevertFailed):
            raise
        raise RevertFailed(f"fio's files under {_root(undo)} could not be read or swept: {err}; "
                           "run `drills revert` again") from None
    if after.present:
        raise RevertFailed(f"fio's files {after.root} on pvc/{undo['claim']} are still there after `rm -rf` "
                           f"(exit {code}{': ' + (said or out).strip()[:200] if (said or out).strip() else ''}): "
                           f"{after.value()} (read by {after.source}); remove them, then run `drills revert`")
    log.info("swept fio's leftovers %s (%s)", before.root, before.value())
    return before, after


def delete_sweep_pods(cluster, namespace: str, job_name: str) -> list[str]:
    """Delete every reader/sweep pod of this Job's files (a killed run's included), waiting until each is gone."""
    resp = cluster.core.list_namespaced_pod(namespace, label_selector=f"{SWEEP_LABEL}={job_name}",
                                            _preload_content=False)
    names = sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items", []))
    for name in names:
        store_reader.revert(Target(cluster), {"namespace": namespace, "pod": name})
    return names


# helpers

def _root(undo: dict) -> str:
    return files_root(undo["mount_path"], undo["job_name"])


class _StorePod:
    """A reader pod on the store's claim for the `with` block (deleted on leaving it, whatever happened)."""

    def __init__(self, cluster, undo: dict, write: bool) -> None:
        if not undo.get("claim") or not undo.get("mount_path"):
            raise DrillError("the journal entry names no claim or mount path of the store (written by an older "
                             "version): fio's files cannot be read; look under the store for .drills-fio-* by hand")
        _root(undo)  # the path is valid before anything is created
        self.cluster, self.undo, self.write = cluster, undo, write
        self.name = f"{undo['job_name'][:40]}-{'sweep' if write else 'read'}-{uuid.uuid4().hex[:6]}"

    def __enter__(self) -> str:
        undo, ns = self.undo, self.undo["namespace"]
        body = store_reader.pod_body(ns, self.name, undo["image"], [{"name": "store", "persistentVolumeClaim": {
            "claimName": undo["claim"]}}], [{"name": "store", "mountPath": undo["mount_path"]}])
        body["metadata"]["labels"] = {store_reader.ROLE_LABEL: ROLE, SWEEP_LABEL: undo["job_name"]}
        spec = body["spec"]
        spec["containers"][0]["volumeMounts"][0]["readOnly"] = not self.write
        spec["securityContext"].update(runAsUser=undo["run_as_user"], runAsGroup=undo["run_as_group"])
        if undo.get("fs_group") is not None:  # fio's identity: it may remove what fio wrote, nothing more
            spec["securityContext"].update(fsGroup=undo["fs_group"], fsGroupChangePolicy="OnRootMismatch")
        plan = Plan(store_reader.KIND, f"{ns}/{self.name}", f"{'sweep' if self.write else 'read'} fio's files on "
                    f"pvc/{undo['claim']} from pod {ns}/{self.name}", {"namespace": ns, "pod": self.name},
                    Reach(namespaces=(ns,)), spec={"body": body, "timeout_s": START_TIMEOUT_S})
        try:
            store_reader.inject(Target(self.cluster), plan)
        except DrillError:
            self.__exit__()
            raise
        return self.name

    def __exit__(self, *exc) -> None:
        store_reader.revert(Target(self.cluster), {"namespace": self.undo["namespace"], "pod": self.name})


def _look(cluster, undo: dict, pod: str, how: str) -> Leftovers:
    ns, root = undo["namespace"], _root(undo)
    at = cluster.clock.iso(cluster.clock.now())
    source = f"test -e + find {root} in pod {ns}/{pod} (pvc/{undo['claim']}, {how}) @ {at}"
    code, out, err = exec_in_pod(cluster, ns, pod, ["test", "-e", root])
    if code == 1:
        return Leftovers(root, False, (), 0, source)
    if code != 0:
        raise DrillError(f"`test -e {root}` in pod {ns}/{pod} answered exit {code}: {(err or out).strip()[:200]}")
    code, out, err = exec_in_pod(cluster, ns, pod, ["find", root, "-maxdepth", "2"])
    if code != 0:
        raise DrillError(f"`find {root}` in pod {ns}/{pod} answered exit {code}: {(err or out).strip()[:200]}")
    listed = [line[len(root):].lstrip("/") or "." for line in out.splitlines() if line.strip()]
    listed = [e for e in listed if e != "."]
    return Leftovers(root, True, tuple(listed[:SHOWN]), len(listed), source)
