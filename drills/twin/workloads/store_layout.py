"""What each framework writes into its checkpoint directory, in the order it writes it (the twin's store).

A save is two moments: `begin` (the framework starts writing: its checkpoint directory and shards appear) and
`complete` (its completion evidence: Megatron's `latest_checkpointed_iteration.txt`, DeepSpeed's `latest`, the HF
Trainer's `trainer_state.json` then the rename of `tmp-checkpoint-N` (v4.36's staging), Lightning's `.ckpt` moved
into place whole, torch.distributed.checkpoint's `.metadata`). A save cut off between them leaves what a real one
leaves. `resume_step` is what the framework's own resume picks from the directory — Megatron and DeepSpeed follow
their pointer, the HF Trainer's `get_last_checkpoint` takes the highest `checkpoint-N` directory, Lightning the
newest `.ckpt`, torchtitan the highest `step-N` with a `.metadata` — so a twin job resumes exactly as the
framework would from what the store holds. The drills read it with their own reader (drills.measure.ckpt_store),
through a pod, never through this module. Shard files are small stand-ins (the bytes are the save model's, not the
store's): names and order are the frameworks'.

Every write carries the cluster time it happened at (`at`, epoch s): the file written, and each directory an entry
was added to or removed from, get that mtime (`os.utime`), as a real store's would on the cluster's clock — the
drills read them (`find -printf %T@`) to tell what the store held at the fault. A lost completion
(`forget_completion`) never reached the store, so it leaves the mtimes the store had before it (`mtimes` taken
before `complete`), except where a later write changed them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path

__all__ = ["begin", "complete", "resume_step", "forget_completion", "mtimes", "LAYOUTS"]

log = logging.getLogger(__name__)

LAYOUTS = ("megatron", "deepspeed", "hf-trainer", "lightning", "twin")
TRACKER = "latest_checkpointed_iteration.txt"


def begin(root: Path, layout: str, step: int, at: float | None = None) -> None:
    """The save of `step` started: what the framework has written to `root` before its completion evidence."""
    _mkdir(root, at)
    if layout == "megatron":
        _write(root / f"iter_{step:07d}" / "mp_rank_00" / "model_optim_rng.pt", b"megatron shard\n", at)
    elif layout == "deepspeed":
        tag = root / f"global_step{step}"
        _write(tag / "mp_rank_00_model_states.pt", b"model states\n", at)
        _write(tag / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", b"zero shard\n", at)
    elif layout == "hf-trainer":
        stage = root / f"tmp-checkpoint-{step}"
        for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
            _write(stage / name, b"hf\n", at)
    elif layout == "lightning":
        pass  # `_atomic_save` writes into a temp file elsewhere and moves it in whole: nothing shows yet
    else:  # twin: torch.distributed.checkpoint (torchtitan's step-N)
        _write(root / f"step-{step}" / "__0_0.distcp", b"dcp shard\n", at)


def complete(root: Path, layout: str, step: int, meta: dict, at: float | None = None) -> None:
    """The save of `step` completed: the framework's completion evidence, written last."""
    begin_dirs = {"megatron": root / f"iter_{step:07d}", "deepspeed": root / f"global_step{step}",
                  "hf-trainer": root / f"tmp-checkpoint-{step}", "twin": root / f"step-{step}"}
    if layout in begin_dirs and not begin_dirs[layout].exists():
        begin(root, layout, step, at)
    if layout == "megatron":
        _write(root / TRACKER, f"{step}".encode(), at)
    elif layout == "deepspeed":
        _write(root / "latest", f"global_step{step}".encode(), at)
    elif layout == "hf-trainer":
        stage, final = root / f"tmp-checkpoint-{step}", root / f"checkpoint-{step}"
        _write(stage / "trainer_state.json", json.dumps({"global_step": step, **meta}).encode(), at)
        kept = _mtime(stage)
        if final.exists():
            shutil.rmtree(final)
        os.replace(stage, final)
        _stamp(final, kept)
        _stamp(root, at)
    elif layout == "lightning":
        _mkdir(root, at)
        final = root / f"epoch=0-step={step}.ckpt"
        tmp = root.parent / f".{root.name}.{final.name}.tmp"  # outside the directory, as fsspec's mkstemp
        _write(tmp, json.dumps({"global_step": step, **meta}).encode(), at)
        os.replace(tmp, final)
        _stamp(root, at)
        _stamp(root.parent, at)
    else:
        _write(root / f"step-{step}" / ".metadata", json.dumps({"step": step, **meta}).encode(), at)


def forget_completion(root: Path, layout: str, step: int, previous: int | None,
                      before: dict[str, float] | None = None, completed_at: float | None = None) -> None:
    """Undo `step`'s completion evidence, as a store that lost the last writes would (defect lost-last-save): the
    pointer back at `previous`, the completion file gone; the shards written before stay. `before`: the mtimes
    (`mtimes`) taken before the completion at `completed_at`: what the lost writes changed gets them back."""
    pre = mtimes(root)
    renamed = {}
    if layout == "megatron":
        if previous is None:
            (root / TRACKER).unlink(missing_ok=True)
        else:
            _write(root / TRACKER, f"{previous}".encode(), None)
    elif layout == "deepspeed":
        if previous is None:
            (root / "latest").unlink(missing_ok=True)
        else:
            _write(root / "latest", f"global_step{previous}".encode(), None)
    elif layout == "hf-trainer":
        final = root / f"checkpoint-{step}"
        if final.exists():
            (final / "trainer_state.json").unlink(missing_ok=True)
            os.replace(final, root / f"tmp-checkpoint-{step}")
            renamed[f"tmp-checkpoint-{step}"] = f"checkpoint-{step}"
    elif layout == "lightning":
        (root / f"epoch=0-step={step}.ckpt").unlink(missing_ok=True)
    else:
        (root / f"step-{step}" / ".metadata").unlink(missing_ok=True)
    if before is None or completed_at is None:
        return
    for rel, now in mtimes(root).items():  # the lost writes' stamps back to before them; a later write's kept
        was = pre.get(renamed.get(rel, rel))
        keep = was if was is not None and was > completed_at + 1e-3 else before.get(rel, was)
        if keep is not None and keep != now:
            _stamp(root / rel if rel != "." else root, keep)


def mtimes(root: Path) -> dict[str, float]:
    """The mtime of `root` (".") and of every entry two levels deep in it (what the drills' listing shows)."""
    out = {}
    if not root.is_dir():
        return out
    out["."] = _mtime(root)
    for top in os.listdir(root):
        out[top] = _mtime(root / top)
        if (root / top).is_dir():
            for name in os.listdir(root / top):
                out[f"{top}/{name}"] = _mtime(root / top / name)
    return {k: v for k, v in out.items() if v is not None}


def resume_step(root: Path, layout: str) -> int | None:
    """The step the framework's own resume loads from `root` (None: it finds no checkpoint)."""
    if not root.is_dir():
        return None
    if layout == "megatron":
        text = _read(root / TRACKER)
        return int(text) if text and text.isdigit() and (root / f"iter_{int(text):07d}").is_dir() else None
    if layout == "deepspeed":
        m = re.fullmatch(r"global_step(\d+)", _read(root / "latest") or "")
        return int(m.group(1)) if m and (root / m.group(0)).is_dir() else None
    names = os.listdir(root)
    if layout == "hf-trainer":
        steps = [int(m.group(1)) for n in names if (m := re.fullmatch(r"checkpoint-(\d+)", n))]
    elif layout == "lightning":
        steps = [int(m.group(1)) for n in names if n.endswith(".ckpt") and (m := re.search(r"step=(\d+)", n))]
    else:
        steps = [int(m.group(1)) for n in names
                 if (m := re.fullmatch(r"step-(\d+)", n)) and (root / n / ".metadata").is_file()]
    return max(steps) if steps else None


def _write(path: Path, data: bytes, at: float | None) -> None:
    """Write `path` at cluster time `at`: it, the directories created for it and their parents get that mtime."""
    new = _missing(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    for p in (path, *new, *(n.parent for n in new)):
        _stamp(p, at)


def _mkdir(path: Path, at: float | None) -> None:
    new = _missing(path)
    path.mkdir(parents=True, exist_ok=True)
    for p in (*new, *(n.parent for n in new)):
        _stamp(p, at)


def _missing(path: Path) -> list[Path]:
    out, p = [], path
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def _stamp(path: Path, at: float | None) -> None:
    if at is not None:
        try:
            os.utime(path, (at, at))
        except OSError:
            pass  # removed meanwhile


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
