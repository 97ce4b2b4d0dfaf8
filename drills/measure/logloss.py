"""The training loss (and the gradient norm, where the framework logs it) as each framework prints it.

A job that resumed and steps at full speed may still learn nothing: every step after the resume logs a NaN
loss. The judge (`drills.verdicts.learning`) needs the values; this module reads them from one record's body,
in every format the readers know (each shape from a real line in tests/data/real/logs):

- Hugging Face Trainer: the log dict `{'loss': 1.0332, 'grad_norm': 1.41, 'learning_rate': …, 'epoch': 0.95}`
  (a line of its own; `'loss': nan`, `'grad_norm': nan` when it diverged);
- Megatron-LM: ` iteration N/ M | … | lm loss: 5.670854E+00 | loss scale: … | grad norm: 2.356 | …`
  (Megatron-DeepSpeed under DeepSpeed: `lm_loss: 1.118665E+01`). Megatron prints a loss only when its average
  is > 0, so a NaN loss is *missing* from the line, and the grad norm reads `grad norm: nan`;
- DeepSpeed (DeepSpeedExamples' loop): `steps: 2500 loss: 12.5495 iter time (s): …`;
- Lightning / NeMo progress bars: `…, 1.37it/s, loss=2.6, v_num=95nc, reduced_train_loss=2.590, …]`
  (`train_loss=`, `train_loss_step=` in 2.x; accelerate scripts' `step_loss=`): the first loss field of the bar's tail;
- mmengine / mmcv runners: `Epoch(train) [1][200/735]  … loss: 2.7522  grad_norm: 3.0608`, `Epoch [7][5850/32025]\t…,
  loss_cls: 0.42, d0.loss_cls: 0.44, …, loss: 31.4201, grad_norm: 3637.0292` (the total, after its parts);
- torchtitan: `step: 800  loss:  4.7215  memory: …` (and `grad_norm:` in newer versions; a fork's
  `step: 640/644 = 99.3789%  loss:  6.2116`);
- the twin's legacy format: `step=6150 loss=1.234 …`.

Any other line that prints a NaN or infinite loss (`epoch: 3451 loss: nan`) is read too, as that value: unknown is not
healthy. Values are floats as Python reads them: `nan`, `inf` and `-inf` included (never dropped: they are the finding).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

__all__ = ["LossReading", "read_loss", "read_skipped", "finite"]

log = logging.getLogger(__name__)

_VAL = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)"

# (loss pattern, grad-norm pattern or None): the first loss pattern that matches wins; its grad-norm pattern
# (if any) is tried on the same body
_SHAPES: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = tuple(
    (re.compile(loss), re.compile(grad) if grad else None) for loss, grad in (
        (rf"\{{'loss': (?P<v>{_VAL})\b", rf"'grad_norm': (?P<v>{_VAL})\b"),  # HF Trainer's log dict
        # Megatron (2019: `| lm loss 1.020020E+01 |`, no colon)
        # (nanotron: `iteration: N / M | … | lm_loss: 2.38 | … | grad_norm: 1.25`, the last field without a closing bar)
        (rf"\|\s*lm[ _]loss:? (?P<v>{_VAL})\s*\|", rf"\|\s*grad[ _]norm: (?P<v>{_VAL})\s*(?:\||$)"),
        (rf"^\s*steps: \d+ loss: (?P<v>{_VAL}) ", None),  # DeepSpeedExamples
        (rf"(?:it/s|s/it),[^\]]*?(?<![\w])(?:reduced_|step_)?(?:train_)?loss(?:_step)?=(?P<v>{_VAL})\b", None),  # bars
        # mmengine `Epoch(train) [1][200/735]  lr: …  loss: 2.7522  grad_norm: 3.06`, mmcv `Epoch [7][5850/32025]\tlr: …,
        # loss_cls: …, d0.loss_cls: …, loss: 31.42, grad_norm: …`: the total `loss:`, never a part (`loss_cls`, `d0.loss`)
        (rf"(?:Epoch|Iter)(?:\(train\))?\s*\[[^\]]*\](?:\[[^\]]*\])?.*?(?<![\w.])loss: (?P<v>{_VAL})(?![\w.])",
         rf"(?<![\w.])grad_norm: (?P<v>{_VAL})(?![\w.])"),
        (rf"\bstep:\s*\d+(?:/\d+ = [\d.]+%)?\s+loss:\s*(?P<v>{_VAL})\b", rf"\bgrad_norm:\s*(?P<v>{_VAL})\b"),  # torchtitan
        (rf"(?:^|\s)step=\d+ loss=(?P<v>{_VAL})\b", None),  # the twin's legacy format
    ))
# a NaN or infinite loss in a shape no framework above prints (`epoch: 3451 loss: nan`, a partial `d0.loss_cls: nan`,
# `val/loss=nan.0`): read as such — a diverged run must not hide in a format we do not know (fail safe). A finite
# value in an unknown shape stays unread: it decides nothing, and guessing its key could read the wrong number.
_NONFINITE_LOSS = re.compile(r"(?i)(?<![\w])[\w./]*loss\w*['\"]?\s*[=:]\s*['\"]?(?P<v>nan|[-+]?inf(?:inity)?)(?:\.0+)?(?![\w.])")
# Megatron's iteration line without a loss (a NaN average is not printed) still carries the grad norm
_MEGATRON_LINE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|")
_MEGATRON_GRAD = re.compile(rf"\|\s*grad norm: (?P<v>{_VAL})\s*\|")


# optimizer steps the framework says it skipped (a loss-scaler overflow): DeepSpeed's loss scaler, one line per skipped
# step (`[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1`; ≤ 2021 `[deepscale]`; also
# when it only lowers the hysteresis); apex amp (`Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale
# to …`); Megatron's count for the logging interval (`| number of skipped iterations:  10 |`). A step skipped is no
# training progress: at the floor scale (`reducing to 1`) every step is skipped while the bar still advances.
# DeepSpeed ≤ 0.3's log_dist (`[Rank 0] Overflow detected. Skipping step. Attempted loss scale: 1, reducing to 1`),
# apex's older FP16_Optimizer without a rank (`OVERFLOW! Skipping step. Attempted loss scale: 4294967296`, NVIDIA
# tacotron2) and fairseq's trainer (`NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 4.0`)
# say the same.
_SKIPPED_ONE = re.compile(r"OVERFLOW! (?:Rank \d+ )?Skipping step|\bGradient overflow\.\s+Skipping step|"
                          r"\bOverflow detected\. Skipping step\b|\bgradient overflow detected, ignoring gradient\b")
_SKIPPED_COUNT = re.compile(r"\|\s*number of skipped iterations:\s*(?P<n>\d+)\s*\|")


@dataclass(frozen=True)
class LossReading:
    """The loss and gradient norm one line printed (None: the line does not carry it)."""

    loss: float | None
    grad_norm: float | None = None

    @property
    def finite(self) -> bool:
        """Neither value is NaN or infinite (a missing one is not a finding)."""
        return finite(self.loss) and finite(self.grad_norm)


def read_loss(body: str) -> LossReading | None:
    """The loss (and grad norm) in one record's body, in any known framework's shape; None when it has neither."""
    for loss_re, grad_re in _SHAPES:
        m = loss_re.search(body)
        if m:
            g = grad_re.search(body) if grad_re is not None else None
            return LossReading(float(m.group("v")), float(g.group("v")) if g else None)
    if _MEGATRON_LINE.search(body) and (g := _MEGATRON_GRAD.search(body)):
        return LossReading(None, float(g.group("v")))
    if m := _NONFINITE_LOSS.search(body):
        return LossReading(float(m.group("v")), None)
    return None


def read_skipped(body: str) -> int | None:
    """Optimizer steps one record says were skipped; None when it says nothing about skipping (0 when it says none)."""
    if m := _SKIPPED_COUNT.search(body):
        return int(m.group("n"))
    return 1 if _SKIPPED_ONE.search(body) else None


def finite(value: float | None) -> bool:
    """True for a real number and for None (nothing read); False for NaN and ±inf."""
    return value is None or math.isfinite(value)
