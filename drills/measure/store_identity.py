"""Which store the training job writes its checkpoints to, read from the store itself (issue 30: evidence
of effect). The storage drill floods one directory with fio; its verdict on the job's saves means something
only if that directory is where the job's checkpoints land. The job's log names the steps it saved; the
store's own listing — the second key, not text — must hold a checkpoint of this job at one of those steps.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Iterable

from drills.measure.ckpt_store import StoreReading, store_root_of
from drills.measure.store_read import read_local

__all__ = ["find_job_checkpoints", "job_store_reading", "SCAN_LIMIT"]

log = logging.getLogger(__name__)

SCAN_LIMIT = 5000  # entries looked at: a huge store must not stall the drill
MAX_DEPTH = 5
# how frameworks name a checkpoint of step N: twin/torchtitan step-N, HF checkpoint-N, Megatron iter_000N000,
# DeepSpeed global_stepN, Lightning …step=N.ckpt
_STEP = re.compile(r"(?:step[-_=]?|checkpoint-|iter_|global_step)0*(\d+)(?:\D|$)")


def find_job_checkpoints(directory: str | os.PathLike, job: str, steps: Iterable[int]) -> tuple[list[str], int]:
    """Paths under `directory` (relative) that are checkpoints of `job` at one of `steps`: a path with a
    component naming the job and a component naming the step. Returns (found, entries looked at)."""
    wanted = {int(s) for s in steps}
    root = Path(directory)
    found: list[str] = []
    seen = 0
    if not wanted or not root.is_dir():
        return found, seen
    for dirpath, dirs, files in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if len(rel.parts) >= MAX_DEPTH:
            dirs[:] = []
        dirs[:] = [d for d in dirs if not d.startswith(".drills-")]  # fio's and the probe's own files
        for name in dirs + files:
            seen += 1
            path = rel / name
            if job in path.parts[:-1] or job in name:
                match = _STEP.search(name)
                if match and int(match.group(1)) in wanted:
                    found.append(str(path))
            if seen >= SCAN_LIMIT:
                return found, seen
    return found, seen


def job_store_reading(directory: str | os.PathLike, training: Any, steps: Iterable[int],
                      at: str) -> tuple[str, StoreReading | None]:
    """The job's own checkpoint directory under the flooded store (where its checkpoints at `steps` lie) and its
    framework-aware reading (completion evidence, drills/measure/ckpt_store.py); None when no checkpoint of the
    job at those steps is under `directory` (the store target check names that)."""
    found, _ = find_job_checkpoints(directory, training.job, steps)
    if not found:
        return str(directory), None
    path = os.path.join(str(directory), store_root_of(found[0]))
    return path, read_local(path, getattr(training, "framework", "auto"), at)
