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


@pytest.mark.parametrize("body, want", [
    # shapes of the w6 unseen round (verbatim; source in the comment)
    ("10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: 2:44:49  time: 2.8874  "
     "data_time: 0.0042  memory: 10762  loss: 2.5128  grad_norm: nan", (2.5128, math.nan)),  # InternLM/xtuner#187
    ("2023-10-24 08:06:41,294 - mmdet - INFO - Epoch [7][5850/32025]\tlr: 7.146e-04, eta: 4 days, 0:19:04, time: 0.775, "
     "data_time: 0.025, memory: 30983, loss_cls: 0.4233, loss_bbox: 2.1202, d0.loss_cls: 0.4411, loss: 31.4201, "
     "grad_norm: 3637.0292", (31.4201, 3637.0292)),  # junjie18/CMT#83 (abridged parts): the total, never a part
    ("Steps:   0%|▏         | 2/2000 [00:19<4:57:47,  8.94s/it, lr=1e-5, step_loss=nan, td=0.11s]",
     (math.nan, None)),  # fudan-generative-vision/hallo#152 (bar width abridged)
    ("epoch: 3451 loss: nan", (math.nan, None)),  # vpetren/gradnorm_tf#17: a NaN in a shape no framework prints
])
def test_the_unseen_rounds_loss_shapes(body, want):
    got = read_loss(body)
    assert got is not None
    for w, g in zip(want, (got.loss, got.grad_norm)):
        assert (g is None) if w is None else (math.isnan(g) if math.isnan(w) else g == w)


def test_a_finite_loss_in_an_unknown_shape_stays_unread():
    assert read_loss("epoch: 3450 loss: 0.21063452526926987") is None  # vpetren/gradnorm_tf#17: decides nothing
    assert read_loss("[2024-07-10 15:50:45,798] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                     "Skipping step. Attempted loss scale: 262144, reducing to 131072") is None  # hallo#152
