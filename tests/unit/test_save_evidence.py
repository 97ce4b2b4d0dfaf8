"""A save counts only with completion evidence (drills/measure/logsave.py): the HF Trainer and Lightning print
their save line when the save starts and nothing when it ends, so only the training stepping past it (a step,
HF's next loss dict) completes it; a save line with nothing after it, or a traceback before the next step, is a
save that started, never a checkpoint. Lines shaped after tests/data/real/logs/ (trainer.py:4309, Lightning's
ModelCheckpoint)."""

from __future__ import annotations

from drills.measure.logread import LogReader

HF_SAVE = "[INFO|trainer.py:4309] 2025-12-18 13:28:05,079 >> Saving model checkpoint to /ckpt/job/tmp-checkpoint-7500"
HF_STEP = " 51%|#####     | 7510/14754 [33:22<36:36,  3.53it/s]"
HF_LOSS = "{'loss': 0.9457, 'learning_rate': 1.4749898332655551e-05, 'epoch': 1.02}"
PL_SAVE = ("Epoch 0, global step 7500: 'train_loss' reached 1.61765 (best 1.61765), saving model to "
           "'/ckpt/job/epoch=0-step=7500.ckpt' as top 1")
PL_STEP = "Epoch 0:  8%|▊         | 7510/100000 [31:17<6:25:21,  4.00it/s, v_num=0, train_loss=1.902]"


def _saves(*lines):
    reader = LogReader()
    events = [e for line in lines for e in reader.feed(line)] + reader.close()
    return [(e.step, e.path) for e in events if e.kind == "checkpoint_saved"], reader


def test_an_hf_save_cut_off_mid_save_is_not_a_checkpoint():
    saved, reader = _saves(HF_STEP.replace("7510", "7500"), HF_SAVE)
    assert saved == [] and reader.summary().checkpoint_saves == ()


def test_an_hf_save_the_training_stepped_past_counts_as_the_renamed_checkpoint():
    assert _saves(HF_SAVE, HF_STEP)[0] == [(7500, "/ckpt/job/checkpoint-7500")]
    assert _saves(HF_SAVE, HF_LOSS)[0] == [(7500, "/ckpt/job/checkpoint-7500")]


def test_a_traceback_before_the_next_step_withdraws_the_save():
    tb = ["Traceback (most recent call last):",
          '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 3210, in _save_checkpoint',
          "    os.rename(staging_output_dir, output_dir)",
          "FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/job/tmp-checkpoint-7500'"]
    saved, reader = _saves(HF_SAVE, *tb, HF_STEP)
    assert saved == []


def test_a_lightning_save_line_comes_before_the_save_and_needs_a_step_after_it():
    assert _saves(PL_SAVE)[0] == []
    assert _saves(PL_SAVE, PL_STEP)[0] == [(7500, "/ckpt/job/epoch=0-step=7500.ckpt")]


MM_ITER = ("08/02 12:36:37 - mmengine - INFO - Iter(train) [10000/20000]  lr: 1.1323e-01  eta: 0:20:00  time: 0.1213  "
           "data_time: 0.0031  memory: 864  loss: 0.0956")
MM_SAVE = "08/02 12:36:37 - mmengine - INFO - Saving checkpoint at 10000 iterations"
MM_RESUMED = "05/25 13:45:52 - mmengine - INFO - resumed epoch: 0, iter: 10000"


def test_mmengine_iteration_saves_need_the_loop_past_them_and_its_resume_line_is_read():
    assert _saves(MM_ITER, MM_SAVE)[0] == []
    assert _saves(MM_ITER, MM_SAVE, MM_ITER.replace("[10000/", "[10050/"))[0] == [(10000, None)]
    reader = LogReader()
    events = [e for line in ("05/25 13:45:52 - mmengine - INFO - Load checkpoint from /ckpt/job/iter_10000.pth",
                             MM_RESUMED, MM_ITER.replace("[10000/", "[10050/")) for e in reader.feed(line)]
    assert [(e.kind, e.step) for e in events if e.kind in ("resumed", "step")] == [("resumed", 10000), ("step", 10050)]
    assert reader.framework == "mmengine"
