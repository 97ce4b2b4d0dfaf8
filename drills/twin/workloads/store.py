"""The twin's checkpoint store: a directory under the state dir with one marker file per checkpoint.

`<state>/<storage.store_dir>/<namespace>/<job>/step-<N>.json` holds what a real checkpoint's
metadata would (step, when it was saved, how long the save took, its size). A marker appears only
when the save completed, so "the latest checkpoint" is what a restarted job can really resume from.

Mounted with a modelled bandwidth (storefs, profile `storage.io_bandwidth_mb_s`), the markers live in
the backing directory and a save slows down by what the model gives one more client. Otherwise the
store notices real load: a file outside the jobs' own directories (the storage drill's fio
files, its checkpoint probe) written within the last `LOAD_WINDOW_S` wall seconds means someone else
is using the store, and `save_factor()` is then the profile's `contention_slowdown`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path

__all__ = ["CheckpointStore", "MARKER"]

log = logging.getLogger(__name__)

MARKER = re.compile(r"^step-(\d+)\.json$")
LOAD_WINDOW_S = 2.0  # wall seconds: fio and the probe touch their files far more often than this
_SCAN_LIMIT = 2000  # files looked at per check: a huge foreign tree must not stall the controller


class CheckpointStore:
    """Checkpoint markers of every training job under one root directory."""

    def __init__(self, root: str | os.PathLike, contention_slowdown: float = 1.0):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.contention_slowdown = contention_slowdown
        self.model = None  # storefs.StoreModel when the store is mounted with a modelled bandwidth

    def save_factor(self) -> float:
        """How many times longer a save takes now: what the mounted store's model gives one more client,
        or (a plain directory) `contention_slowdown` while the store is under load."""
        if self.model is not None:
            return self.model.slowdown()
        return self.contention_slowdown if self.contention_slowdown > 1 and self.under_load() else 1.0

    def under_load(self) -> bool:
        """Whether a file outside the jobs' directories was written within the last LOAD_WINDOW_S seconds."""
        since = time.time() - LOAD_WINDOW_S
        seen = 0
        for top in self._foreign_entries():
            for dirpath, _dirs, files in os.walk(top) if top.is_dir() else [(str(top.parent), [], [top.name])]:
                for name in files:
                    seen += 1
                    try:
                        if os.stat(os.path.join(dirpath, name)).st_mtime >= since:
                            return True
                    except OSError:
                        continue  # removed while we looked
                    if seen >= _SCAN_LIMIT:
                        return False
        return False

    def _foreign_entries(self) -> list[Path]:
        """Top-level entries that are not a namespace of jobs (those hold only step-N.json markers)."""
        out = []
        try:
            entries = list(self.root.iterdir())
        except OSError:
            return out
        for entry in entries:
            try:
                ours = entry.is_dir() and not entry.name.startswith(".") and all(
                    sub.is_dir() and all(MARKER.match(f.name) or f.name.endswith(".tmp") for f in sub.iterdir())
                    for sub in entry.iterdir())
            except OSError:
                ours = False
            if not ours:
                out.append(entry)
        return out

    def job_dir(self, namespace: str, job: str) -> Path:
        return self.root / namespace / job

    def save(self, namespace: str, job: str, step: int, saved_at: float, duration_s: float, size_gib: float,
             path: str) -> Path:
        """Write the marker of a completed checkpoint (atomically: a reader never sees half a file)."""
        directory = self.job_dir(namespace, job)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"step-{step}.json"
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps({"job": job, "namespace": namespace, "step": step, "saved_at": saved_at,
                                   "duration_s": round(duration_s, 3), "size_gib": size_gib, "path": path}) + "\n")
        os.replace(tmp, target)
        return target

    def steps(self, namespace: str, job: str) -> list[int]:
        directory = self.job_dir(namespace, job)
        if not directory.is_dir():
            return []
        return sorted(int(m.group(1)) for m in (MARKER.match(p.name) for p in directory.iterdir()) if m)

    def latest(self, namespace: str, job: str) -> int | None:
        """The newest completed checkpoint's step, or None."""
        steps = self.steps(namespace, job)
        return steps[-1] if steps else None

    def read(self, namespace: str, job: str, step: int) -> dict | None:
        try:
            return json.loads((self.job_dir(namespace, job) / f"step-{step}.json").read_text())
        except (OSError, ValueError):
            return None
