"""Log-format presets: literal lines from each framework → the events the drills read."""

from datetime import datetime, timezone

import pytest

from drills.measure.logformats import PRESETS, custom_format, parse_line, parse_lines, split_timestamp
from drills.measure.logread import read_log


def test_twin_step_with_throughput():
    ev = parse_line("twin", "step=6150 loss=1.234 samples_per_s=812.5 step_time_s=0.63")
    assert (ev.kind, ev.step, ev.samples_per_s, ev.step_time_s) == ("step", 6150, 812.5, 0.63)


def test_twin_checkpoint_and_resume():
    saved = parse_line("twin", "checkpoint saved step=6000 duration_s=41.2 path=/ckpt/step-6000")
    assert (saved.kind, saved.step, saved.duration_s, saved.path) == ("checkpoint_saved", 6000, 41.2, "/ckpt/step-6000")
    resumed = parse_line("twin", "resumed from checkpoint step=6000 path=/ckpt/step-6000")
    assert (resumed.kind, resumed.step) == ("resumed", 6000)


def test_twin_ignores_unrelated_lines():
    assert parse_line("twin", "loading dataset shard 3/8") is None
    assert parse_line("twin", "") is None


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_nccl_transport_in_every_preset(name):
    ib = parse_line(name, "gpu-node-1:42:42 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>")
    assert (ib.kind, ib.transport, ib.devices, ib.is_rdma) == ("nccl_transport", "IB", ("mlx5_0:1/RoCE", "mlx5_1:1/RoCE"), True)
    sock = parse_line(name, "gpu-node-1:42:42 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>")
    assert (sock.transport, sock.devices, sock.is_rdma) == ("Socket", ("eth0:10.0.0.1<0>",), False)


def test_nccl_info_lines_that_are_not_the_transport_choice():
    assert parse_line("twin", "gpu-node-1:42:42 [0] NCCL INFO NET/IB : No device found.") is None


def test_nccl_warnings_and_watchdog_timeout():
    warn = parse_line("twin", "gpu-node-1:42:99 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with error 12, opcode 0, len 0, vendor err 129 (Timeout)")
    assert warn.kind == "nccl_warn" and warn.is_timeout and warn.text.startswith("NET/IB : Got completion")
    dog = parse_line("megatron", "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.")
    assert dog.kind == "nccl_warn" and dog.is_timeout
    plain = parse_line("twin", "gpu-node-1:42:99 [0] NCCL WARN Cuda failure 'out of memory'")
    assert plain.kind == "nccl_warn" and not plain.is_timeout


def test_hf_trainer_steps_from_tqdm():
    ev = parse_line("hf-trainer", " 51%|█████     | 6150/12000 [1:02:03<59:01,  1.65it/s]")
    assert (ev.kind, ev.step) == ("step", 6150)
    assert ev.step_time_s == pytest.approx(1 / 1.65)
    slow = parse_line("hf-trainer", " 51%|█████     | 6151/12000 [1:02:05<59:01,  2.40s/it]")
    assert (slow.step, slow.step_time_s) == (6151, 2.40)


def test_hf_trainer_carriage_returns_read_the_last_update():
    ev = parse_line("hf-trainer", "\r 51%|█| 6150/12000 [00:01<00:02, 1.6it/s]\r 51%|█| 6151/12000 [00:02<00:02, 1.6it/s]")
    assert ev.step == 6151


def test_hf_trainer_checkpoint_and_resume():
    saved = parse_line("hf-trainer", "[INFO|trainer.py:3512] 2024-05-01 10:00:00,000 >> Saving model checkpoint to /out/checkpoint-6000")
    assert (saved.kind, saved.step, saved.path) == ("checkpoint_saved", 6000, "/out/checkpoint-6000")
    resumed = parse_line("hf-trainer", "[INFO|trainer.py:2145] >>   Continuing training from global step 6000")
    assert (resumed.kind, resumed.step) == ("resumed", 6000)
    assert parse_line("hf-trainer", "  Continuing training from checkpoint, will skip to saved global_step") is None
    assert parse_line("hf-trainer", "{'loss': 1.23, 'grad_norm': 0.5, 'learning_rate': 4.9e-05, 'epoch': 0.51}") is None


MEGATRON_ITER = (
    " [2025-08-01 07:19:37] iteration     6150/  100000 | consumed samples:      3148800 | "
    "elapsed time per iteration (ms): 630.1 | learning rate: 1.000E-04 | global batch size:   512 | "
    "lm loss: 1.230000E+00 | loss scale: 1.0 | grad norm: 0.123 | number of skipped iterations:   0 |"
)


def test_megatron_iteration_line():
    ev = parse_line("megatron", MEGATRON_ITER)
    assert (ev.kind, ev.step) == ("step", 6150)
    assert ev.step_time_s == pytest.approx(0.6301)
    assert ev.samples_per_s == pytest.approx(512 / 0.6301)


def test_megatron_checkpoint_and_resume():
    assert parse_line("megatron", "saving checkpoint at iteration    6000 to /ckpt in torch_dist format") is None
    saved = parse_line("megatron", "  successfully saved checkpoint from iteration    6000 to /ckpt [ t 1/1, p 1/1 ]")
    assert (saved.kind, saved.step, saved.path) == ("checkpoint_saved", 6000, "/ckpt")
    loading = parse_line("megatron", " loading checkpoint from /ckpt at iteration 6000")
    loaded = parse_line("megatron", "  successfully loaded checkpoint from /ckpt [ t 0/1, p 0/1 ] at iteration 6000")
    # "loading …" is only an attempt (issue 14: an attempt that then crashed was read as a resume)
    assert (loading.kind, loading.step, loading.path) == ("resume_attempt", 6000, "/ckpt")
    assert (loaded.kind, loaded.step) == ("resumed", 6000)


def test_deepspeed_lines():
    step = parse_line("deepspeed", "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=6150, skipped=0, lr=[4.99e-05], mom=[(0.9, 0.95)]")
    assert (step.kind, step.step, step.samples_per_s) == ("step", 6150, None)
    timer = parse_line("deepspeed", "[2023-11-07 01:55:23,714] [INFO] [timer.py:260:stop] epoch=0/micro_step=24600/global_step=6150, RunningAvgSamplesPerSec=25.02, CurrSamplesPerSec=25.70, MemAllocated=4.32GB, MaxMemAllocated=38.49GB")
    assert (timer.step, timer.samples_per_s) == (6150, 25.02)
    saving = parse_line("deepspeed", "[INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: /ckpt/global_step6000/mp_rank_00_model_states.pt")
    assert (saving.kind, saving.step) == ("checkpoint_saved", 6000)
    ready = parse_line("deepspeed", "[INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step6000 is ready now!")
    assert (ready.kind, ready.step) == ("checkpoint_saved", 6000)
    loading = parse_line("deepspeed", "[INFO] [engine.py:3000:_load_checkpoint] [Rank 0] loading checkpoint /ckpt/global_step6000/mp_rank_00_model_states.pt")
    assert (loading.kind, loading.step) == ("resume_attempt", 6000)


def test_kubernetes_timestamp_prefix_with_nanoseconds():
    line = "2024-05-01T10:00:07.123456789Z step=6150 loss=1.2 samples_per_s=800 step_time_s=0.64"
    ev = parse_line("twin", line)
    assert ev.at == datetime(2024, 5, 1, 10, 0, 7, 123456, tzinfo=timezone.utc)
    assert ev.step == 6150
    at, rest = split_timestamp("2024-05-01T12:00:07+02:00 hello")
    assert at == datetime(2024, 5, 1, 10, 0, 7, tzinfo=timezone.utc) and rest == "hello"
    assert split_timestamp("step=1") == (None, "step=1")


def test_parse_lines_keeps_order_and_skips_noise():
    text = "\n".join([
        "step=5999 samples_per_s=800",
        "checkpoint saved step=6000 duration_s=40",
        "noise",
        "resumed from checkpoint step=6000",
        "step=6001",
    ])
    assert [(e.kind, e.step) for e in parse_lines("twin", text)] == [
        ("step", 5999), ("checkpoint_saved", 6000), ("resumed", 6000), ("step", 6001)]


def test_custom_format_over_a_preset():
    fmt = custom_format({"step": r"it (?P<step>\d+) took (?P<step_time_s>[\d.]+)s"}, base="twin")
    assert parse_line(fmt, "it 12 took 0.5s").step_time_s == 0.5
    assert parse_line(fmt, "checkpoint saved step=10").kind == "checkpoint_saved"  # inherited from twin


def test_custom_format_rejects_bad_patterns():
    with pytest.raises(ValueError, match="needs a"):
        custom_format({"resumed": r"resumed from (\d+)"})
    with pytest.raises(ValueError, match="unknown event kind"):
        custom_format({"stepp": r"(?P<step>\d+)"})
    with pytest.raises(ValueError, match="does not compile"):
        custom_format({"step": r"(?P<step>\d+"})


def test_deepspeed_resume_without_its_files_fails_naming_what_is_missing():
    """DeepSpeed warns and trains on when a checkpoint's files are missing (engine.py's own wording): the model
    states file (nothing loaded) or the ZeRO optimizer partitions (optimizer and fp32 master state afresh)."""
    missing_model = read_log(
        "[2024-05-01 10:00:00,000] [WARNING] [engine.py:2711:_load_checkpoint] Client provided checkpoint load path: "
        "/ckpt/global_step6000/mp_rank_00_model_states.pt does not exist ... skip checkpoint load\n"
        "[2024-05-01 10:00:09,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[4.99e-05], "
        "mom=[(0.9, 0.95)]\n")
    assert missing_model.resume["attempted"] and missing_model.resume["succeeded"] is False
    assert missing_model.resume["step"] == 6000 and "nothing was loaded" in missing_model.resume["reason"]
    missing_zero = read_log(
        "[2024-05-01 10:00:00,000] [INFO] [engine.py:2722:_load_checkpoint] rank: 0 loading checkpoint: "
        "/ckpt/global_step6000/mp_rank_00_model_states.pt\n"
        "[2024-05-01 10:00:03,000] [WARNING] [engine.py:2835:_get_all_zero_checkpoints] Client provided zero checkpoint "
        "load paths: ['/ckpt/global_step6000/zero_pp_rank_0_mp_rank_00_optim_states.pt'] does not exist\n")
    assert missing_zero.resume["succeeded"] is False and missing_zero.resume["path"] == "/ckpt/global_step6000"
    assert "ZeRO optimizer partitions are missing" in missing_zero.resume["reason"]
