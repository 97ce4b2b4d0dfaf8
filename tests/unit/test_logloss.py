"""`drills.measure.logloss`: the loss and grad norm in every framework's shape, NaN and inf kept (the real lines
are read in tests/unit/test_real_logs.py; these are the shapes the twin prints and the edges)."""

from __future__ import annotations

import math

import pytest

from drills.measure.logloss import read_loss
from drills.measure.logread import read_log


@pytest.mark.parametrize("body, loss, grad", [
    ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.4e-05, 'epoch': 0.06}", math.nan, math.nan),
    ("{'loss': 1.0332, 'learning_rate': 1.576657177714518e-05, 'epoch': 0.95}", 1.0332, None),
    (" iteration     6151/  100000 | consumed samples: 1 | lm loss: 2.345000E+00 | loss scale: 1.0 | grad norm: inf |",
     2.345, math.inf),
    (" iteration     6151/  100000 | consumed samples: 1 | loss scale: 1.0 | grad norm: nan | number of nan iterations:   0 |",
     None, math.nan),
    ("steps: 6151 loss: nan iter time (s): 0.250 samples/sec: 256.000", math.nan, None),
    ("Epoch 0:   6%|▌         | 6151/100000 [25:37<6:31:02,  4.00it/s, v_num=0, train_loss=nan]", math.nan, None),
    ("Epoch 0:   6%|▌         | 6151/100000 [25:37<6:31:02,  4.00it/s, v_num=0, train_loss=-inf]", -math.inf, None),
    ("[titan] 2025-06-25 13:20:46,458 - root - INFO - step: 800  loss:  nan  grad_norm:  nan  memory: 49.66GiB(52.28%)",
     math.nan, math.nan),
    ("step=6151 loss=nan samples_per_s=256.0 step_time_s=0.250", math.nan, None),
])
def test_every_shape_reads_its_loss_and_keeps_nan(body, loss, grad):
    got = read_loss(body)
    assert got is not None
    for want, read in ((loss, got.loss), (grad, got.grad_norm)):
        assert (read is None) if want is None else (math.isnan(read) if math.isnan(want) else read == want)
    assert got.finite is (all(v is None or math.isfinite(v) for v in (loss, grad)))


@pytest.mark.parametrize("body", [
    "{'eval_loss': 2.1, 'eval_runtime': 12.0, 'epoch': 1.0}",  # an evaluation, not a training step
    " validation loss at iteration 1000 | lm loss value: 2.345E+00 | lm loss PPL: 1.04E+01 |",
    "Validation DataLoader 0:  45%|████▌     | 9/20 [00:01<00:01,  8.00it/s]",
    "NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0 loss=0",
])
def test_lines_that_are_not_a_training_loss_read_none(body):
    assert read_loss(body) is None


def test_a_step_line_carries_its_loss_and_a_dict_line_is_a_loss_event():
    hf = read_log("{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.06}\n"
                  " 6%|▌         | 6151/100000 [25:37<6:31:02,  4.00it/s]\n")
    assert len(hf.losses) == 1 and math.isnan(hf.losses[0][0]) and hf.steps == 1


@pytest.mark.parametrize("fmt", ["megatron", "hf-trainer", "deepspeed", "lightning", "twin"])
def test_the_twins_step_lines_carry_a_loss_the_reader_reads_finite_and_nan(fmt):
    """The twin prints each framework's own shape (trainlogs): a healthy step's loss reads finite; a diverged
    step's reads non-finite (Megatron: no lm loss, grad norm nan), and the step itself still reads."""
    from drills.twin.workloads.trainlogs import for_format

    log = for_format(fmt)
    for loss, finite in ((1.9, True), (math.nan, False)):
        summary = read_log("\n".join(log.step(6151, 0.0, loss, 256.0, 0.25, 100000)))
        assert summary.steps == 1 and len(summary.losses) == 1, (fmt, summary)
        assert all(v is None or math.isfinite(v) for v in summary.losses[0]) is finite, (fmt, summary.losses)
