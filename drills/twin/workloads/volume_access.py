"""Whether a pod's container may create a directory in the root of a volume, as Linux decides it: the process's
uid, gid and supplementary groups (from the pod's and the container's securityContext) against the directory's
owner, group and mode — after the kubelet applied the pod's fsGroup, where the volume supports it (the group
becomes the fsGroup and gets rwx, with setgid, as `SetVolumeOwnership` does).

Pure: the twin's fio pods (workloads/fio_pods.py) ask it before running fio on the store, so a non-root fio on a
store it may not write fails as it would on a node (`mkdir: can't create directory …: Permission denied`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Identity", "VolumeRoot", "identity", "may_create", "denied_line"]


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: frozenset[int]


@dataclass(frozen=True)
class VolumeRoot:
    owner_uid: int
    owner_gid: int
    mode: int  # permission bits, e.g. 0o755
    fs_group_applied: bool  # whether the kubelet applies a pod's fsGroup to this volume

    @classmethod
    def from_storage(cls, storage: Any) -> "VolumeRoot":
        """From the twin profile's `storage` section (None: a root-owned 0755 volume that applies fsGroup)."""
        if storage is None:
            return cls(0, 0, 0o755, True)
        return cls(storage.owner_uid, storage.owner_gid, int(storage.mode, 8), storage.fs_group_applied)


def identity(pod: dict, container: str) -> Identity:
    """The container's process identity: container securityContext over the pod's; an image without a USER runs
    as root (uid 0, gid 0), as the fio images drills uses do."""
    psc = (pod.get("spec") or {}).get("securityContext") or {}
    spec = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == container), {})
    csc = spec.get("securityContext") or {}
    uid = int(csc.get("runAsUser", psc.get("runAsUser", 0)))
    gid = int(csc.get("runAsGroup", psc.get("runAsGroup", 0)))
    groups = {int(g) for g in psc.get("supplementalGroups") or []}
    if psc.get("fsGroup") is not None:
        groups.add(int(psc["fsGroup"]))
    return Identity(uid, gid, frozenset(groups))


def may_create(who: Identity, root: VolumeRoot, fs_group: int | None) -> bool:
    """Whether `who` may create an entry in the volume's root directory (write and search permission)."""
    owner_gid, mode = root.owner_gid, root.mode
    if root.fs_group_applied and fs_group is not None:
        owner_gid, mode = fs_group, mode | 0o070
    if who.uid == 0:
        return True
    if who.uid == root.owner_uid:
        return mode & 0o300 == 0o300
    if owner_gid == who.gid or owner_gid in who.groups:
        return mode & 0o030 == 0o030
    return mode & 0o003 == 0o003


def denied_line(path: str, why: str = "Permission denied") -> str:
    """What busybox's `mkdir -p` (the fio images' shell) prints when it may not create `path` (`why`: strerror,
    EACCES or EROFS)."""
    return f"mkdir: can't create directory '{path}': {why}"
