"""Checkpoint resumes, and the tracebacks that fail a resume (a part of `LogReader`; saves: `logsave`).

- **Resume**: an attempt (Megatron `loading checkpoint from … at iteration N`, HF `Loading model from …`,
  Lightning `Restoring states from the checkpoint path at …`, DeepSpeed `loading checkpoint …`) counts only
  when it succeeded: the framework's success line (Megatron `successfully loaded`, HF `Continuing training
  from global step N`, Lightning `Restored all states`, DeepSpeed `successfully loaded … ZeRO state_dicts` /
  `[Torch] Loaded checkpoint`). An attempt followed by an error or a traceback, a traceback through the
  framework's load function, Megatron's `will not load any checkpoints and will start from random`,
  DeepSpeed's `Client provided (zero) checkpoint load path(s) … does not exist` (a part of the state missing), or
  training steps without the success line where the framework prints one, is `resume_failed` with the
  error as its text. Lightning's `Loaded model weights from the checkpoint at …` (a `.test/.validate/.predict`
  load, not `fit`) withdraws its `Restoring states …` attempt: weights for evaluation, no training resume.
  Lightning's tuner (`scale_batch_size`, `lr_find`) restoring its own hidden `.scale_batch_size_<uuid>.ckpt` /
  `.lr_find_<uuid>.ckpt` after its trials puts back the state it saved a moment before: no resume either.
- **Tracebacks**: a Python traceback (chained ones as one) is an error with its exception line when printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from drills.measure.logformats import TrainingEvent
from drills.measure.lognccl import _EXC_LINE, _TB_CHAIN, _TB_FRAME, _TB_START, LogError, _is_nccl_exception
from drills.measure.logprefix import Record
from drills.measure.logsave import _ds_tag_dir, _Save, _step_in

__all__ = ["CheckpointReading"]


_RESUME_ATTEMPT = (  # (framework, pattern); groups: path, step
    ("megatron", re.compile(r"loading (?:\w+ )?checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)")),
    ("megatron", re.compile(r"global rank \d+ is loading checkpoint (?P<path>\S+)")),
    ("hf-trainer", re.compile(r"Loading model from (?P<path>\S*/\S*?)\.?\s*$")),
    ("hf-trainer", re.compile(r"Continuing training from checkpoint, will skip to saved global_step")),
    ("lightning", re.compile(r"Restoring states from the checkpoint(?: path)? at (?P<path>\S+)")),
    ("deepspeed", re.compile(r"_load_checkpoint\] (?:rank: \d+ |\[Rank \d+\] )?loading checkpoint:? (?P<path>\S+)")),
    ("deepspeed", re.compile(r"\[Torch\] Loading checkpoint from (?P<path>\S+?)(?:\.\.\.)?$")),
    ("torchtitan", re.compile(r"Loading the checkpoint at step (?P<step>\d+)")),
    # mmengine's runner (`load_or_resume`: auto-resume finds the latest, then `resume`); axolotl's auto-resume (HF Trainer)
    ("mmengine", re.compile(r" - mmengine - \w+ - (?:Auto resumed from the latest checkpoint|Resume checkpoint from) "
                            r"(?P<path>\S+?)\.?$")),
    ("hf-trainer", re.compile(r"Using Auto-resume functionality to start with checkpoint at (?P<path>\S+)")),
    ("twin", re.compile(r"loading checkpoint step=(?P<step>\d+)(?: path=(?P<path>\S+))?")),
)
_RESUME_OK = (
    ("megatron", re.compile(r"successfully loaded checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)")),
    ("megatron", re.compile(r"^\s*successfully loaded (?P<path>\S+\.pt)\s*$")),
    ("hf-trainer", re.compile(r"Continuing training from global step (?P<step>\d+)")),
    ("lightning", re.compile(r"Restored all states from the checkpoint(?: file| path)? at (?P<path>\S+)")),
    ("deepspeed", re.compile(r"successfully (?:loaded|read) \d+ ZeRO state_dicts")),
    ("deepspeed", re.compile(r"\[Torch\] Loaded checkpoint from (?P<path>\S+?)(?:\.\.\.|\.)?$")),
    ("torchtitan", re.compile(r"Finished loading the checkpoint in [\d.]+ seconds")),
    ("mmengine", re.compile(r" - mmengine - \w+ - resumed epoch: \d+, iter: (?P<step>\d+)")),  # runner.py `resume`
    ("twin", re.compile(r"resumed from checkpoint step=(?P<step>\d+)(?:.*?\bpath=(?P<path>\S+))?")),
)
# Lightning outside `fit` (`.test/.validate/.predict(ckpt_path=...)`) prints this instead of `Restored all states`
# (`_CheckpointConnector.resume_end`): only the weights were loaded, for evaluation — not a training resume
_LIGHTNING_WEIGHTS_ONLY = re.compile(r"Loaded model weights from (?:the )?checkpoint at (?P<path>\S+)")
# the tuner's temporary checkpoint (lightning tuner batch_size_scaling.py / lr_finder.py), deleted after the restore
_LIGHTNING_TUNER_CKPT = re.compile(r"Restor(?:ing|ed all) states from the checkpoint(?: file| path)? at "
                                   r"(?:\S*/)?\.(?:scale_batch_size|lr_find)_[\w-]+\.ckpt")
# torchtitan names its checkpoint folder once (`step-N` below it); step 0 is a seed checkpoint (model only): no resume
_TITAN_FOLDER = re.compile(r"Checkpoints will be loaded from and saved to (?P<path>\S+)")
_TB_FRAME_BARE = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_NO_CHECKPOINT = (
    re.compile(r"could not find the metadata file (?P<path>\S+)"),
    re.compile(r"will not load any checkpoints and will start from random"),
    re.compile(r"Can't find a valid checkpoint at (?P<path>\S+)"),
    re.compile(r"No valid checkpoint found in output directory"),
)
# DeepSpeed's own warnings that a load did not happen or restored only part of the state (engine.py
# `_load_checkpoint`: the model states file is missing, "... skip checkpoint load"; `_get_all_zero_checkpoints`:
# the ZeRO optimizer partitions are missing, so optimizer and fp32 master state start afresh — training goes on
# without the "successfully loaded … ZeRO state_dicts" line DeepSpeed otherwise prints). Groups: path, what.
_DS_LOAD_FAILED = (
    re.compile(r"Client provided checkpoint load path: (?P<path>\S+) does not exist"),
    re.compile(r"Client provided zero checkpoint load paths?: (?P<what>.*)"),
)
_LOAD_FRAMES = re.compile(r"^(?:load_checkpoint|_load_checkpoint|_load_from_checkpoint|_load_zero_checkpoint|"
                          r"_load_optimizer_and_scheduler|_restore_modules_and_callbacks|restore_model|"
                          r"restore_training_state|resume_start|_load_rng_state|load_checkpoint_and_dispatch)$")
_LOAD_ACTION = re.compile(r"\b(?:load_checkpoint|_load_from_checkpoint|resume_from_checkpoint)\b")
# Ray re-raises a remote task's exception in the driver; the remote traceback (frames, exception line, chained
# parts) follows as the message's continuation, under the header `ray::Actor.method() (pid=…, ip=…, …)`
_RAY_TASK_ERROR = re.compile(r"^ray\.exceptions\.RayTaskError(?:\(\w+\))?: ")
_SAVE_IN_TB = re.compile(r"\b_?\w*save\w*\b|write_record|PytorchStreamWriter|unexpected pos|No space left|"
                         r"Disk quota exceeded|Input/output error")
_LOAD_EXC = re.compile(r"The checkpoint being loaded used a DP world size")  # DeepSpeed refuses another DP size
_FRAMEWORK_PRINTS_SUCCESS = {"megatron", "hf-trainer", "lightning", "torchtitan", "mmengine", "twin"}
_ZERO_PARTITION = re.compile(r"zero_pp_rank_\d+_mp_rank_\d+_?optim_states")

# vLLM's logger header, before each line of a traceback it logs (`ERROR 06-13 11:37:08 [core.py:515] `, ≤ 0.7 without
# brackets); a V0 worker's failure prints the exception first, its traceback after (`Exception in worker …: <exc>, Traceback`)
_VLLM_LOGGER = re.compile(r"^(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d (?:\[[\w./-]+:\d+\]|[\w./-]+:\d+\]) ?")
_VLLM_WORKER_EXC = re.compile(r"^Exception in worker \S+ while processing method \w+: (?P<exc>.*), "
                              r"Traceback \(most recent call last\):$")


@dataclass
class _Resume:
    framework: str
    step: int | None
    path: str | None
    at: datetime | None
    state: str = "pending"  # pending | ok | failed
    reason: str | None = None
    tb: object = None  # the traceback that failed it
    zero_partitions: bool = False  # DeepSpeed loads ZeRO optimizer partitions: done at `successfully read N ZeRO …`


@dataclass
class _Traceback:
    start_at: datetime | None
    rank: int | None = None  # the launcher rank of the record that started it (`[rank2]: Traceback …`)
    frames: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    exception: str | None = None
    error: LogError | None = None
    closed: bool = False
    failed_resume: bool = False
    in_frames: bool = False  # its last line was a frame or code line (not a chain marker or a blank line)
    proc_pid: int | None = None  # the process prefix's pid it started under (`(VllmWorker rank=3 pid=268) Traceback …`)


class CheckpointReading:
    """The resume and traceback part of `LogReader` (its state lives on the reader)."""

    def _traceback(self, rec: Record) -> list[TrainingEvent]:
        body = _VLLM_LOGGER.sub("", rec.body, count=1)
        tb = self._tb
        if tb is not None and not tb.closed:
            other = rec.proc_pid is not None and tb.proc_pid is not None and rec.proc_pid != tb.proc_pid
            if _TB_START.match(body) and (tb.in_frames or other):  # another process's traceback, interleaved
                out = self._close_traceback(None)
                self._tb = _Traceback(rec.at, rec.rank, proc_pid=rec.proc_pid)
                return out
            if _TB_START.match(body) or _TB_CHAIN.match(body) or not body.strip():
                tb.in_frames = False
                return []
            if _RAY_TASK_ERROR.match(body):  # its message carries the remote task's traceback: one exception
                tb.exception, tb.in_frames = body.strip(), False
                return []
            # a frame, a code line, or a reporter's elision (`...[Deleted …]`, `…`) between frames
            # (a paste that lost the frames' indentation: `File "…", line N, in f` at column 0, inside an open one)
            if (m := _TB_FRAME.match(body) or _TB_FRAME_BARE.match(body)) or body.startswith((" ", "\t", "...", "\u2026")):
                if m:
                    tb.frames.append(m.group("func"))
                tb.texts.append(body)
                tb.in_frames = True
                return []
            return self._close_traceback(rec)
        if m := _TB_START.match(body):
            # IPython's header names the type
            self._tb = _Traceback(rec.at, rec.rank, exception=m.group("ipy"), proc_pid=rec.proc_pid)
            return []
        if m := _VLLM_WORKER_EXC.search(body):  # vLLM V0: the exception, then its traceback, in one record
            self._tb = _Traceback(rec.at, exception=m.group("exc"))
            return []
        if (m := _TB_FRAME.match(body)) and (tb is None or tb.closed):
            self._tb = _Traceback(rec.at, rec.rank, [m.group("func")], [body])
            return []
        if tb is None or tb.closed:  # a traceback whose start was cut: its `raise` line, or a qualified exception line
            if re.match(r"^\s+raise \w", body):
                self._tb = _Traceback(rec.at, [], [body])
                return []
            if (m := _EXC_LINE.match(body.strip())) and "." in m.group("name") and m.group("msg") \
                    and not _is_nccl_exception(body):  # the NCCL reader names those itself: not counted twice
                self._tb = _Traceback(rec.at)
                return self._close_traceback(rec)
        if tb is not None and tb.closed and tb.exception and (_TB_CHAIN.match(body)):
            tb.closed = False  # a chained traceback follows its exception line
            tb.in_frames = False
            self.errors.remove(tb.error) if tb.error in self.errors else None
            return []
        return []

    def _close_traceback(self, rec: Record | None) -> list[TrainingEvent]:
        tb = self._tb
        if tb is None or tb.closed:
            return []
        tb.closed = True
        body = _VLLM_LOGGER.sub("", rec.body, count=1).strip() if rec is not None else ""
        m = _EXC_LINE.match(body) if body else None
        if m:
            tb.exception = body
        if self._echoes_error_record(tb.exception):  # type: ignore[attr-defined]  (logelastic)
            return []
        rank = tb.rank if tb.rank is not None else (rec.rank if rec else None)
        err = LogError("traceback", tb.exception or "", tb.start_at, rank=rank,
                       frames=tuple(tb.frames), exception=tb.exception)
        tb.error = err
        # keep order: the traceback started before its exception line
        self.errors.append(err)
        out = [self._ev("error", rec, text=f"traceback: {err.detail}", error="traceback")]
        out += self._withdraw_tentative_save(tb, rec)
        loading = any(_LOAD_FRAMES.match(f) for f in tb.frames) or any(_LOAD_ACTION.search(t) for t in tb.texts) \
            or bool(tb.exception and _LOAD_EXC.search(tb.exception))
        pending = [r for r in self.resumes if r.state == "pending"]
        reason = err.detail
        if pending:
            for r in pending:
                out += self._fail(r, reason, rec)
                r.tb = tb
            tb.failed_resume = True
        elif tb.failed_resume:
            for r in self.resumes:
                if r.state == "failed" and r.tb is tb:
                    r.reason = reason  # a chained traceback: its last exception is the one to report
        elif loading and not (tb.exception and _is_nccl_exception(tb.exception)):
            r = _Resume(_framework_of_frames(tb.texts) or self.framework or "?", None, None, tb.start_at)
            if tb.exception and (m2 := _NO_CHECKPOINT[2].search(tb.exception)):
                r.path = m2.group("path")
                r.step = _step_in(r.path)
            self.resumes.append(r)
            out.append(self._ev("resume_attempt", rec, step=r.step, path=r.path))
            out += self._fail(r, reason, rec)
            r.tb = tb
            tb.failed_resume = True
        return out

    def _withdraw_tentative_save(self, tb: _Traceback, rec: Record | None) -> list[TrainingEvent]:
        """An HF/Lightning save line followed, before any training step, by a traceback: the save never got its
        completion evidence (logsave.confirm_saves); one through a save function or a write error is reported
        as a failed save."""
        saves = self.withdraw_saves()
        text = " ".join(tb.frames + tb.texts + [tb.exception or ""])
        if not saves or not _SAVE_IN_TB.search(text):
            return []
        return [self._ev("error", rec, step=s.step, path=s.path, error="checkpoint_save_failed",
                         text=f"save of {s.path} interrupted: {tb.exception or 'traceback'}") for s in saves]

    def _resume(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        out: list[TrainingEvent] = []
        for i, pattern in enumerate(_DS_LOAD_FAILED):
            if m := pattern.search(body):
                self._consumed = True
                r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
                if r is None:  # the model states file itself is missing: DeepSpeed returns before its load line
                    path = _ds_tag_dir(m.group("path")) if i == 0 else None
                    r = _Resume("deepspeed", _step_in(path, tag=True) if path else None, path, rec.at)
                    self.resumes.append(r)
                    out.append(self._ev("resume_attempt", rec, step=r.step, path=r.path))
                why = "the checkpoint file does not exist: nothing was loaded" if i == 0 else \
                    "the ZeRO optimizer partitions are missing: optimizer and fp32 master state were not restored"
                return out + self._fail(r, f"{why} ({body[m.start():].strip()[:300]})", rec)
        if _LIGHTNING_TUNER_CKPT.search(body):
            self._consumed = True
            return out
        if m := _LIGHTNING_WEIGHTS_ONLY.search(body):
            self._consumed = True
            r = next((r for r in reversed(self.resumes) if r.state == "pending" and r.framework == "lightning"), None)
            if r is not None:  # its `Restoring states from …` line was an evaluation load: no resume was attempted
                self.resumes.remove(r)
            return out
        for fw, pattern in _RESUME_OK:
            if m := pattern.search(body):
                g = m.groupdict()
                step = int(g["step"]) if g.get("step") else None
                path = g.get("path")
                self._consumed = True
                r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
                if r is None and (fw == "deepspeed" or (self.resumes and self.resumes[-1].state == "ok"
                                                        and self._steps_since_resume == 0)):
                    return []  # the same resume, confirmed again (by another rank or another shard)
                if r is None:
                    r = _Resume(fw, step, path, rec.at)
                    self.resumes.append(r)
                if r.state != "pending":
                    return []
                if fw == "deepspeed" and path and _ZERO_PARTITION.search(path):
                    r.zero_partitions = True  # one rank's partition: the load ends with DeepSpeed's ZeRO line
                    return []
                r.state = "ok"
                self._steps_since_resume = 0
                r.step = r.step if r.step is not None else (step if step is not None else _step_in(path))
                if fw == "twin" and path:
                    r.path = path
                r.path = r.path or path
                return [self._ev("resumed", rec, step=r.step, path=r.path)]
        for i, pattern in enumerate(_NO_CHECKPOINT):
            if m := pattern.search(body):
                self._consumed = True
                if i == 0:
                    path = m.group("path")
                    r = _Resume("megatron", None, path.rsplit("/", 1)[0] if "/" in path else path, rec.at)
                    self.resumes.append(r)
                    out.append(self._ev("resume_attempt", rec, path=r.path))
                    self._pending_no_ckpt = r
                    return out
                if i == 1:
                    r = self._pending_no_ckpt or _Resume("megatron", None, None, rec.at)
                    if r not in self.resumes:
                        self.resumes.append(r)
                    self._pending_no_ckpt = None
                    return self._fail(r, "no checkpoint found" + (f" at {r.path}" if r.path else "")
                                      + ": will not load any checkpoints and will start from random", rec)
                return []
        if m := _TITAN_FOLDER.search(body):
            self._titan_folder = m.group("path")
        for fw, pattern in _RESUME_ATTEMPT:
            if m := pattern.search(body):
                self._consumed = True
                g = m.groupdict()
                path = g.get("path") or (self._titan_folder if fw == "torchtitan" else None)
                if fw == "torchtitan" and g["step"] == "0":
                    return []  # the seed checkpoint: initial weights, not a resume
                if fw == "hf-trainer" and path is None:
                    if any(r.state == "pending" for r in self.resumes):
                        return []
                step = int(g["step"]) if g.get("step") else _step_in(path)
                if fw == "deepspeed" and path:
                    path = _ds_tag_dir(path)
                    step = step if step is not None else _step_in(path, tag=True)
                prev = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
                if prev is not None and (prev.path == path or fw == "deepspeed" and prev.framework == "deepspeed"):
                    return []
                r = _Resume(fw, step, path, rec.at)
                self.resumes.append(r)
                return [self._ev("resume_attempt", rec, step=step, path=path)]
        return out

    def _fail(self, r: _Resume, reason: str, rec: Record | None) -> list[TrainingEvent]:
        if r.state == "failed":
            return []
        r.state, r.reason = "failed", reason
        return [self._ev("resume_failed", rec, step=r.step, path=r.path, text=reason)]

    def _steps_started(self, rec: Record) -> list[TrainingEvent]:
        out: list[TrainingEvent] = []
        for r in self.resumes:
            if r.state != "pending":
                continue
            if r.framework in _FRAMEWORK_PRINTS_SUCCESS or r.zero_partitions:
                out += self._fail(r, f"training steps without the success line ({_framework_ok_line(r)})", rec)
            else:
                r.state = "ok"
                out.append(self._ev("resumed", rec, step=r.step, path=r.path))
        return out

    def _format_event(self, ev: TrainingEvent, rec: Record) -> list[TrainingEvent]:
        """A save / resume line only the profile's (or the twin's) patterns know."""
        if ev.kind == "checkpoint_saved":
            self.saves.append(_Save(ev.step, ev.path, "custom", done=True, emitted=True, duration_s=ev.duration_s))
            return [ev]
        r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
        if r is None:
            r = _Resume("custom", ev.step, ev.path, ev.at)
            self.resumes.append(r)
        r.state = "ok"
        r.step = ev.step if ev.step is not None else r.step
        r.path = ev.path or r.path
        return [replace(ev, step=r.step, path=r.path)]


def _framework_of_frames(texts: list[str]) -> str | None:
    joined = " ".join(texts)
    for fw, needle in (("megatron", "megatron/"), ("hf-trainer", "transformers/trainer"),
                       ("lightning", "lightning"), ("deepspeed", "deepspeed/")):
        if needle in joined:
            return fw
    return None


def _framework_ok_line(r: "_Resume | str") -> str:
    fw = r if isinstance(r, str) else r.framework
    if not isinstance(r, str) and r.zero_partitions:
        return "'successfully read N ZeRO state_dicts' after the ZeRO partition loads"
    return {"megatron": "'successfully loaded checkpoint'", "hf-trainer": "'Continuing training from global step'",
            "lightning": "'Restored all states from the checkpoint'",
            "torchtitan": "'Finished loading the checkpoint in'", "mmengine": "'resumed epoch: N, iter: N'",
            "twin": "'resumed from checkpoint'"}.get(fw, "?")
