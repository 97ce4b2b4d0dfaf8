"""Restore shapes the core resume reader (`logresume`) does not know (a part of `LogReader`).

- **State-dict mismatch**: the body of PyTorch's `load_state_dict` error — `size mismatch for <param>: copying a
  param with shape … from checkpoint, the shape in current model is …`, `Missing key(s) in state_dict: …`,
  `Unexpected key(s) in state_dict: …` — is printed only when a load raised: the checkpoint does not fit the model.
  It fails the pending resume; after a resume its traceback already failed, it adds nothing; alone (its traceback
  outside the log) it is a failed load attempt of its own.
- **NeMo 0.x** (`CheckpointCallback.__restore_from`, before NeMo ran on Lightning): `Restoring checkpoint from
  folder <dir> ...` is the attempt; `Checkpoint folder <dir> present but did not restore` (nothing restored) and
  `Trainer state wasn't restored` (module weights restored, optimizer and step not) fail it. A success prints
  nothing more: the attempt counts once training goes on (or the log ends) without either warning.
- **torchtitan** `Training starts at step N` after `Loading the checkpoint at step S`: titan prints
  `train_state.step + 1`, so N != S + 1 means the train state (step, data position, LR schedule) did not come from
  that checkpoint: not resumed, even when the load itself finished.
"""

from __future__ import annotations

import re

from drills.measure.logformats import TrainingEvent
from drills.measure.logprefix import Record
from drills.measure.logresume import _Resume

__all__ = ["RestoreReading"]

_STATE_DICT_MISMATCH = re.compile(r"size mismatch for \S+: copying a param with shape .*? from checkpoint|"
                                  r"(?:Missing|Unexpected) key\(s\) in state_dict: ")
_NEMO0_ATTEMPT = re.compile(r"Restoring checkpoint from folder (?P<path>\S+)")
_NEMO0_FAILED = (
    (re.compile(r"Checkpoint folder (?P<path>\S+) present but did not restore"), "nothing was restored"),
    (re.compile(r"Trainer state wasn't restored"), "the module weights were restored, the trainer state "
                                                   "(optimizer, step) was not"),
)
_TITAN_TRAIN_START = re.compile(r"Training starts at step (?P<step>\d+)")


class RestoreReading:
    """The restore shapes of this module (state lives on `LogReader`: `resumes`, `_fail`, `framework`)."""

    def _restore(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        if m := _STATE_DICT_MISMATCH.search(body):
            self._consumed = True
            return self._restore_failed(rec, None, "the checkpoint does not fit the model: "
                                        + body[m.start():].strip()[:300], framework=self.framework or "?")
        if m := _NEMO0_ATTEMPT.search(body):
            self._consumed = True
            r = _Resume("nemo0", None, m.group("path"), rec.at)
            self.resumes.append(r)
            return [self._ev("resume_attempt", rec, path=r.path)]
        for pattern, why in _NEMO0_FAILED:
            if m := pattern.search(body):
                self._consumed = True
                return self._restore_failed(rec, m.groupdict().get("path"), f"{why} ({body[m.start():].strip()})",
                                            framework="nemo0")
        if (m := _TITAN_TRAIN_START.search(body)) and self.resumes:
            r = self.resumes[-1]
            starts = int(m.group("step"))
            if r.framework == "torchtitan" and r.step is not None and r.state != "failed" and starts != r.step + 1:
                self._consumed = True
                return self._fail(r, f"training starts at step {starts} after loading the checkpoint of step "
                                     f"{r.step} (expected {r.step + 1}): the train state was not restored from it", rec)
        return []

    def _restore_failed(self, rec: Record, path: str | None, reason: str, *, framework: str) -> list[TrainingEvent]:
        """Fail the pending resume with `reason`; with none pending, a failed attempt of its own — unless the last
        resume already failed (its traceback, or an earlier line of the same message, came first)."""
        out: list[TrainingEvent] = []
        r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
        if r is None:
            if self.resumes and self.resumes[-1].state == "failed":
                return []
            r = _Resume(framework, None, path, rec.at)
            self.resumes.append(r)
            out.append(self._ev("resume_attempt", rec, path=r.path))
        return out + self._fail(r, reason, rec)
