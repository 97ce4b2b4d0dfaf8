"""Reading the job's checkpoint store: the listing and pointer files `ckpt_store.read_store` judges, taken from a
short-lived read-only pod that mounts the job's own volume (`find DIR -maxdepth 2 -printf '%y %T@ %p\\n'`, `cat` of
the pointers, over exec), or from a directory this machine mounts (profile `checkpoint_store.read: path`).

The listing carries modification times so the judge can tell what the store held at the fault from what the resumed
job wrote after it (drills/measure/ckpt_asof.py). An image whose `find` has no `-printf` (busybox) is listed without
them (`-type d|f`), and the reading says so in its notes; the cluster times of the reading's start and end are kept.

`reader_mounts(pod, container, store_dir)` finds the volume the job's checkpoint directory lies on in one of the
job's pods (the deepest `mountPath` above it) and returns the volumes and mounts a reader pod needs to see the
very same directory at the very same path — or why it cannot: the directory is on no volume (the container's own
file system), or on a node-local one (emptyDir, hostPath), which no other pod reads. Identity is the job's own:
the reader mounts what the job mounts, never a volume named elsewhere.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from drills.core.clock import parse_iso
from drills.core.podexec import exec_in_pod
from drills.core.kube import Cluster
from dataclasses import replace

from drills.measure.ckpt_store import (
    FIND_PRINTF, Entry, StoreReading, parse_find, parse_find_printf, pointer_files, read_store,
)

__all__ = ["ReaderMounts", "reader_mounts", "read_through_pod", "read_local", "MAX_DEPTH"]

log = logging.getLogger(__name__)

MAX_DEPTH = 3  # the checkpoints, the files in them (every completion marker is there) and one level more: a Megatron
# shard (iter_N/mp_rank_XX/…) rewritten in place changes no directory's mtime, only its own — a re-save after the fault
# is seen only there
# A pointer read empty is being rewritten: the frameworks truncate it, then write it (Megatron's tracker is
# `open(path, "w")` then `write`), and under a saturated store that gap lasts. It is read again this often before
# an empty one counts as what the store holds.
POINTER_REREADS, POINTER_PAUSE_S = 10, 0.1
_SHARED = ("persistentVolumeClaim", "nfs", "csi", "cephfs", "glusterfs", "iscsi", "fc", "azureFile")


@dataclass(frozen=True)
class ReaderMounts:
    volumes: list[dict]
    mounts: list[dict]
    volume: str  # "pvc/ckpt-store (subPath ai-platform/llm-finetune-8b)" — what the reading was taken from
    problem: str | None = None


def reader_mounts(pod: dict, container: str | None, store_dir: str) -> ReaderMounts:
    """The volume and mount a reader pod needs to see `store_dir` as the job's container sees it."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    box = next((c for c in containers if c.get("name") == container), containers[0] if containers else {})
    target = "/" + store_dir.strip("/")
    best = None
    for m in box.get("volumeMounts") or []:
        path = "/" + (m.get("mountPath") or "").strip("/")
        if (target == path or target.startswith(path.rstrip("/") + "/")) and (best is None or len(path) > len(best[0])):
            best = (path, m)
    if best is None:
        return ReaderMounts([], [], "", f"the checkpoint directory {store_dir} is on no volume of the job's pods "
                                        "(the container's own file system): no other pod can read it, and it "
                                        "does not outlive the pod")
    mount = best[1]
    volume = next((v for v in spec.get("volumes") or [] if v.get("name") == mount.get("name")), None)
    if volume is None:
        return ReaderMounts([], [], "", f"the job's pods mount a volume {mount.get('name')!r} they do not declare")
    kind = next((k for k in volume if k != "name"), "?")
    if kind not in _SHARED:
        return ReaderMounts([], [], kind, f"the checkpoint directory {store_dir} is on a node-local {kind} volume "
                                          f"({mount.get('name')}): no other pod reads it, and it is lost with the "
                                          "node")
    what = (f"pvc/{volume[kind].get('claimName')}" if kind == "persistentVolumeClaim" else f"{kind} volume "
            f"{mount.get('name')}") + (f" (subPath {mount['subPath']})" if mount.get("subPath") else "")
    keep = {k: mount[k] for k in ("name", "mountPath", "subPath", "subPathExpr") if k in mount}
    return ReaderMounts([volume], [keep], what)


def read_through_pod(cluster: Cluster, namespace: str, pod: str, store_dir: str, framework: str,
                     volume: str) -> StoreReading:
    """List `store_dir` in the reader pod and judge it; a failed exec is a reading with its `problem`."""
    root = "/" + store_dir.strip("/")
    began = cluster.clock.timestamp()
    source = f"store listing of {root} on {volume}, read by pod {namespace}/{pod} @ {cluster.clock.iso(began)}"
    listed = _listing(cluster, namespace, pod, root)
    if isinstance(listed, str):
        return StoreReading(None, (), source, listed, read_at=began, read_done=cluster.clock.timestamp())
    entries, notes = listed
    contents = {}
    for name in pointer_files(entries):
        for _attempt in range(2):  # a pointer the listing shows but cat could not read is unread, never absent
            code, out, err = _exec(cluster, namespace, pod, ["cat", f"{root}/{name}"])
            if code == 0:
                contents[name] = settled_pointer(out, lambda: _exec(cluster, namespace, pod,
                                                                    ["cat", f"{root}/{name}"])[1])
                break
        else:
            why = (err or out).strip().splitlines()[:1]
            return StoreReading(None, (), source, f"{root}/{name} is in the listing but could not be read (cat exited "
                                f"{code}{': ' + why[0] if why else ''}): which checkpoints it marks complete is unknown",
                                read_at=began, read_done=cluster.clock.timestamp())
    if contents:  # a live job may complete a save between the listing and the pointer: list again after reading it
        listed = _listing(cluster, namespace, pod, root)  # (a save's directory exists before its pointer names it)
        if isinstance(listed, str):
            return StoreReading(None, (), source, listed, read_at=began, read_done=cluster.clock.timestamp())
        entries, notes = listed
    reading = read_store(entries, contents, framework, source)
    return replace(reading, notes=reading.notes + notes, read_at=began, read_done=cluster.clock.timestamp())


def _listing(cluster: Cluster, namespace: str, pod: str, root: str) -> tuple[list[Entry], tuple[str, ...]] | str:
    """The directory's entries with their modification times (GNU find -printf), or without them when the image's
    find has none (busybox: `-type d`, `-type f`, and a note saying so), or why they could not be listed."""
    code, out, err = _exec(cluster, namespace, pod, ["find", root, "-maxdepth", str(MAX_DEPTH), "-printf", FIND_PRINTF])
    if code == 0:
        return parse_find_printf(root, out), ()
    printf_err = (err or out).strip().splitlines()[:1]
    outputs = []
    for kind in ("d", "f"):
        code, out, err = _exec(cluster, namespace, pod, ["find", root, "-maxdepth", str(MAX_DEPTH), "-type", kind])
        if code != 0:
            return f"`find {root}` in the reader pod failed (exit {code}): {(err or out).strip()[:200] or 'no output'}"
        outputs.append(out)
    note = ("listed without modification times: the reader image's find has no -printf"
            f"{f' ({printf_err[0][:120]})' if printf_err else ''}")
    return parse_find(root, *outputs), (note,)


def read_local(path: str, framework: str, at: str) -> StoreReading:
    """The same reading of a directory this machine mounts, with the modification times its `stat` gives."""
    source = f"store listing of {path} (mounted here) @ {at}"
    began = parse_iso(at).timestamp()
    if not os.path.isdir(path):
        return StoreReading(None, (), source, f"{path} is not a directory here", read_at=began, read_done=began)
    entries = _walk(path)
    contents = {}
    for name in pointer_files(entries):
        try:
            contents[name] = settled_pointer(_read_text(os.path.join(path, name)),
                                             lambda: _read_text(os.path.join(path, name)))
        except OSError as err:  # listed but unread (gone, denied): unknown, never absent
            return StoreReading(None, (), source, f"{os.path.join(path, name)} is in the listing but could not be "
                                f"read ({err.strerror or err}): which checkpoints it marks complete is unknown",
                                read_at=began, read_done=began)
    if contents:  # a live job may complete a save between the listing and the pointer: list again after reading it
        entries = _walk(path)  # (as the reader pod does: the pointer never names a save the second listing lacks)
    return replace(read_store(entries, contents, framework, source), read_at=began, read_done=began)


def settled_pointer(text: str, again, rereads: int = POINTER_REREADS, pause_s: float = POINTER_PAUSE_S) -> str:
    """`text`, or while it is empty (a pointer caught between its truncation and its write) what `again()` reads
    after a pause, up to `rereads` times: an empty pointer counts only once it stays empty."""
    for _ in range(rereads):
        if text.strip():
            break
        time.sleep(pause_s)
        text = again()
    return text


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(4096)


def _walk(path: str) -> list[Entry]:
    """`path`'s entries to MAX_DEPTH with their modification times."""
    entries: list[Entry] = [Entry(".", True, _mtime(path))]
    for dirpath, dirs, files in os.walk(path):
        rel = os.path.relpath(dirpath, path)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        if depth >= MAX_DEPTH:
            dirs[:] = []
            continue
        for names, is_dir in ((dirs, True), (files, False)):
            entries += [Entry(os.path.normpath(os.path.join(rel, n)), is_dir, _mtime(os.path.join(dirpath, n)))
                        for n in names]
    return entries


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None  # removed while listed


def _exec(cluster: Cluster, namespace: str, pod: str, command: list[str]) -> tuple[int, str, str]:
    return exec_in_pod(cluster, namespace, pod, command)


