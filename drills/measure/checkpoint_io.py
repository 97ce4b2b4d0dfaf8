"""Checkpoint probe: save a checkpoint-shaped set of shards to the store, read it back, verify it.

Pure measurement, no verdict: the drill runs it once as a baseline and again under saturation, and
the judgement (ratio to baseline, absolute limit) happens in one `within()` elsewhere. A checksum
mismatch is a measured fact (`intact=False`), never an exception.

Only the store's work is timed — create, write, fsync, close, the directory fsync, open and read —
not generating random data or hashing it, so a slow CPU does not pass for a slow store. After each
shard's fsync its pages are dropped from the page cache (POSIX_FADV_DONTNEED), so the read-back
comes from the store rather than from memory; without fsync the pages may still be dirty and the
read-back may be served from memory (`cache_dropped=False`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from drills.core.errors import CheckFailed

__all__ = ["ProbeResult", "probe_checkpoint", "shard_name", "MANIFEST"]

log = logging.getLogger(__name__)

CHUNK = 4 << 20
MANIFEST = "index.json"
PROBE_PREFIX = ".drills-ckpt-probe-"


@dataclass(frozen=True)
class ProbeResult:
    """One checkpoint save + load against the store. Seconds are the store's time only."""

    directory: str
    total_bytes: int
    shards: int
    fsync: bool
    write_s: float
    read_s: float
    write_bw_bytes_s: float
    read_bw_bytes_s: float
    intact: bool
    mismatched: tuple[str, ...]
    cache_dropped: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe_checkpoint(directory: str | Path, total_bytes: int, shards: int, fsync: bool = True,
                     tamper: Callable[[list[Path]], None] | None = None) -> ProbeResult:
    """Write `shards` files totalling `total_bytes` of random data under `directory` (in a probe
    subdirectory, with an index of sha256 per shard), read them back, verify, delete them.

    `tamper(shard_paths)` runs between the save and the load: tests use it to corrupt a shard and see
    the probe report it.
    """
    if shards < 1 or total_bytes < shards:
        raise CheckFailed(f"checkpoint probe needs shards ≥ 1 and total_bytes ≥ shards (got {total_bytes} "
                          f"bytes in {shards} shards)")
    probe_dir = Path(directory) / f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        probe_dir.mkdir(parents=True)
    except OSError as err:
        raise CheckFailed(f"checkpoint probe cannot write under {directory}: {err.strerror or err}") from None
    try:
        sizes = [total_bytes // shards] * shards
        sizes[-1] += total_bytes % shards
        paths = [probe_dir / shard_name(i, shards) for i in range(shards)]
        write_s, dropped, expected = _save(probe_dir, paths, sizes, fsync)
        if tamper is not None:
            tamper(list(paths))
        read_s, mismatched = _load(probe_dir, expected)
    except OSError as err:
        raise CheckFailed(f"checkpoint probe I/O failed in {probe_dir}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    result = ProbeResult(
        directory=str(directory), total_bytes=total_bytes, shards=shards, fsync=fsync,
        write_s=write_s, read_s=read_s,
        write_bw_bytes_s=total_bytes / write_s if write_s > 0 else 0.0,
        read_bw_bytes_s=total_bytes / read_s if read_s > 0 else 0.0,
        intact=not mismatched, mismatched=tuple(mismatched), cache_dropped=dropped,
    )
    log.info("checkpoint probe %s: %d B in %d shards, write %.3f s, read %.3f s, intact=%s",
             directory, total_bytes, shards, write_s, read_s, result.intact)
    return result


def probe_write_s(directory: str | Path, total_bytes: int, shards: int) -> float:
    """Seconds to write and fsync `total_bytes` in `shards` files under `directory`, deleted after: the
    steady-state reading of the store's bandwidth (drills/measure/steady.py). It reads nothing back, so it never
    consumes what the drill's own probe must verify (a store that corrupts its first read)."""
    if shards < 1 or total_bytes < shards:
        raise CheckFailed(f"store write probe needs shards ≥ 1 and total_bytes ≥ shards (got {total_bytes} bytes in "
                          f"{shards} shards)")
    probe_dir = Path(directory) / f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        probe_dir.mkdir(parents=True)
        sizes = [total_bytes // shards] * shards
        sizes[-1] += total_bytes % shards
        write_s, _dropped, _expected = _save(probe_dir, [probe_dir / shard_name(i, shards) for i in range(shards)],
                                             sizes, True)
    except OSError as err:
        raise CheckFailed(f"store write probe failed under {directory}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return write_s


def shard_name(index: int, shards: int) -> str:
    """Shard file names the way sharded checkpoints name them (`…-00001-of-00004`)."""
    return f"shard-{index:05d}-of-{shards:05d}.bin"


# helpers

def _save(probe_dir: Path, paths: list[Path], sizes: list[int], fsync: bool) -> tuple[float, bool, dict]:
    """Write every shard, then the index; returns (seconds in the store, page cache dropped, index)."""
    io_s = 0.0
    digests = {}
    dropped = fsync and hasattr(os, "posix_fadvise")
    for path, size in zip(paths, sizes):
        digest = hashlib.sha256()
        t0 = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        io_s += time.perf_counter() - t0
        try:
            left = size
            while left:
                chunk = os.urandom(min(CHUNK, left))
                digest.update(chunk)
                t0 = time.perf_counter()
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
                io_s += time.perf_counter() - t0
                left -= len(chunk)
            t0 = time.perf_counter()
            if fsync:
                os.fsync(fd)
            io_s += time.perf_counter() - t0
            if dropped:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            t0 = time.perf_counter()
            os.close(fd)
            io_s += time.perf_counter() - t0
        digests[path.name] = {"bytes": size, "sha256": digest.hexdigest()}
    t0 = time.perf_counter()
    _write_small(probe_dir / MANIFEST, json.dumps({"shards": digests}, indent=1).encode(), fsync)
    if fsync:
        _fsync_dir(probe_dir)  # the new names themselves must be durable
    io_s += time.perf_counter() - t0
    return io_s, dropped, digests


def _load(probe_dir: Path, expected_index: dict) -> tuple[float, list[str]]:
    """Read the index back and every shard; returns (seconds in the store, names that do not match)."""
    mismatched = []
    t0 = time.perf_counter()
    try:
        raw = (probe_dir / MANIFEST).read_bytes()
    except FileNotFoundError:
        raw = b""
    io_s = time.perf_counter() - t0
    try:
        if json.loads(raw)["shards"] != expected_index:
            mismatched.append(MANIFEST)
    except (ValueError, KeyError, TypeError):
        mismatched.append(MANIFEST)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    for name, expected in sorted(expected_index.items()):
        digest = hashlib.sha256()
        size = 0
        t0 = time.perf_counter()
        try:
            fd = os.open(probe_dir / name, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            io_s += time.perf_counter() - t0
            mismatched.append(name)
            continue
        try:
            while True:
                n = os.readv(fd, [buf])
                io_s += time.perf_counter() - t0
                if not n:
                    break
                digest.update(view[:n])
                size += n
                t0 = time.perf_counter()
        finally:
            os.close(fd)
        if size != expected["bytes"] or digest.hexdigest() != expected["sha256"]:
            mismatched.append(name)
    return io_s, mismatched


def _write_small(path: Path, data: bytes, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
