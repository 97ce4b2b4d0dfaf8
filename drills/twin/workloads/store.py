"""The twin's checkpoint store: a directory under the state dir with each job's checkpoints in its framework's
real layout (store_layout: Megatron's `iter_N/` + `latest_checkpointed_iteration.txt`, DeepSpeed's `global_stepN/` +
`latest`, the HF Trainer's `tmp-checkpoint-N/` renamed to `checkpoint-N/`, Lightning's `.ckpt`, DCP's `step-N/` +
`.metadata`) under `<state>/<storage.store_dir>/<namespace>/<job>/` — the directory the job's pods mount (seed.py).
A save writes its shards when it starts (`begin`) and its completion evidence when it ends (`save`), so a save cut
off by a node loss leaves what a real one leaves, and "the latest checkpoint" is what the framework's own resume
picks (`latest`).

Mounted with a modelled bandwidth (storefs, profile `storage.io_bandwidth_mb_s`), the markers live in
the backing directory and a save slows down by what the model gives one more client. Otherwise the
store notices real load: a file outside the jobs' own directories (the storage drill's fio
files, its checkpoint probe) written within the last `LOAD_WINDOW_S` wall seconds means someone else
is using the store, and `save_factor()` is then the profile's `contention_slowdown`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from drills.twin.workloads import store_layout

__all__ = ["CheckpointStore"]

log = logging.getLogger(__name__)

LOAD_WINDOW_S = 2.0  # wall seconds: fio and the probe touch their files far more often than this
_SCAN_LIMIT = 2000  # files looked at per check: a huge foreign tree must not stall the controller


class CheckpointStore:
    """Checkpoint markers of every training job under one root directory."""

    def __init__(self, root: str | os.PathLike, contention_slowdown: float = 1.0):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.contention_slowdown = contention_slowdown
        self.model = None  # storefs.StoreModel when the store is mounted with a modelled bandwidth
        self.jobs: set[tuple[str, str]] = set()  # (namespace, job) of the jobs that saved here
        self.saved: dict[tuple[str, str], list[int]] = {}  # the steps whose saves completed, in order
        # (namespace, job, step) → the directory's mtimes before that save completed, and when it completed
        self._before: dict[tuple[str, str, int], tuple[dict[str, float], float]] = {}

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
        """Top-level entries that are not a namespace of the jobs' own checkpoint directories (nor their temp files)."""
        out = []
        try:
            entries = list(self.root.iterdir())
        except OSError:
            return out
        namespaces = {ns for ns, _ in self.jobs}
        for entry in entries:
            try:
                ours = entry.is_dir() and entry.name in namespaces and all(
                    (entry.name, sub.name) in self.jobs or (sub.name.startswith(".") and sub.name.endswith(".tmp"))
                    for sub in entry.iterdir())
            except OSError:
                ours = False
            if not ours:
                out.append(entry)
        return out

    def job_dir(self, namespace: str, job: str) -> Path:
        return self.root / namespace / job

    def begin(self, namespace: str, job: str, step: int, layout: str = "twin", at: float | None = None) -> None:
        """A save of `step` started at cluster time `at`: its framework's directory and shards appear, without
        completion evidence."""
        self.jobs.add((namespace, job))
        store_layout.begin(self.job_dir(namespace, job), layout, step, at)

    def save(self, namespace: str, job: str, step: int, saved_at: float, duration_s: float, size_gib: float,
             path: str, layout: str = "twin") -> Path:
        """The save of `step` completed: its framework's completion evidence, written last."""
        self.jobs.add((namespace, job))
        directory = self.job_dir(namespace, job)
        self.saved.setdefault((namespace, job), []).append(step)
        self._before[(namespace, job, step)] = (store_layout.mtimes(directory), saved_at)
        store_layout.complete(directory, layout, step, {"saved_at": saved_at, "duration_s": round(duration_s, 3),
                                                        "size_gib": size_gib, "path": path}, at=saved_at)
        return directory

    def forget(self, namespace: str, job: str, step: int, layout: str = "twin") -> None:
        """Lose `step`'s completion evidence (defect lost-last-save): the framework's pointer back one save."""
        previous = [s for s in self.saved.get((namespace, job), []) if s < step]
        self.saved[(namespace, job)] = previous
        before, completed_at = self._before.pop((namespace, job, step), (None, None))
        store_layout.forget_completion(self.job_dir(namespace, job), layout, step, previous[-1] if previous else None,
                                       before, completed_at)

    def latest(self, namespace: str, job: str, layout: str = "twin") -> int | None:
        """The step the job's framework resumes from (what it finds complete), or None."""
        return store_layout.resume_step(self.job_dir(namespace, job), layout)
