"""What the twin prints is what the drills read from real clusters: every line of every training log
format (and vLLM's startup) is classified by `drills.measure.logread`, the framework is detected, and the
facts read back are the twin's own (step, checkpoint, resume, transport per rank, save duration)."""

from __future__ import annotations

import pytest

from drills.measure.logread import LogReader, read_log
from drills.measure.vllm_startup import read_startup
from drills.twin.profile_model import InferenceDeployment
from drills.twin.workloads import loglines as L
from drills.twin.workloads import vllm_log
from drills.twin.workloads.trainlogs import for_format

T0 = 1_750_000_000.0
BASE = "/ckpt/llm-finetune-8b"
W0 = L.Worker("gpu-train-01", 0, "10.128.0.5", "uid-0", gpus=8, nworkers=2)
W1 = L.Worker("gpu-train-02", 1, "10.128.0.6", "uid-1", gpus=8, nworkers=2)


def _run(fmt_name: str, w: L.Worker, broken: bool = False, without_optimizer: bool = False) -> list[str]:
    """One worker's log through a first start, a periodic save and a restart (resumed, crashed, or resumed without
    the checkpoint's optimizer state)."""
    f = for_format(fmt_name)
    lines = L.nccl_init(w, "IB", ["mlx5_0", "mlx5_1"], "eth0", 16, "2.21.5")
    ck = f.checkpoint_path(BASE, 6000)
    lines += f.save_started(6000, ck, T0 - 200) + f.save_done(6000, ck, T0 - 200, T0 - 160)
    for k in range(6150, 6210, 10):
        lines += f.step(k, T0 + k - 6150, 1.92, 256.0, 1.0, 100000)
    ck8 = f.checkpoint_path(BASE, 8000)
    lines += f.save_started(8000, ck8, T0 + 1850) + f.save_done(8000, ck8, T0 + 1850, T0 + 1888.4)
    lines += f.step(8010, T0 + 1860, 1.9, 153.6, 1.667, 100000)  # slow steps (s/it in tqdm)
    if broken:
        lines += f.resume_crash(8000, ck8, T0 + 2000, w.grank)
    else:
        resumed = f.resume_without_optimizer(8000, ck8, T0 + 2000, 30, w.grank) if without_optimizer else \
            f.resume_started(8000, ck8, T0 + 2000, w.grank) + f.resumed(8000, ck8, T0 + 2030, 30, w.grank)
        lines += resumed
        lines += L.nccl_init(w, "IB", ["mlx5_0", "mlx5_1"], "eth0", 16, "2.21.5")
        lines += f.step(8001, T0 + 2051, 1.9, 256.0, 1.0, 100000)
    return [w.tag + line for line in lines]


@pytest.mark.parametrize("fmt", ["megatron", "hf-trainer", "deepspeed", "lightning"])
def test_every_line_of_a_format_is_classified_and_reads_back_the_twins_facts(fmt):
    summary = read_log("\n".join(_run(fmt, W1)))
    assert summary.unclassified == 0
    assert summary.framework == fmt
    assert summary.transports == {"gpu-train-02": "RoCE"} and {p.rank for p in summary.processes} == {8}
    assert summary.resume == {"attempted": True, "succeeded": True, "step": 8000,
                              "path": for_format(fmt).checkpoint_path(BASE, 8000), "reason": None}
    assert [s["step"] for s in summary.checkpoint_saves] == [6000, 8000]
    if fmt in ("megatron", "deepspeed"):  # the frameworks that print (or stamp) how long a save took
        assert summary.checkpoint_saves[-1]["duration_s"] == pytest.approx(38.4, abs=0.01)
    reader = LogReader()
    steps = [e for line in _run(fmt, W1) for e in reader.feed(line) if e.kind == "step"]
    assert [e.step for e in steps][-1] == 8001 and steps[-2].step_time_s == pytest.approx(1.667, rel=0.01)


@pytest.mark.parametrize("fmt", ["megatron", "hf-trainer", "deepspeed", "lightning"])
def test_broken_resume_reads_as_a_failed_resume_in_every_format(fmt):
    summary = read_log("\n".join(_run(fmt, W0, broken=True)))
    assert summary.unclassified == 0
    assert summary.resume["succeeded"] is False and summary.resume["step"] == 8000
    assert "UnpicklingError" in summary.resume["reason"]


def test_faults_print_classified_lines_naming_their_rank():
    lines = L.nccl_init(W1, "IB", ["mlx5_0"], "eth0", 16, "2.21.5") + L.socket_fallback(W1, W0.ip, "eth0", 16, "2.21.5")
    lines += L.watchdog_timeout(W1, 7, 600, 600.01) + L.gpu_xid(W1, 79)
    summary = read_log("\n".join(W1.tag + line for line in lines))
    assert summary.unclassified == 0
    assert summary.transports == {"gpu-train-02": "Socket"} and summary.socket_fallback
    assert [e.kind for e in summary.errors] == ["ib_completion", "watchdog_timeout", "dist_backend", "traceback"]
    assert summary.errors[1].rank == 8 and "unspecified launch failure" in summary.errors[-1].detail


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.8.5"])
def test_vllm_startup_is_classified_and_its_phases_add_up_to_the_model_load_delay(image):
    spec = InferenceDeployment(name="llama-7b-infer", served_model_name="llama-7b")
    batches = vllm_log.plan(spec, image, T0, T0 + 60.0, "uid")
    lines = [line for _, batch in batches for line in batch]
    summary = read_log("\n".join(lines))
    assert summary.unclassified == 0 and summary.framework == "vllm"
    assert summary.vllm["version"] == image.rsplit(":v", 1)[1] and summary.vllm["ready"] is True
    if image.endswith("0.8.5"):  # ≥ 0.8 prints the weights' and the model's load times
        assert summary.vllm["weights_load_s"] < summary.vllm["model_load_s"] < 60.0
        assert "[model_runner.py:" in "\n".join(lines)
    else:  # ≤ 0.7 prints the size only: the time comes from the stamps (whole seconds)
        assert 45.0 <= summary.vllm["model_load_s"] < 60.0 and " model_runner.py:" in "\n".join(lines)
    assert summary.vllm["model_load_s"] + summary.vllm["graph_capture_s"] <= 60.0
    assert batches[-1][0] == T0 + 60.0 and all(a <= b for (a, _), (b, _) in zip(batches, batches[1:]))


def test_a_set_graph_capture_is_the_phase_the_log_shows_longest():
    spec = InferenceDeployment(name="llama-7b-infer", served_model_name="llama-7b")
    batches = vllm_log.plan(spec, spec.image, T0, T0 + 660.0, "uid", graph_capture_s=600.0)
    startup = read_startup("\n".join(line for _, batch in batches for line in batch))
    parts = startup.breakdown()
    assert max(parts, key=parts.get) == "graph_capture" and parts["graph_capture"] == 600.0
    assert parts["model_load"] < 60.0
    # the replica read before its capture ended: the capture is in progress
    early = read_startup("\n".join(line for at, batch in batches if at < T0 + 300 for line in batch))
    assert early.in_progress() is not None and early.in_progress()[0] == "graph_capture"


def test_a_checkpoint_without_its_optimizer_state_is_what_each_framework_makes_of_it():
    """Defect lost-optimizer-state: DeepSpeed warns and trains on (the resume must read as failed, naming the ZeRO
    partitions); Megatron and Lightning refuse it (the job crashes, as with broken-resume); the HF Trainer prints
    exactly a good resume's lines (it skips a missing optimizer.pt silently: a blind spot of any log-based check)."""
    summary = read_log("\n".join(_run("deepspeed", W1, without_optimizer=True)))
    assert summary.unclassified == 0
    assert summary.resume["attempted"] and summary.resume["succeeded"] is False and summary.resume["step"] == 8000
    assert "zero_pp_rank_0_mp_rank_00_optim_states.pt" in summary.resume["reason"]
    for refusing, exception in (("megatron", "KeyError: 'optimizer'"), ("lightning", "KeyError: 'Trying to restore")):
        f = for_format(refusing)
        assert f.resume_without_optimizer(8000, "p", T0, 30, 8) is None
        refused = read_log("\n".join(W1.tag + x for x in f.refuse_without_optimizer(
            8000, f.checkpoint_path(BASE, 8000), T0, 8)))
        assert refused.unclassified == 0 and refused.resume["succeeded"] is False, refusing
        assert refused.resume["reason"].startswith(exception), refused.resume["reason"]
    hf = for_format("hf-trainer")
    path = hf.checkpoint_path(BASE, 8000)
    assert hf.resume_without_optimizer(8000, path, T0, 30, 8) == (hf.resume_started(8000, path, T0, 8)
                                                                  + hf.resumed(8000, path, T0 + 30, 30, 8))
