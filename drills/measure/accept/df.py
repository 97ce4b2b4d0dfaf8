"""`df -PT PATH` (coreutils, POSIX format with the type column): which filesystem holds a path — the
evidence that a storage check measured the shared store and not the node's own disk."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mount", "parse_df", "LOCAL_TYPES"]

# filesystems that live on the node itself: a store "mounted" on one of these is the node's own disk
LOCAL_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "vfat", "overlay", "tmpfs",
                         "devtmpfs", "ramfs"})


@dataclass(frozen=True)
class Mount:
    source: str
    fstype: str
    mountpoint: str


def parse_df(text: str) -> tuple[Mount, ...]:
    """Every row after the `Filesystem Type …` header (a mount point may contain spaces)."""
    out, header = [], False
    for line in text.splitlines():
        parts = line.split()
        if parts[:2] == ["Filesystem", "Type"]:
            header = True
        elif header and len(parts) >= 7:
            out.append(Mount(parts[0], parts[1], " ".join(parts[6:])))
    return tuple(out)
