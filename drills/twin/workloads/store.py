"""The twin's checkpoint store: a directory under the state dir with one marker file per checkpoint.

`<state>/<storage.store_dir>/<namespace>/<job>/step-<N>.json` holds what a real checkpoint's
metadata would (step, when it was saved, how long the save took, its size). A marker appears only
when the save completed, so "the latest checkpoint" is what a restarted job can really resume from.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

__all__ = ["CheckpointStore", "MARKER"]

log = logging.getLogger(__name__)

MARKER = re.compile(r"^step-(\d+)\.json$")


class CheckpointStore:
    """Checkpoint markers of every training job under one root directory."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

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
