"""Checkpoint saves, and the checkpoint paths they name (a part of `LogReader`).

- **Saves**, one per checkpoint: Megatron `saving …`/`successfully saved …` with its `save-checkpoint`
  timer, DeepSpeed shards (`Checkpoint global_stepN is about to be saved!` … the last `is ready now!`: the
  save ends when its last shard is written; `Saving model checkpoint: …/global_stepN/…` is its start, not its end),
  HF `Saving model checkpoint to …` and Lightning `saving model to …` (ModelCheckpoint logs it *before* it
  saves), mmengine `Saving checkpoint at N iterations|epochs` (also before), NeMo `Scheduled async checkpoint save for …` … `Async checkpoint save for step N (…) finalized successfully.`,
  NeMo 2's synchronous `Global Checkpoint Save : Rank: 0 : Iteration: N : … : Save duration: S s` (logged when the
  write is done: it completes the Lightning `saving model to …` line before it, or is a save of its own),
  torchtitan's last-step save (`Saving a full checkpoint at last step, step N.` … `Finished saving the checkpoint
  (or staging if async is enabled)in S seconds.`: at the last step titan saves in the foreground; elsewhere
  `Finished` may be the staging only, never counted), torch.distributed.checkpoint's process-based async saver
  (`Received async checkpoint request with id=…/step-N` … `Submitted checkpoint save request for
  checkpoint_id=…` — logged after the write returned, checked in torch's `_async_process_executor`).

**A save counts only with completion evidence**: the framework's completion line (Megatron's `successfully saved`,
DeepSpeed's last `is ready now!`, NeMo's `finalized successfully`), or — for the HF Trainer, Lightning and mmengine, which
print no end line but save inside the training loop — the training stepping past it: the next training step
logged after the save line, with no traceback (nor resume) between them (`confirm_saves`, `withdraw_saves`). A
save line with nothing after it (the pod lost mid-save, an HF `tmp-checkpoint-N` never renamed, a final save at
the end of training) is a save that started, never a checkpoint. The store's own markers are the other evidence
(drills.measure.ckpt_store).
- **Paths**: the step a checkpoint path names, DeepSpeed's tag dir (shared with `logresume`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from drills.measure.logformats import TrainingEvent
from drills.measure.logprefix import Record

__all__ = ["SaveReading"]


_SAVE_START = (  # groups: step, path
    ("megatron", re.compile(r"^\s*saving checkpoint at iteration\s+(?P<step>\d+) to (?P<path>\S+)")),
    ("deepspeed", re.compile(r"\[Torch\] Checkpoint (?:global_step)?(?P<step>\d+) is about to be saved")),
    # engine._save_checkpoint logs this before it writes the model states file (the start, not the end)
    ("deepspeed", re.compile(r"Saving model checkpoint: (?P<path>\S*?global_step(?P<step>\d+)\S*)")),
    # NeMo's ModelCheckpoint with async save: the request (the step comes with the finalize line)
    ("nemo", re.compile(r"Scheduled async checkpoint save for (?P<path>\S+)")),
)
# NeMo 2's MegatronCheckpointIO after a synchronous save (the Lightning `saving model to` line before it is the start)
_NEMO_SYNC_DONE = re.compile(r"Global Checkpoint Save : Rank: \d+ : Iteration: (?P<it>\d+) : .*Save duration: (?P<s>[\d.]+)s")
_TITAN_LAST = re.compile(r"Saving a (?:full|model (?:weights )?only|[\w ]+?) checkpoint (?:in \w+ )?at last step, step (?P<step>\d+)")
_TITAN_DONE = re.compile(r"Finished saving the checkpoint \(or staging if async is enabled\) ?in (?P<s>[\d.]+) seconds")
_DCP_START = re.compile(r"Received async checkpoint request with id=(?P<path>\S+)")
_DCP_DONE = re.compile(r"Submitted checkpoint save request for checkpoint_id=\S*?checkpoint_id='(?P<path>[^']+)'")
_NEMO_DONE = re.compile(r"Async checkpoint save for step (?P<step>\d+)\**\s*\((?P<path>[^()\s]+)\) finalized successfully")
_NEMO_STAMP = re.compile(r"^\[NeMo [IWE] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ")
_SAVE_SHARD = re.compile(r"\[Torch\] Saved (?P<path>\S+?)\.?$|\[Torch\] Checkpoint (?:global_step)?(?P<step>\d+) is ready now")
_SAVE_TIMER = re.compile(r"save-checkpoint\s*[.:]*\s*:?\s*(?:\((?P<min>[\d.]+),\s*(?P<max>[\d.]+)\)|(?P<one>[\d.]+))")
_DS_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_HF_STAMP = re.compile(r"\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) >>")
_MEGATRON_DONE = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+)(?: to (?P<path>\S+))?")
_HF_SAVE = re.compile(r"Saving model checkpoint to (?P<path>\S+)")
_LIGHTNING_SAVE = re.compile(r"saving model to '?(?P<path>[^'\s]+)'?")
# the HF Trainer's training-loop logs: a loss dict (a later logging step) or the end-of-training metrics — the loop
# got past every save before them (trainer.py `_maybe_log_save_evaluate` logs, evaluates, then saves)
_HF_LOOP_LOG = re.compile(r"^\s*\{'(?:loss|train_runtime)': ")
# mmengine's CheckpointHook logs this, then saves (hooks/checkpoint_hook.py); the next `Epoch(train)`/`Iter(train)`
# line is the loop past it. Epoch saves name no global step.
_MM_SAVE = re.compile(r" - mmengine - \w+ - Saving checkpoint at (?P<n>\d+) (?P<unit>iterations|epochs)")
_MM_LOOP = re.compile(r" - mmengine - \w+ - (?:Epoch|Iter)\(train\)")
_STEP_IN_PATH = re.compile(r"(?:checkpoint-|global_step|iter_0*|step[=_-]?)(?P<step>\d+)")


@dataclass
class _Save:
    step: int | None
    path: str | None
    framework: str
    started: datetime | None = None
    last_shard: datetime | None = None
    duration_s: float | None = None
    done: bool = False
    emitted: bool = False
    awaiting_step: bool = False  # HF/Lightning: no end line; complete once training steps past it


class SaveReading:
    """The save part of `LogReader` (its state lives on the reader)."""

    def _save(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        at = rec.at or _stamp(body) or self._last_at
        for fw, pattern in _SAVE_START:
            if m := pattern.search(body):
                self._consumed = True
                path = m.groupdict().get("path")
                step = int(m.group("step")) if m.groupdict().get("step") else _step_in(path)
                open_ = self._open_save()
                if fw == "deepspeed" and open_ is not None and open_.step == step:
                    open_.started = open_.started or _stamp(body)
                    open_.path = open_.path or (_ds_tag_dir(path) if path else None)
                    return []
                path = _ds_tag_dir(path) if fw == "deepspeed" and path else path
                self.saves.append(_Save(step, path, fw, started=_stamp(body) or rec.at))
                return [self._ev("checkpoint_started", rec, step=step, path=path)]
        if m := _NEMO_DONE.search(body):
            self._consumed = True
            step, path = int(m.group("step")), m.group("path")
            s = next((s for s in reversed(self.saves) if not s.done and s.framework == "nemo" and s.path == path), None)
            if s is None:
                s = _Save(step, path, "nemo")
                self.saves.append(s)
            s.step, s.done, s.emitted = step, True, True  # NeMo's global_step (the file name holds step-1)
            end = _stamp(body) or rec.at
            if s.started and end:
                s.duration_s = round((end - s.started).total_seconds(), 3)
            return [self._ev("checkpoint_saved", rec, step=step, path=path, duration_s=s.duration_s)]
        if out := self._other_save(rec):
            return out
        if re.search(r"\[Torch\] Saving \S", body):
            self._consumed = True
            return []
        if m := _SAVE_SHARD.search(body):
            self._consumed = True
            s = self._open_save() or self._last_save_for(m.group("step"))
            step = int(m.group("step")) if m.group("step") else _step_in(m.group("path") or "", tag=False)
            if s is None:
                s = _Save(step, _ds_tag_dir(m.group("path")) if m.group("path") else f"global_step{step}", "deepspeed",
                          started=None)
                self.saves.append(s)
            if m.group("path") and s.path is None:
                s.path = _ds_tag_dir(m.group("path"))
            shard_at = _stamp(body) or rec.at
            if shard_at is not None:
                s.last_shard = max(s.last_shard, shard_at) if s.last_shard else shard_at
            if s.framework == "deepspeed" and m.group("step"):
                s.done = True
            if s.started and s.last_shard:
                s.duration_s = round((s.last_shard - s.started).total_seconds(), 3)
            if s.done and s.framework == "deepspeed":
                s.emitted = True
                return [self._ev("checkpoint_saved", rec, step=s.step, path=s.path, duration_s=s.duration_s)]
            return []
        if m := _MEGATRON_DONE.search(body):
            step = int(m.group("step"))
            s = self._open_save()
            if s is None or s.step != step:
                s = _Save(step, m.group("path"), "megatron")
                self.saves.append(s)
            s.done, s.emitted = True, True
            s.path = m.group("path") or s.path
            if s.started and s.last_shard and s.duration_s is None:
                s.duration_s = round((s.last_shard - s.started).total_seconds(), 3)
            return [self._ev("checkpoint_saved", rec, step=step, path=s.path, duration_s=s.duration_s)]
        if m := _SAVE_TIMER.search(body):
            done = [s for s in self.saves if s.done]
            if done and done[-1].framework == "megatron":
                secs = float(m.group("max") or m.group("one")) / 1000.0
                done[-1].duration_s = round(secs, 3)
                return [self._ev("checkpoint_saved", rec, step=done[-1].step, path=done[-1].path,
                                 duration_s=done[-1].duration_s)]
            return []
        if _HF_LOOP_LOG.match(body):
            return self.confirm_saves(rec, "hf-trainer")
        if _MM_LOOP.search(body):
            return self.confirm_saves(rec, "mmengine")
        if m := _MM_SAVE.search(body):
            self._consumed = True
            step = int(m.group("n")) if m.group("unit") == "iterations" else None
            self.saves.append(_Save(step, None, "mmengine", started=rec.at, awaiting_step=True))
            return [self._ev("checkpoint_started", rec, step=step)]
        if m := _HF_SAVE.search(body):
            self._consumed = True
            path = m.group("path").rstrip(".")
            step = _step_in(path) if re.search(r"checkpoint-\d+", path) else None
            if self.saves and self.saves[-1].path == path and not self.saves[-1].done:
                return []
            self.saves.append(_Save(step, path, "hf-trainer", started=_stamp(body) or rec.at, awaiting_step=True))
            return [self._ev("checkpoint_started", rec, step=step, path=path)]
        if "global step" in body and (m := _LIGHTNING_SAVE.search(body)):
            self._consumed = True
            path = m.group("path")
            g = re.search(r"global step (\d+)", body)
            step = _step_in(path) if _step_in(path) is not None else int(g.group(1)) if g else None
            self.saves.append(_Save(step, path, "lightning", started=rec.at, awaiting_step=True))
            return [self._ev("checkpoint_started", rec, step=step, path=path)]
        del at
        return []

    def _other_save(self, rec: Record) -> list[TrainingEvent]:
        """NeMo 2's synchronous save, torchtitan's last-step save and DCP's process-based async save (start, end)."""
        body = rec.body
        if m := (_TITAN_LAST.search(body) or _DCP_START.search(body)):
            self._consumed = True
            path = m.groupdict().get("path")
            step = int(m.group("step")) if m.groupdict().get("step") else _step_in(path)
            self.saves.append(_Save(step, path, "torchtitan" if path is None else "dcp", started=rec.at))
            return [self._ev("checkpoint_started", rec, step=step, path=path)]
        m = _TITAN_DONE.search(body) or _DCP_DONE.search(body) or _NEMO_SYNC_DONE.search(body)
        if m is None:
            return []
        self._consumed = True
        kind = "torchtitan" if m.re is _TITAN_DONE else "dcp" if m.re is _DCP_DONE else "lightning"
        path = m.groupdict().get("path")
        s = next((s for s in reversed(self.saves) if not s.done and s.framework == kind
                  and (path is None or s.path == path)), None)
        if s is None and kind == "lightning":  # the -last copy NeMo writes after the top-k file: a save of its own
            last = next((s for s in reversed(self.saves) if s.framework == "lightning"), None)
            s = _Save(last.step if last else int(m.group("it")) + 1, None, "lightning")
            self.saves.append(s)
        if s is None:  # titan's `Finished` after a periodic save: maybe only staged (async); DCP's without its request
            return []
        s.done, s.emitted, s.awaiting_step = True, True, False
        if m.groupdict().get("s"):
            s.duration_s = float(m.group("s"))
        return [self._ev("checkpoint_saved", rec, step=s.step, path=s.path, duration_s=s.duration_s)]

    def confirm_saves(self, rec: Record, framework: str | None = None) -> list[TrainingEvent]:
        """A training step after an HF/Lightning save line (or the HF Trainer's next loop log): the loop got past
        the save, so it completed (the event carries that line's time: when its completion was evidenced)."""
        out = []
        for s in self.saves:
            if s.awaiting_step and framework in (None, s.framework):
                s.awaiting_step, s.done, s.emitted = False, True, True
                path = s.path.replace("/tmp-checkpoint-", "/checkpoint-") if s.path else s.path
                out.append(self._ev("checkpoint_saved", rec, step=s.step, path=path))
        return out

    def withdraw_saves(self) -> list[_Save]:
        """A traceback or a resume before the next training step: the HF/Lightning saves awaiting it never
        completed as far as the log can tell."""
        gone = [s for s in self.saves if s.awaiting_step]
        for s in gone:
            s.awaiting_step = False
        return gone

    def _open_save(self) -> _Save | None:
        s = self.saves[-1] if self.saves else None
        return s if s is not None and not s.done else None

    def _last_save_for(self, step: str | None) -> _Save | None:
        if step is None or not self.saves:
            return None
        s = self.saves[-1]
        return s if s.step == int(step) and s.framework == "deepspeed" else None


def _step_in(path: str | None, tag: bool = False) -> int | None:
    if not path:
        return None
    m = None
    for m in _STEP_IN_PATH.finditer(path):
        pass
    if m is not None:
        return int(m.group("step"))
    if tag:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        return int(last) if last.isdigit() else None
    return None


def _ds_tag_dir(path: str) -> str:
    """`ckpt/global_step100/mp_rank_00_model_states.pt` → `ckpt/global_step100` (the checkpoint's tag dir)."""
    path = path.rstrip(".")
    if re.search(r"\.(?:pt|pth|bin|safetensors)$", path) and "/" in path:
        return path.rsplit("/", 1)[0]
    return path


def _stamp(body: str) -> datetime | None:
    if m := _NEMO_STAMP.match(body):
        return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    m = _DS_STAMP.match(body) or _HF_STAMP.search(body)
    if not m:
        return None
    return datetime.strptime(f"{m.group(1)}.{m.group(2)}000", "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
