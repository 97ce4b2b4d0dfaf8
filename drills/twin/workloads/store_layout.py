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
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path

__all__ = ["begin", "complete", "resume_step", "forget_completion", "LAYOUTS"]

log = logging.getLogger(__name__)

LAYOUTS = ("megatron", "deepspeed", "hf-trainer", "lightning", "twin")
TRACKER = "latest_checkpointed_iteration.txt"


def begin(root: Path, layout: str, step: int) -> None:
    """The save of `step` started: what the framework has written to `root` before its completion evidence."""
    root.mkdir(parents=True, exist_ok=True)
    if layout == "megatron":
        _write(root / f"iter_{step:07d}" / "mp_rank_00" / "model_optim_rng.pt", b"megatron shard\n")
    elif layout == "deepspeed":
        tag = root / f"global_step{step}"
        _write(tag / "mp_rank_00_model_states.pt", b"model states\n")
        _write(tag / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", b"zero shard\n")
    elif layout == "hf-trainer":
        stage = root / f"tmp-checkpoint-{step}"
        for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
            _write(stage / name, b"hf\n")
    elif layout == "lightning":
        pass  # `_atomic_save` writes into a temp file elsewhere and moves it in whole: nothing shows yet
    else:  # twin: torch.distributed.checkpoint (torchtitan's step-N)
        _write(root / f"step-{step}" / "__0_0.distcp", b"dcp shard\n")


def complete(root: Path, layout: str, step: int, meta: dict) -> None:
    """The save of `step` completed: the framework's completion evidence, written last."""
    begin_dirs = {"megatron": root / f"iter_{step:07d}", "deepspeed": root / f"global_step{step}",
                  "hf-trainer": root / f"tmp-checkpoint-{step}", "twin": root / f"step-{step}"}
    if layout in begin_dirs and not begin_dirs[layout].exists():
        begin(root, layout, step)
    if layout == "megatron":
        _write(root / TRACKER, f"{step}".encode())
    elif layout == "deepspeed":
        _write(root / "latest", f"global_step{step}".encode())
    elif layout == "hf-trainer":
        stage, final = root / f"tmp-checkpoint-{step}", root / f"checkpoint-{step}"
        _write(stage / "trainer_state.json", json.dumps({"global_step": step, **meta}).encode())
        if final.exists():
            shutil.rmtree(final)
        os.replace(stage, final)
    elif layout == "lightning":
        root.mkdir(parents=True, exist_ok=True)
        final = root / f"epoch=0-step={step}.ckpt"
        tmp = root.parent / f".{root.name}.{final.name}.tmp"  # outside the directory, as fsspec's mkstemp
        _write(tmp, json.dumps({"global_step": step, **meta}).encode())
        os.replace(tmp, final)
    else:
        _write(root / f"step-{step}" / ".metadata", json.dumps({"step": step, **meta}).encode())


def forget_completion(root: Path, layout: str, step: int, previous: int | None) -> None:
    """Undo `step`'s completion evidence, as a store that lost the last writes would (defect lost-last-save): the
    pointer back at `previous`, the completion file gone; the shards written before stay."""
    if layout == "megatron":
        if previous is None:
            (root / TRACKER).unlink(missing_ok=True)
        else:
            _write(root / TRACKER, f"{previous}".encode())
    elif layout == "deepspeed":
        if previous is None:
            (root / "latest").unlink(missing_ok=True)
        else:
            _write(root / "latest", f"global_step{previous}".encode())
    elif layout == "hf-trainer":
        final = root / f"checkpoint-{step}"
        if final.exists():
            (final / "trainer_state.json").unlink(missing_ok=True)
            os.replace(final, root / f"tmp-checkpoint-{step}")
    elif layout == "lightning":
        (root / f"epoch=0-step={step}.ckpt").unlink(missing_ok=True)
    else:
        (root / f"step-{step}" / ".metadata").unlink(missing_ok=True)


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


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
