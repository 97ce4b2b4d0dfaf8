"""The latest checkpoint, read from the store: a framework-aware reader of a checkpoint directory.

Pure: `read_store(entries, contents)` takes a listing of the checkpoint directory (paths relative to it, each a
directory or a file, two levels deep: what `find DIR -maxdepth 2 -type d` / `-type f` print) and the text of
the few small pointer files it names (`pointer_files`), and says which checkpoints the store holds and which of
them are **complete** — by the completion evidence each framework itself writes, never by a log line:

| framework | layout | complete when (source) |
|---|---|---|
| Megatron-LM | `iter_NNNNNNN/`, `latest_checkpointed_iteration.txt` | the tracker names an iteration ≥ it: rank 0 writes it in `iter_finalize_fn` after every rank saved (megatron/training/checkpointing.py@d98e8a64); a `torch_dist` dir also needs its `metadata.json`, written by `metadata_finalize_fn` after the shards (megatron/core/dist_checkpointing/serialization.py@d98e8a64) |
| DeepSpeed | `global_stepN/`, `latest` | `latest` names a tag ≥ it: rank 0 writes it after `checkpoint_engine.commit(tag)` (deepspeed/runtime/engine.py@38327e07, `save_checkpoint`) |
| HF Trainer | `checkpoint-N/` (`tmp-checkpoint-N/` while staged in v4.36) | `trainer_state.json` inside: `_save_checkpoint` writes it after model, optimizer, scheduler, scaler and RNG state (src/transformers/trainer.py); a `tmp-checkpoint-N` is a staging dir never renamed, never a checkpoint (`get_last_checkpoint` matches only `^checkpoint-(\\d+)$`) |
| Lightning | `*step=N*.ckpt` files, `last.ckpt` | the file exists: `_atomic_save` writes it under `fs.transaction` (a temp file moved into place; src/lightning/fabric/utilities/cloud_io.py@d4a30c98); `last.ckpt` names no step |
| NeMo 2 | `…-step=N…/` dirs (`…-last`) | no `<checkpoint>-unfinished` marker beside it: `_save_checkpoint` sets it first, removes it when the save (or the async finalize) ends (nemo/lightning/pytorch/callbacks/model_checkpoint.py@8cfedd72) |
| mmengine | `iter_N.pth` (`epoch_N.pth`), `last_checkpoint` | `last_checkpoint` names it or a later one: the CheckpointHook writes that file on the main process after `runner.save_checkpoint` returned (mmengine/hooks/checkpoint_hook.py@25434293, `_save_checkpoint_with_step`); the `.pth` itself is written in place, not atomically. Epoch files name no global step: noted, not judged |
| torch.distributed.checkpoint / torchtitan | `step-N/` | `.metadata` inside (or `model.safetensors.index.json`): written by the coordinator's `finish` after every rank's shards; torchtitan's `_find_load_step` counts only those (torchtitan/components/checkpoint.py@2f0eb429) |

A pointer naming a checkpoint the listing does not hold, or a checkpoint step ahead of its pointer, is a save
that never completed; a pointer naming an empty directory is not a checkpoint (the store's contents decide). A
listing with modification times (GNU `find -printf`, `parse_find_printf`) gives each checkpoint when its completion
evidence was written (`completed_at`) and when anything in it last changed: drills/measure/ckpt_asof.py reads the
store as it was at the fault from them. What the reader cannot place (no layout it knows) leaves `framework` None: the drill then
says the store was unreadable, it never guesses.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Literal

__all__ = ["Entry", "StoreCheckpoint", "StoreReading", "read_store", "pointer_files", "parse_find", "parse_find_printf",
           "FIND_PRINTF", "FRAMEWORKS", "store_root_of"]

log = logging.getLogger(__name__)

FRAMEWORKS = ("megatron", "deepspeed", "hf-trainer", "nemo", "lightning", "mmengine", "dcp")
Framework = Literal["megatron", "deepspeed", "hf-trainer", "nemo", "lightning", "mmengine", "dcp"]

MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
DEEPSPEED_LATEST = "latest"
HF_STATE = "trainer_state.json"
NEMO_UNFINISHED = "-unfinished"
MMENGINE_LAST = "last_checkpoint"
_MM_ITER = re.compile(r"^iter_(\d+)\.pth$")
_ITER = re.compile(r"^iter_(\d{7})$")
_GLOBAL_STEP = re.compile(r"^global_step(\d+)$")
_HF = re.compile(r"^checkpoint-(\d+)$")
_HF_TMP = re.compile(r"^tmp-checkpoint-(\d+)$")
_STEP_EQ = re.compile(r"(?:^|[-_])step=(\d+)")
_DCP = re.compile(r"^step-(\d+)$")
# GNU find's `-printf`: the entry's type (d, f, l…), its modification time in epoch seconds with a fraction, its path
FIND_PRINTF = "%y %T@ %p\\n"


@dataclass(frozen=True)
class Entry:
    """One path of the listing, relative to the checkpoint directory."""

    path: str
    is_dir: bool
    mtime: float | None = None  # epoch seconds (GNU find -printf %T@); None: a listing without times

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.path.split("/") if p and p != ".")


@dataclass(frozen=True)
class StoreCheckpoint:
    """A checkpoint the store holds: its step, its path in the directory, whether it is complete and why."""

    step: int
    name: str
    complete: bool
    evidence: str  # "named by latest_checkpointed_iteration.txt (7500)", "no trainer_state.json: the save never ended"
    # when its completion evidence was last written (epoch s; None: no times) and whether that file is its own
    # (trainer_state.json, .metadata, the .ckpt) or a pointer shared by every save (Megatron's tracker, `latest`),
    # which moves on with each later save; `changed_at`: the latest time anything in it changed
    completed_at: float | None = None
    own_evidence: bool = True
    changed_at: float | None = None


@dataclass(frozen=True)
class StoreReading:
    """What the store holds. `problem` says why nothing could be judged (None: the directory was read)."""

    framework: str | None
    checkpoints: tuple[StoreCheckpoint, ...] = ()
    source: str = ""  # "store listing pod/ckpt-reader-… of /ckpt/llm-finetune-8b @ 12:03:04"
    problem: str | None = None
    pointer: str | None = None  # what the framework's pointer file says ("7500", "global_step7500")
    notes: tuple[str, ...] = field(default=())
    timed: bool = False  # the listing carries modification times (GNU find -printf)
    read_at: float | None = None  # cluster epoch s when the listing began (None: unknown)
    read_done: float | None = None  # … and when its last command answered
    root_changed_at: float | None = None  # the directory's own mtime: the last entry added, removed or renamed in it

    @property
    def readable(self) -> bool:
        return self.problem is None and self.framework is not None

    @property
    def latest_complete(self) -> StoreCheckpoint | None:
        done = [c for c in self.checkpoints if c.complete]
        return max(done, key=lambda c: c.step) if done else None

    @property
    def incomplete(self) -> tuple[StoreCheckpoint, ...]:
        return tuple(sorted((c for c in self.checkpoints if not c.complete), key=lambda c: c.step))

    def holds_complete(self, step: int) -> bool:
        return any(c.complete and c.step == step for c in self.checkpoints)

    def details(self) -> dict:
        latest = self.latest_complete
        return {"framework": self.framework, "source": self.source, "problem": self.problem, "pointer": self.pointer,
                "latest_complete": latest and latest.step, "latest_complete_path": latest and latest.name,
                "incomplete": [f"{c.name} ({c.evidence})" for c in self.incomplete],
                "complete": sorted(c.step for c in self.checkpoints if c.complete), "timed": self.timed,
                "notes": list(self.notes)}


def parse_find(root: str, dirs: str, files: str) -> list[Entry]:
    """The listing from `find ROOT -maxdepth 2 -type d` and `-type f` output (one absolute path a line)."""
    base = root.rstrip("/") + "/"
    out: list[Entry] = []
    for text, is_dir in ((dirs, True), (files, False)):
        for line in text.splitlines():
            line = line.strip()
            if line.startswith(base):
                out.append(Entry(line[len(base):], is_dir))
    return out


def parse_find_printf(root: str, text: str) -> list[Entry]:
    """The listing from `find ROOT -maxdepth 2 -printf FIND_PRINTF`: `TYPE MTIME PATH` a line, the root itself kept
    as the entry "." (its mtime says when an entry was last added to or removed from it)."""
    base = root.rstrip("/")
    out: list[Entry] = []
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        stamp, _, path = rest.partition(" ")
        try:
            mtime = float(stamp)
        except ValueError:
            continue
        if path == base:
            out.append(Entry(".", True, mtime))
        elif path.startswith(base + "/"):
            out.append(Entry(path[len(base) + 1:], kind == "d", mtime))
    return out


def pointer_files(entries: Iterable[Entry]) -> list[str]:
    """The small files whose text the reader needs (the frameworks' pointers), relative paths."""
    names = {e.path for e in entries if not e.is_dir and len(e.parts) == 1}
    return [n for n in (MEGATRON_TRACKER, DEEPSPEED_LATEST, MMENGINE_LAST) if n in names]


def detect(entries: list[Entry]) -> str | None:
    """Which framework's layout the top level of the directory is (None: none this reader knows)."""
    top = [e for e in entries if len(e.parts) == 1]
    names = {e.parts[0] for e in top}
    dirs = {e.parts[0] for e in top if e.is_dir}
    files = names - dirs
    if MEGATRON_TRACKER in files or any(_ITER.match(d) for d in dirs):
        return "megatron"
    if MMENGINE_LAST in files or any(_MM_ITER.match(f) for f in files):
        return "mmengine"
    if DEEPSPEED_LATEST in files or any(_GLOBAL_STEP.match(d) for d in dirs):
        return "deepspeed"
    if any(_HF.match(d) or _HF_TMP.match(d) for d in dirs):
        return "hf-trainer"
    if any(n.endswith(NEMO_UNFINISHED) for n in files) or any(_STEP_EQ.search(d) for d in dirs):
        return "nemo"
    if any(f.endswith(".ckpt") for f in files):
        return "lightning"
    if any(_DCP.match(d) for d in dirs):
        return "dcp"
    return None


def read_store(entries: list[Entry], contents: dict[str, str], framework: str = "auto",
               source: str = "") -> StoreReading:
    """The checkpoints the listing holds and which are complete (module docstring: the rules and their sources)."""
    root = next((e for e in entries if e.path == "."), None)
    entries = [e for e in entries if e.parts]
    timed = bool(entries) and all(e.mtime is not None for e in entries)
    fw = detect(entries) if framework in ("auto", None) else framework
    if fw is None:
        what = "an empty directory" if not entries else "no checkpoint layout this reader knows"
        return StoreReading(None, (), source, f"the checkpoint directory holds {what}")
    reader = _READERS.get(fw)
    if reader is None:
        return StoreReading(fw, (), source, f"no store reader for framework {fw!r} (known: {', '.join(FRAMEWORKS)})")
    checkpoints, pointer, problem = reader(entries, contents)
    if timed:
        checkpoints = [_timed(c, entries, fw) for c in checkpoints]
    return StoreReading(fw, tuple(sorted(checkpoints, key=lambda c: c.step)), source, problem, pointer, timed=timed,
                        root_changed_at=root.mtime if root and timed else None)


def store_root_of(path: str) -> str:
    """The checkpoint directory a save path lies in: `…/checkpoint-N`, `…/global_stepN/…`, `…/iter_N`,
    `…/step-N`, `…/epoch=0-step=N.ckpt` → its parent; a Megatron `--save` dir stays itself."""
    parts = [p for p in path.rstrip("/").split("/")]
    for i, part in enumerate(parts):
        if (_ITER.match(part) or _GLOBAL_STEP.match(part) or _HF.match(part) or _HF_TMP.match(part)
                or _DCP.match(part) or _STEP_EQ.search(part)):
            return "/".join(parts[:i]) or "/"
    return "/".join(parts) or "/"


# the file whose writing made a checkpoint complete, per framework: its own (a name inside, or the checkpoint itself),
# or the pointer every save rewrites
_OWN_EVIDENCE = {"hf-trainer": HF_STATE, "dcp": ".metadata", "lightning": "", "nemo": ""}
_POINTER = {"megatron": MEGATRON_TRACKER, "deepspeed": DEEPSPEED_LATEST, "mmengine": MMENGINE_LAST}


def _timed(c: StoreCheckpoint, entries: list[Entry], fw: str) -> StoreCheckpoint:
    """`c` with when its completion evidence was written and when anything in it last changed."""
    times = {e.path: e.mtime for e in entries}
    inside = [e.mtime for e in entries if e.parts[0] == c.name and e.mtime is not None]
    changed = max(inside) if inside else None
    if fw in _POINTER:
        return replace(c, completed_at=times.get(_POINTER[fw]), own_evidence=False, changed_at=changed)
    own = _OWN_EVIDENCE.get(fw, "")
    if fw == "dcp" and f"{c.name}/.metadata" not in times:
        own = "model.safetensors.index.json"
    at = times.get(f"{c.name}/{own}" if own else c.name)
    return replace(c, completed_at=at, changed_at=changed)


# -- one reader per framework: (checkpoints, pointer text, problem) ------------------------------------------
def _empty_dir(entries: list[Entry], name: str) -> bool:
    """A checkpoint directory of the listing with nothing in it (a file checkpoint is never "empty" here)."""
    is_dir = any(e.is_dir and e.parts == (name,) for e in entries)
    return is_dir and not _children(entries, name)


def _children(entries: list[Entry], name: str) -> set[str]:
    return {e.parts[1] for e in entries if len(e.parts) == 2 and e.parts[0] == name}


def _top_dirs(entries: list[Entry], pattern: re.Pattern) -> list[tuple[int, str]]:
    return [(int(m.group(1)), e.parts[0]) for e in entries
            if e.is_dir and len(e.parts) == 1 and (m := pattern.match(e.parts[0]))]


def _pointed(entries, contents, pointer_name, dirs, parse):
    text = contents.get(pointer_name)
    value = text.strip() if text is not None else None
    pointed = parse(value) if value else None
    out = []
    for step, name in dirs:
        if pointed is None:
            why = (f"{pointer_name} is empty or unreadable ({value!r})" if value is not None
                   else f"no {pointer_name}: the framework writes it only after a save completes")
            out.append(StoreCheckpoint(step, name, False, why))
        elif step <= pointed and _empty_dir(entries, name):  # the pointer's word against the store's own contents
            out.append(StoreCheckpoint(step, name, False, f"{pointer_name} names {value} but {name}/ holds nothing: "
                                                          "no shard to load"))
        elif step <= pointed:
            out.append(StoreCheckpoint(step, name, True, f"at or before the step {pointer_name} names ({value})"))
        else:
            out.append(StoreCheckpoint(step, name, False, f"after the step {pointer_name} names ({value}): its save "
                                                          "never completed"))
    problem = None
    if pointed is not None and not any(step == pointed for step, _ in dirs):
        problem = f"{pointer_name} names {value} but the store holds no such checkpoint"
    return out, value, problem


def _megatron(entries, contents):
    def parse(value):
        return int(value) if value.isdigit() else None  # `release`: a converted checkpoint, no training step

    out, value, problem = _pointed(entries, contents, MEGATRON_TRACKER, _top_dirs(entries, _ITER), parse)
    checked = []
    for c in out:
        inside = _children(entries, c.name)
        torch_dist = ".metadata" in inside or any(n.endswith(".distcp") for n in inside)
        if c.complete and torch_dist and "metadata.json" not in inside:
            c = StoreCheckpoint(c.step, c.name, False, "a torch_dist checkpoint without metadata.json: its finalize "
                                                       "never ran")
        checked.append(c)
    return checked, value, problem


def _deepspeed(entries, contents):
    def parse(value):
        m = _GLOBAL_STEP.match(value)
        return int(m.group(1)) if m else None

    return _pointed(entries, contents, DEEPSPEED_LATEST, _top_dirs(entries, _GLOBAL_STEP), parse)


def _hf(entries, contents):
    out = []
    for step, name in _top_dirs(entries, _HF):
        if HF_STATE in _children(entries, name):
            out.append(StoreCheckpoint(step, name, True, f"{HF_STATE} written (the Trainer's last file of a save)"))
        else:
            out.append(StoreCheckpoint(step, name, False, f"no {HF_STATE}: the save never ended"))
    for step, name in _top_dirs(entries, _HF_TMP):
        out.append(StoreCheckpoint(step, name, False, "a staging dir never renamed to checkpoint-N: the save never "
                                                      "completed"))
    return out, None, None


def _nemo(entries, contents):
    top = {e.parts[0]: e.is_dir for e in entries if len(e.parts) == 1}
    markers = {n[:-len(NEMO_UNFINISHED)] for n, d in top.items() if not d and n.endswith(NEMO_UNFINISHED)}
    out = []
    for name, is_dir in top.items():
        m = _STEP_EQ.search(name)
        if not m or name.endswith(NEMO_UNFINISHED) or (not is_dir and not name.endswith(".ckpt")):
            continue
        base = name.removesuffix(".ckpt").removesuffix("-EMA")
        if base in markers:
            out.append(StoreCheckpoint(int(m.group(1)), name, False, f"{base}{NEMO_UNFINISHED} marker: the save "
                                                                     "never finished"))
        else:
            out.append(StoreCheckpoint(int(m.group(1)), name, True, f"no {NEMO_UNFINISHED} marker"))
    return out, None, None


def _lightning(entries, contents):
    out = []
    for e in entries:
        if not e.is_dir and len(e.parts) == 1 and e.path.endswith(".ckpt") and (m := _STEP_EQ.search(e.path)):
            out.append(StoreCheckpoint(int(m.group(1)), e.path, True, "the .ckpt file exists (written whole, then "
                                                                      "moved into place)"))
    return out, None, None


def _mmengine(entries, contents):
    files = [(int(m.group(1)), e.path) for e in entries
             if not e.is_dir and len(e.parts) == 1 and (m := _MM_ITER.match(e.path))]

    def parse(value):  # `last_checkpoint` holds the path of the iteration file the CheckpointHook saved last
        m = _MM_ITER.match(value.rsplit("/", 1)[-1])
        return int(m.group(1)) if m else None

    return _pointed(entries, contents, MMENGINE_LAST, files, parse)


def _dcp(entries, contents):
    out = []
    for step, name in _top_dirs(entries, _DCP):
        inside = _children(entries, name)
        if ".metadata" in inside or "model.safetensors.index.json" in inside:
            out.append(StoreCheckpoint(step, name, True, ".metadata written (after every rank's shards)"))
        else:
            out.append(StoreCheckpoint(step, name, False, "no .metadata: the save never finished"))
    return out, None, None


_READERS = {"megatron": _megatron, "deepspeed": _deepspeed, "hf-trainer": _hf, "nemo": _nemo,
            "lightning": _lightning, "mmengine": _mmengine, "dcp": _dcp}
