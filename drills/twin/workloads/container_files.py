"""Files a simulated container sees on its volumes: `find`, `cat FILE`, `test -e|-d PATH` and `rm -rf PATH` over
the volumes the twin backs with a directory (a PersistentVolumeClaim: the twin's checkpoint store, as for the fio
pods), each at its `mountPath` (with its `subPath`). The image's own file system is not modelled: a path on no such
volume does not exist. A mount marked `readOnly` refuses `rm` (EROFS); a store whose files may not be unlinked (twin
profile `storage.unlink_denied`: a retention lock, WORM) refuses it with EPERM, as busybox's `rm` reports both.

Output as busybox prints it: `find PATH [-maxdepth N] [-type d|f]` one path a line, the start first, a directory
before what it holds; a missing path `find: PATH: No such file or directory`, exit 1. `cat FILE…` the files' bytes;
a missing one `cat: can't open 'FILE': No such file or directory`, exit 1. An image with GNU findutils (`gnu`: every
image but busybox) also takes `-printf FORMAT` with `%y` (d, f, l), `%T@` (mtime, epoch seconds with GNU's ten-digit
fraction), `%p`, `%%` and the escapes `\n`, `\t`, `\\` (findutils doc, "Format Directives"); busybox's find has no
`-printf` (findutils/find.c: not among its actions) and answers `find: unrecognized: -printf`, exit 1.

The mtimes are the files' own: the twin's checkpoint store writes every file and directory with the cluster time
of the write (store_layout.py), so a reader sees cluster time as on a real store; files written by processes the
twin runs on the host (fio) carry the host's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from drills.twin.workloads.container_shell import Output

__all__ = ["mounts", "read_only", "find", "cat", "test", "rm", "VolumeDir"]

VolumeDir = Callable[[dict], "Path | None"]  # a pod volume → the host directory backing it (None: not backed)


def mounts(pod: dict, spec: dict, volume_dir: VolumeDir | None) -> dict[str, Path]:
    """mountPath → host directory, for the container's mounts of volumes the twin backs."""
    if volume_dir is None:
        return {}
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    out = {}
    for m in spec.get("volumeMounts") or []:
        host = volume_dir(volumes.get(m.get("name"), {}))
        if host is not None and m.get("mountPath"):
            out[m["mountPath"].rstrip("/") or "/"] = host / (m.get("subPath") or "")
    return out


def read_only(spec: dict) -> set[str]:
    """The container's mountPaths mounted `readOnly`."""
    return {m["mountPath"].rstrip("/") or "/" for m in spec.get("volumeMounts") or []
            if m.get("readOnly") and m.get("mountPath")}


def test(where: dict[str, Path], args: list[str]) -> Output:
    """`test -e PATH` / `test -d PATH`: exit 0 true, 1 false, 2 a usage error (as busybox's test)."""
    if len(args) != 2 or args[0] not in ("-e", "-d"):
        return Output(b"", b"sh: test: syntax error\n", 2)
    host = _host(where, args[1])
    found = host is not None and (host.is_dir() if args[0] == "-d" else host.exists())
    return Output(code=0 if found else 1)


def rm(where: dict[str, Path], read_only: set[str], unlink_denied: bool, args: list[str]) -> Output:
    """`rm -rf PATH…`: a missing path is no error (-f); a path on a read-only mount or a store that denies unlinking
    stays, with busybox's message, exit 1."""
    flags = [a for a in args if a.startswith("-") and a != "--"]
    paths = [a for a in args if not a.startswith("-")]
    if any(f not in ("-rf", "-fr", "-r", "-f") for f in flags):
        return Output(b"", f"rm: unrecognized option: {flags[0]}\n".encode(), 1)
    err, code = b"", 0
    for path in paths:
        host = _host(where, path)
        if host is None or not (host.exists() or host.is_symlink()):
            continue
        mount = _mount_of(where, path)
        why = ("Read-only file system" if mount in read_only else "Operation not permitted" if unlink_denied else None)
        if why is None:
            try:
                shutil.rmtree(host) if host.is_dir() and not host.is_symlink() else host.unlink()
                continue
            except OSError as failed:
                why = failed.strerror or "I/O error"
        err += f"rm: can't remove '{path}': {why}\n".encode()
        code = 1
    return Output(b"", err, code)


def find(where: dict[str, Path], args: list[str], gnu: bool = False) -> Output:
    start, depth, kind, fmt = (args[0] if args and not args[0].startswith("-") else "."), None, None, None
    rest = args[1:] if args and not args[0].startswith("-") else args
    i = 0
    while i < len(rest):
        if rest[i] == "-maxdepth" and i + 1 < len(rest) and rest[i + 1].isdigit():
            depth, i = int(rest[i + 1]), i + 2
        elif rest[i] == "-type" and i + 1 < len(rest) and rest[i + 1] in ("d", "f"):
            kind, i = rest[i + 1], i + 2
        elif rest[i] == "-printf" and gnu and i + 1 < len(rest):
            fmt, i = rest[i + 1], i + 2
        else:
            return Output(b"", f"find: unrecognized: {rest[i]}\n".encode(), 1)
    host = _host(where, start)
    if host is None or not host.exists():
        return Output(b"", f"find: {start}: No such file or directory\n".encode(), 1)
    out = []
    for path, is_dir, level, real in _walk(host, start.rstrip("/") or "/", 0, depth):
        if kind is None or (kind == "d") == is_dir:
            out.append(f"{path}\n" if fmt is None else _printf(fmt, path, is_dir, real))
    return Output("".join(out).encode())


def cat(where: dict[str, Path], args: list[str]) -> Output:
    out, err, code = b"", b"", 0
    for path in args:
        host = _host(where, path)
        try:
            if host is None:
                raise FileNotFoundError
            out += host.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            err += f"cat: can't open '{path}': No such file or directory\n".encode()
            code = 1
    return Output(out, err, code)


def _host(where: dict[str, Path], path: str) -> Path | None:
    """The host path of `path` in the container, on the deepest mount it lies under."""
    path = "/" + path.strip("/")
    for mount in sorted(where, key=len, reverse=True):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return where[mount] / path[len(mount):].lstrip("/")
    return None


def _printf(fmt: str, path: str, is_dir: bool, real: Path) -> str:
    """One entry through GNU find's `-printf` directives (the few a listing needs)."""
    out, i = [], 0
    while i < len(fmt):
        ch, nxt = fmt[i], fmt[i + 1] if i + 1 < len(fmt) else ""
        if ch == "%" and nxt == "T" and fmt[i + 2:i + 3] == "@":
            try:
                out.append(f"{real.lstat().st_mtime:.10f}")
            except OSError:
                out.append("0.0000000000")
            i += 3
            continue
        if ch == "%" and nxt in "ypf%":
            out.append({"y": "d" if is_dir else ("l" if real.is_symlink() else "f"), "p": path,
                        "f": path.rsplit("/", 1)[-1], "%": "%"}[nxt])
        elif ch == "\\" and nxt in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[nxt])
        else:
            out.append(ch)
            i += 1
            continue
        i += 2
    return "".join(out)


def _mount_of(where: dict[str, Path], path: str) -> str | None:
    path = "/" + path.strip("/")
    return next((m for m in sorted(where, key=len, reverse=True)
                 if path == m or path.startswith(m.rstrip("/") + "/")), None)


def _walk(host: Path, shown: str, level: int, depth: int | None):
    is_dir = host.is_dir()
    yield shown, is_dir, level, host
    if not is_dir or (depth is not None and level >= depth):
        return
    try:
        names = sorted(os.listdir(host))
    except OSError:
        return
    for name in names:
        yield from _walk(host / name, f"{shown.rstrip('/')}/{name}", level + 1, depth)
