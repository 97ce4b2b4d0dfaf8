"""What the twin's training workers print, in the format of the framework the profile names.

Every line is shaped after a real one in `tests/data/real/logs/` (the file is named next to each
shape), so the drills read the twin exactly as they read a real cluster:

- `megatron` (Megatron-LM): ` iteration N/ M | consumed samples: … | elapsed time per iteration (ms): … |`,
  `saving checkpoint at iteration N to DIR` / `  successfully saved checkpoint at iteration N to DIR` and
  its `save-checkpoint` timer, ` loading checkpoint from DIR at iteration N` / `  successfully loaded …`.
- `hf-trainer` (Hugging Face Trainer): `{'loss': …, 'epoch': …}` dicts and tqdm bars,
  `[INFO|trainer.py:…] … >> Saving model checkpoint to DIR/checkpoint-N`, `Loading model from …` and
  `Continuing training from global step N`.
- `deepspeed`: `steps: N loss: … iter time (s): … samples/sec: …`, `[Torch] Checkpoint global_stepN is
  about to be saved!` … shards … `is ready now!`, `_load_checkpoint] rank: R loading checkpoint: …` and
  `successfully loaded N ZeRO state_dicts for rank R`.
- `lightning` (PyTorch Lightning 2.x): `Epoch 0:  6%|▌ | N/M [… it/s, v_num=0, train_loss=…]`,
  ModelCheckpoint's `Epoch 0, global step N: 'train_loss' reached … saving model to '…' as top 1`,
  `Restoring states from the checkpoint path at …` / `Restored all states from the checkpoint at …`.
- `twin`: the legacy private format (`step=N loss=…`), kept for old profiles; nothing defaults to it.

Lines are stamped (where the framework stamps them) with twin time `t`, so durations read from the
log are the twin's. Pure functions: the simulation (`training_job`) decides when to print.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timezone

__all__ = ["TrainLog", "for_format", "FORMATS"]

log = logging.getLogger(__name__)

FORMATS = ("megatron", "hf-trainer", "deepspeed", "lightning", "twin")


def for_format(name: str) -> "TrainLog":
    try:
        return _BY_NAME[name]()
    except KeyError:
        raise ValueError(f"unknown training log format {name!r}; use one of {', '.join(FORMATS)}") from None


class TrainLog:
    """The legacy `twin` format; subclasses override what their framework prints differently."""

    name = "twin"
    load_module = "/workspace/checkpointing.py"  # where the resume crash's traceback goes through
    # whether a save stops the training loop until it is written (the HF Trainer and Lightning save inside the
    # loop; Megatron's async save, DeepSpeed's engine and DCP's async_save let it go on in the twin's model)
    blocks_training = False

    def checkpoint_path(self, base: str, step: int) -> str:
        return f"{base.rstrip('/')}/step-{step}"

    def step(self, k: int, t: float, loss: float, samples_per_s: float, step_time: float, total: int,
             skipped: int = 0) -> list[str]:
        """The line(s) of step `k`; `skipped`: optimizer steps the loss scaler skipped since the last line printed
        (defect loss-scale-floor; a format whose framework prints nothing of it ignores it)."""
        return [f"step={k} loss={loss:.4f} samples_per_s={samples_per_s:.1f} step_time_s={step_time:.3f}"]

    def save_started(self, k: int, path: str, t: float) -> list[str]:
        return [f"saving checkpoint at step {k} to {path} (async)"]

    def save_done(self, k: int, path: str, started: float, done: float) -> list[str]:
        return [f"checkpoint saved step={k} duration_s={done - started:.1f} path={path}"]

    def resume_started(self, k: int, path: str, t: float, rank: int) -> list[str]:
        return []

    def resumed(self, k: int, path: str, t: float, load_s: float, rank: int) -> list[str]:
        return [f"resumed from checkpoint step={k} path={path} load_s={load_s:.1f}"]

    def no_checkpoint(self, base: str, t: float) -> list[str]:
        return [f"no checkpoint found under {base}: starting from step 0"]

    def resume_without_optimizer(self, k: int, path: str, t: float, load_s: float, rank: int) -> list[str] | None:
        """What a rank prints, from its load attempt on, when the checkpoint's optimizer state is missing and the
        framework trains on without it (None: the framework refuses it — Megatron and Lightning raise — and the job
        crashes)."""
        return None

    def refuse_without_optimizer(self, k: int, path: str, t: float, rank: int) -> list[str]:
        """What a framework that refuses a checkpoint without its optimizer state prints before the job dies."""
        return self.resume_crash(k, path, t, rank)

    def resume_crash(self, k: int, path: str, t: float, rank: int) -> list[str]:
        """The attempt, then the traceback torch.load raises on a truncated file, through the framework's loader."""
        return [f"loading checkpoint step={k} path={path}", *_traceback(self._load_frames(path), path)]

    def _load_frames(self, path: str) -> list[tuple[str, int, str, str]]:
        return [("/workspace/train.py", 412, "<module>", "main()"),
                ("/workspace/train.py", 377, "main", "step = load_checkpoint(model, optimizer, args.load)"),
                (self.load_module, 121, "load_checkpoint", "state_dict = torch.load(path, map_location=\"cpu\")")]


class Megatron(TrainLog):
    """Shapes: megatron-4tp-periodic-saves-with-timers.log, megatron-resume-load-iter5000-timer.log,
    megatron-flash-ckpt-load-keyerror.log."""

    name = "megatron"

    def checkpoint_path(self, base: str, step: int) -> str:
        return base.rstrip("/")  # Megatron names its --save directory; the iteration is in the line

    def step(self, k, t, loss, samples_per_s, step_time, total, skipped=0):
        """A NaN loss is not printed (training_log prints a loss only when its average is > 0) and the grad norm
        reads nan: megatron-deepspeed-grad-norm-nan-no-lm-loss.log. Every iteration of the interval skipped (the
        loss scaler at its floor): no loss (none advanced), no grad norm (the optimizer returned none), the count of
        skipped iterations: megatron-bert-loss-scale-skipped-iterations-10-no-loss-printed.log."""
        gbs = max(1, round(samples_per_s * step_time))
        lm = f"lm loss: {loss:.6E} | " if math.isfinite(loss) and not skipped else ""
        grad = f"grad norm: {0.8 + (k % 7) / 10:.3f} | " if math.isfinite(loss) else "grad norm: nan | "
        grad = "" if skipped else grad
        return [f" iteration {k:8d}/{total:8d} | consumed samples: {k * gbs:12d} | elapsed time per iteration (ms): "
                f"{step_time * 1000:.1f} | learning rate: {_lr(k, total):.3E} | global batch size: {gbs:5d} | "
                f"{lm}loss scale: 1.0 | {grad}"
                f"number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |"]

    def save_started(self, k, path, t):
        return [f"saving checkpoint at iteration {k:7d} to {path}"]

    def save_done(self, k, path, started, done):
        ms = (done - started) * 1000
        return [f"  successfully saved checkpoint at iteration {k:7d} to {path}", "(min, max) time across ranks (ms):",
                f"    save-checkpoint ................................: ({ms * 0.9999:.2f}, {ms:.2f})"]

    def resume_started(self, k, path, t, rank):
        return [f" loading checkpoint from {path} at iteration {k}"]

    def resumed(self, k, path, t, load_s, rank):
        ms = load_s * 1000
        return [f"  successfully loaded checkpoint from {path} at iteration {k}", "(min, max) time across ranks (ms):",
                f"    load-checkpoint ................................: ({ms:.2f}, {ms:.2f})"]

    def no_checkpoint(self, base, t):
        return [f"WARNING: could not find the metadata file {base}/latest_checkpointed_iteration.txt ",
                "    will not load any checkpoints and will start from random"]

    def resume_crash(self, k, path, t, rank):
        frames = [*_MEGATRON_SETUP,
                  ("/workspace/Megatron-LM/megatron/training/checkpointing.py", 1108, "load_checkpoint",
                   "state_dict, checkpoint_name, release = _load_base_checkpoint(load_dir, rank0=False, **load_kwargs)"),
                  ("/workspace/Megatron-LM/megatron/training/checkpointing.py", 792, "_load_base_checkpoint",
                   "state_dict = torch.load(checkpoint_name, map_location='cpu')")]
        shard = f"{path}/iter_{k:07d}/mp_rank_00/model_optim_rng.pt"
        return [*self.resume_started(k, path, t, rank)[:1], *_traceback(frames, shard)]

    def refuse_without_optimizer(self, k, path, t, rank):
        """checkpointing.py: the KeyError of the missing 'optimizer', its message, then (megatron-core) re-raised."""
        shard = f"{path}/iter_{k:07d}/mp_rank_00/model_optim_rng.pt"
        frames = [*_MEGATRON_SETUP,
                  ("/workspace/Megatron-LM/megatron/training/checkpointing.py", 1203, "load_checkpoint",
                   "optimizer.load_state_dict(state_dict['optimizer'])")]
        return [*self.resume_started(k, path, t, rank)[:1],
                f"Unable to load optimizer from checkpoint {shard}. Specify --no-load-optim or --finetune to prevent "
                "attempting to load the optimizer state, exiting ...",
                *_traceback(frames, shard, "KeyError: 'optimizer'")]


class HfTrainer(TrainLog):
    """Shapes: hf-trainer-save-checkpoint-glued-to-tqdm.log, hf-trainer-resume-global-step-200000.log,
    hf-llamafactory-tqdm-lineno-prefix.log, hf-trainer-resume-no-valid-checkpoint.log."""

    name = "hf-trainer"

    def checkpoint_path(self, base, step):
        return f"{base.rstrip('/')}/checkpoint-{step}"

    def step(self, k, t, loss, samples_per_s, step_time, total, skipped=0):
        epoch = k / total  # a diverged run: `'loss': nan, 'grad_norm': nan` (hf-trainer-grad-norm-nan-loss-zero.log)
        grad = 0.8 + (k % 7) / 10 if math.isfinite(loss) else math.nan
        return [f"{{'loss': {loss:.4f}, 'grad_norm': {grad:.16f}, 'learning_rate': {_lr(k, total)!r}, "
                f"'epoch': {epoch:.2f}}}", _tqdm("", k, total, step_time)]

    blocks_training = True

    def save_started(self, k, path, t):
        # v4.36 stages a save in tmp-checkpoint-N (renamed when done) and logs the staging dir as the save begins;
        # nothing is printed when it ends (trainer.py `_save_checkpoint`)
        staging = path.rsplit("/", 1)
        staging = f"{staging[0]}/tmp-{staging[1]}" if len(staging) == 2 else f"tmp-{path}"
        return [f"{_hf(t, 2103)}Saving model checkpoint to {staging}",
                f"{_hf(t, 430)}Configuration saved in {staging}/config.json",
                f"{_hf(t, 1074)}Model weights saved in {staging}/model.safetensors"]

    def save_done(self, k, path, started, done):
        return []

    def resume_started(self, k, path, t, rank):
        return [f"{_hf(t, 2108, 'trainer.py')}Loading model from {path}."]

    def resumed(self, k, path, t, load_s, rank):
        return [f"{_hf(t, 1791)}  Continuing training from checkpoint, will skip to saved global_step",
                f"{_hf(t, 1791)}  Continuing training from epoch 0",
                f"{_hf(t, 1791)}  Continuing training from global step {k}",
                f"{_hf(t, 1793)}  Will skip the first 0 epochs then the first {k} batches in the first epoch."]

    def resume_without_optimizer(self, k, path, t, load_s, rank):
        """The Trainer loads optimizer.pt and scheduler.pt only when both exist, and says nothing when they do not
        (trainer.py `_load_optimizer_and_scheduler`): the log of a resume without them is a good resume's."""
        return self.resume_started(k, path, t, rank) + self.resumed(k, path, t + load_s, load_s, rank)

    def no_checkpoint(self, base, t):
        return []

    def resume_crash(self, k, path, t, rank):
        frames = [("/workspace/finetune.py", 231, "<module>", "main()"),
                  ("/workspace/finetune.py", 219, "main", "train_result = trainer.train(resume_from_checkpoint=checkpoint)"),
                  ("/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", 1859, "train",
                   "self._load_from_checkpoint(resume_from_checkpoint)"),
                  ("/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", 2495, "_load_from_checkpoint",
                   "state_dict = torch.load(weights_file, map_location=\"cpu\", weights_only=True)")]
        return [*self.resume_started(k, path, t, rank), *_traceback(frames, f"{path}/pytorch_model.bin")]


class DeepSpeed(TrainLog):
    """Shapes: mds-final-save-global-step2500.log, deepspeed-2020-resume-zero-partitions-loaded.log,
    deepspeed-load-zero-checkpoint-traceback.log."""

    name = "deepspeed"

    def checkpoint_path(self, base, step):
        return f"{base.rstrip('/')}/global_step{step}"

    def step(self, k, t, loss, samples_per_s, step_time, total, skipped=0):
        """Each skipped step: the loss scaler's OVERFLOW line, rank 0 only in DeepSpeed, here on the workers that
        print progress (loss_scaler.py `update_scale` at the floor: `reducing to 1`;
        hf-deepspeed-overflow-loss-scale-stuck-at-1-every-step.log); the loop's line still prints the forward loss."""
        overflow = [f"{_ds(t - (skipped - 1 - j) * step_time)} [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
                    "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1" for j in range(skipped)]
        return [*overflow,
                f"steps: {k} loss: {loss:.4f} iter time (s): {step_time:.3f} samples/sec: {samples_per_s:.3f}"]

    def save_started(self, k, path, t):
        return [f"{_ds(t)} [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step{k} is about to be saved!",
                f"{_ds(t)} [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving {path}/mp_rank_00_model_states.pt..."]

    def save_done(self, k, path, started, done):
        return [f"{_ds(done)} [INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved {path}/mp_rank_00_model_states.pt.",
                f"{_ds(done)} [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step{k} is ready now!"]

    def resume_started(self, k, path, t, rank):
        return [f"{_ds(t)} [INFO] [engine.py:1285:_load_checkpoint] rank: {rank} loading checkpoint: "
                f"{path}/mp_rank_00_model_states.pt"]

    def resumed(self, k, path, t, load_s, rank):
        return [f"successfully loaded 8 ZeRO state_dicts for rank {rank}",
                f"loading 8 zero partition checkpoints for rank {rank}",
                f"  successfully loaded {path}/mp_rank_00_model_states.pt"]

    def no_checkpoint(self, base, t):
        return []

    def resume_without_optimizer(self, k, path, t, load_s, rank):
        """DeepSpeed loads the module's states, warns that the ZeRO partitions are missing and trains on with a fresh
        optimizer (engine.py `_get_all_zero_checkpoints`; deepspeed-2021-cpm-load-zero-partitions-missing.log)."""
        parts = ", ".join(f"'{path}/zero_pp_rank_{i}_mp_rank_00_optim_states.pt'" for i in range(8))
        return [*self.resume_started(k, path, t, rank), f"{_ds(t + load_s)} [WARNING] [engine.py:1443:_get_all_zero_checkpoints] Client provided zero "
                f"checkpoint load paths: [{parts}] does not exist"]

    def resume_crash(self, k, path, t, rank):
        ds = "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime"
        frames = [("train.py", 131, "<module>", "main()"),
                  ("train.py", 109, "main", "engine.load_checkpoint(args.load_dir)"),
                  (f"{ds}/engine.py", 2769, "load_checkpoint", "load_path, client_states = self._load_checkpoint(load_dir,"),
                  (f"{ds}/engine.py", 2836, "_load_checkpoint", "checkpoint = self.checkpoint_engine.load(load_path, map_location=map_location)"),
                  (f"{ds}/checkpoint_engine/torch_checkpoint_engine.py", 22, "load",
                   "partition = torch.load(path, map_location=map_location)")]
        return [*self.resume_started(k, path, t, rank), *_traceback(frames, f"{path}/mp_rank_00_model_states.pt")]


class Lightning(TrainLog):
    """Shapes: lightning-watchdog-after-tqdm-same-line.log, lightning-1.6-slurm-resume-traceback.log; the save
    line is ModelCheckpoint's verbose message (lightning/pytorch/callbacks/model_checkpoint.py)."""

    name = "lightning"

    def checkpoint_path(self, base, step):
        return f"{base.rstrip('/')}/epoch=0-step={step}.ckpt"

    def step(self, k, t, loss, samples_per_s, step_time, total, skipped=0):
        return [_tqdm("Epoch 0: ", k, total, step_time, f", v_num=0, train_loss={loss:.3f}]")]

    blocks_training = True

    def save_started(self, k, path, t):
        # ModelCheckpoint logs this, then saves (`_update_best_and_save`); nothing when the save ends
        return [f"Epoch 0, global step {k}: 'train_loss' reached {1.5 + 1000 / (k + 1000):.5f} "
                f"(best {1.5 + 1000 / (k + 1000):.5f}), saving model to '{path}' as top 1"]

    def save_done(self, k, path, started, done):
        return []

    def resume_started(self, k, path, t, rank):
        return [f"Restoring states from the checkpoint path at {path}"]

    def resumed(self, k, path, t, load_s, rank):
        return [f"Restored all states from the checkpoint at {path}"]

    def no_checkpoint(self, base, t):
        return []

    def resume_crash(self, k, path, t, rank):
        frames = [*_LIGHTNING_FIT,
                  (f"{_PL}/trainer/trainer.py", 955, "_run", "self._checkpoint_connector._restore_modules_and_callbacks(ckpt_path)"),
                  (f"{_PL}/trainer/connectors/checkpoint_connector.py", 397, "_restore_modules_and_callbacks",
                   "self.resume_start(checkpoint_path)"),
                  (f"{_PL}/trainer/connectors/checkpoint_connector.py", 79, "resume_start",
                   "loaded_checkpoint = self.trainer.strategy.load_checkpoint(checkpoint_path)"),
                  ("/usr/local/lib/python3.10/dist-packages/lightning/fabric/utilities/cloud_io.py", 56, "_load",
                   "return torch.load(f, map_location=map_location)")]
        return [*self.resume_started(k, path, t, rank), *_traceback(frames, path)]

    def refuse_without_optimizer(self, k, path, t, rank):
        """checkpoint_connector.py `restore_optimizers_and_schedulers`: a checkpoint without `optimizer_states`."""
        frames = [*_LIGHTNING_FIT,
                  (f"{_PL}/trainer/trainer.py", 981, "_run", "self._checkpoint_connector.restore_training_state()"),
                  (f"{_PL}/trainer/connectors/checkpoint_connector.py", 296, "restore_training_state",
                   "self.restore_optimizers_and_schedulers()"),
                  (f"{_PL}/trainer/connectors/checkpoint_connector.py", 368, "restore_optimizers_and_schedulers",
                   "raise KeyError(")]
        return [*self.resume_started(k, path, t, rank), *_traceback(frames, path, (
            "KeyError: 'Trying to restore optimizer state but checkpoint contains only the model. This is probably "
            "due to `ModelCheckpoint.save_weights_only` being set to `True`.'"))]


_BY_NAME = {c.name: c for c in (Megatron, HfTrainer, DeepSpeed, Lightning, TrainLog)}

_TORCH_LOAD = ("/usr/local/lib/python3.10/dist-packages/torch/serialization.py", 1025, "load",
               "raise pickle.UnpicklingError(UNSAFE_MESSAGE + str(e)) from None")


_PL = "/usr/local/lib/python3.10/dist-packages/lightning/pytorch"
_LIGHTNING_FIT = [("train.py", 166, "<module>", "trainer.fit(model, datamodule=data, ckpt_path=\"last\")"),
                  (f"{_PL}/trainer/trainer.py", 538, "fit", "call._call_and_handle_interrupt("),
                  (f"{_PL}/trainer/call.py", 47, "_call_and_handle_interrupt", "return trainer_fn(*args, **kwargs)"),
                  (f"{_PL}/trainer/trainer.py", 574, "_fit_impl", "self._run(model, ckpt_path=ckpt_path)")]
_MEGATRON_SETUP = [("/workspace/Megatron-LM/pretrain_gpt.py", 235, "<module>", "pretrain("),
                   ("/workspace/Megatron-LM/megatron/training/training.py", 289, "pretrain",
                    "model, optimizer, opt_param_scheduler = setup_model_and_optimizer("),
                   ("/workspace/Megatron-LM/megatron/training/training.py", 608, "setup_model_and_optimizer",
                    "args.iteration, args.num_floating_point_operations_so_far = load_checkpoint(")]


def _traceback(frames: list[tuple[str, int, str, str]], path: str, exception: str | None = None) -> list[str]:
    """torch.load's UnpicklingError on a truncated file, or (`exception`) the framework's own error raised in its
    last frame."""
    out = ["Traceback (most recent call last):"]
    for file, line, func, code in (frames if exception else [*frames, _TORCH_LOAD]):
        out += [f'  File "{file}", line {line}, in {func}', f"    {code}"]
    out.append(exception or f"_pickle.UnpicklingError: invalid load key, '\\x00'. ({path} is truncated)")
    return out


def _lr(k: int, total: int) -> float:
    return float(f"{1.5e-4 * (1 - 0.9 * k / total):.6e}")


def _clock(seconds: float) -> str:
    s = int(max(0, seconds))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60:02d}:{rem % 60:02d}"


def _tqdm(desc: str, k: int, total: int, step_time: float, tail: str = "]") -> str:
    """A tqdm bar as tqdm draws it (10-cell bar, it/s below one step a second, s/it above)."""
    frac = k / total
    cells = frac * 10
    full = int(cells)
    part = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)] if full < 10 else ""
    bar = ("█" * full + part).ljust(10)
    rate = f"{1 / step_time:5.2f}it/s" if step_time <= 1 else f"{step_time:5.2f}s/it"
    return (f"{desc}{int(frac * 100):3d}%|{bar}| {k}/{total} [{_clock(k * step_time)}<{_clock((total - k) * step_time)}, "
            f"{rate}{tail}")


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t, timezone.utc)


def _hf(t: float, line: int, module: str = "trainer.py") -> str:
    """`[INFO|trainer.py:2103] 2022-01-29 00:19:36,630 >> ` (transformers' logging format)."""
    d = _when(t)
    mod = {430: "configuration_utils.py", 1074: "modeling_utils.py"}.get(line, module)
    return f"[INFO|{mod}:{line}] {d:%Y-%m-%d %H:%M:%S},{d.microsecond // 1000:03d} >> "


def _ds(t: float) -> str:
    """`[2023-08-15 07:22:31,767]` (DeepSpeed's logger)."""
    d = _when(t)
    return f"[{d:%Y-%m-%d %H:%M:%S},{d.microsecond // 1000:03d}]"
