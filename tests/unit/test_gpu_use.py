"""GPUs the job cannot see (issue 35, the seed's §5.1): the two keys read from real shapes — torch's "CUDA
initialization" warning in a job's log, nvidia-smi's CSV queries — and the judgement that a worker whose GPUs sit
idle, or whose log says CUDA did not initialise, is not nominal; nvidia-smi not read is never nominal."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.core.errors import ToolOutputError
from drills.measure.accept.nvidia_smi import parse_compute_apps, parse_utilization
from drills.measure.gpu_use import cuda_unavailable
from drills.profile.nominal import NominalConfig
from drills.twin.workloads.loglines import torch_cuda_warning
from drills.verdicts.steady import gpu_use_reading

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


@pytest.mark.parametrize("name, cause", [
    ("torch-cuda-init-driver-too-old.log", "The NVIDIA driver on your system is too old (found version 12080)."),
    ("torch-cuda-init-driver-too-old-yolov5-cpu.log",
     "The NVIDIA driver on your system is too old (found version 10010)."),
    ("torch-cuda-init-unknown-error-visible-devices.log",
     "CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable "
     "CUDA_VISIBLE_DEVICES after program start."),
])
def test_torch_says_cuda_did_not_initialise_in_real_logs(name, cause):
    said = cuda_unavailable((REAL / "cuda" / name).read_text())
    assert said is not None and said.startswith(cause), said
    assert "Triggered internally" not in said


def test_the_twin_prints_the_same_shape_and_a_healthy_log_says_nothing():
    assert cuda_unavailable("\n".join(torch_cuda_warning("driver-too-old"))).startswith(
        "The NVIDIA driver on your system is too old (found version 12020)")
    healthy = (REAL / "logs" / "megatron-4tp-periodic-saves-with-timers.log").read_text()
    assert cuda_unavailable(healthy) is None
    assert cuda_unavailable("warnings.warn('CUDA initialization is slow')") is None


def test_nvidia_smi_compute_apps_real_and_empty():
    text = (REAL / "accept" / "nvidia-smi-query-compute-apps-k8s-exec.txt").read_text().split("\n", 1)[1]  # after # source
    assert parse_compute_apps(text) == ((12201, 25), (11509, 2539), (14466, 3713))
    assert parse_compute_apps("pid, used_gpu_memory [MiB]\n") == ()  # what the driver prints with nothing on a GPU
    assert parse_compute_apps("pid, used_gpu_memory [MiB]\n1584, [N/A]\n") == ((1584, None),)  # WDDM: no per-pid MiB
    with pytest.raises(ToolOutputError, match="no `pid, used_gpu_memory"):
        parse_compute_apps("No devices were found\n")


def test_nvidia_smi_utilization():
    # shape: the field's name with its unit as the header, one `N %` row per GPU (nvidia-smi --format=csv)
    assert parse_utilization("utilization.gpu [%]\n97 %\n0 %\n") == (97, 0)
    with pytest.raises(ToolOutputError, match="not a percentage"):
        parse_utilization("utilization.gpu [%]\n[N/A]\n")
    with pytest.raises(ToolOutputError, match="header"):
        parse_utilization("Failed to initialize NVML: Driver/library version mismatch\n")


SOURCE = "pods/exec ai-platform/llm-finetune-8b-worker-0 on gpu-train-01"


def test_busy_gpus_and_a_clean_log_are_nominal():
    ok = gpu_use_reading("llm-finetune-8b-worker-0", 8, (97,) * 8, tuple((1000 + i, 63488) for i in range(8)), None,
                         SOURCE)
    assert ok.ok is True and ok.value == 97 and "8 compute process(es) holding them" in ok.detail


def test_idle_gpus_are_not_nominal_and_the_sentence_names_the_pod_and_the_reading():
    idle = gpu_use_reading("llm-finetune-8b-worker-0", 8, (0,) * 8, (), None, SOURCE)
    assert idle.ok is False
    sentence = idle.sentence()
    assert sentence.startswith("GPUs in use by llm-finetune-8b-worker-0: 8 GPU(s) at 0 % mean utilisation, "
                               "0 compute process(es) (none holds a GPU: the process runs on the CPU)")
    assert "NOT NOMINAL" in sentence and SOURCE in sentence


def test_the_log_key_alone_refuses_but_never_accepts():
    cause = "The NVIDIA driver on your system is too old (found version 12020)."
    busy_but_warned = gpu_use_reading("w-0", 8, (97,) * 8, ((1, 2),), cause, SOURCE)
    assert busy_but_warned.ok is False and "CUDA initialization: The NVIDIA driver" in busy_but_warned.detail
    unread = gpu_use_reading("w-0", 8, None, None, None, SOURCE, "`nvidia-smi …` exited 127: not found")
    assert unread.ok is None and "exited 127" in unread.source  # a clean log without nvidia-smi: not observed
    assert gpu_use_reading("w-0", 8, None, None, cause, SOURCE, "exec failed").ok is False


def test_gpus_in_use_is_a_default_facet_of_the_training_drills_only():
    config = NominalConfig()
    assert all("GPUs in use" in config.of(d).facets for d in ("gpu-node-loss", "switch-uplink", "storage-saturation"))
    assert "GPUs in use" not in config.of("inference-pod-kill").facets
    assert config.of("inference-pod-kill").facets == ("inference answers",)  # issue 30 class 5: no number assumed
    assert NominalConfig(drills={"gpu-node-loss": {}}).of("gpu-node-loss").facets == ()  # a site opts out


def test_the_twin_answers_both_queries_as_the_driver_prints_them():
    """What the twin's worker container answers (drills/twin/workloads/container_exec.py), read by the same parsers:
    busy while it runs, idle with no compute process when its process could not initialise CUDA (gpus-unseen)."""
    from drills.twin.workloads.container_exec import run

    def pod(annotations=None, phase="Running"):
        return {"metadata": {"name": "llm-finetune-8b-worker-0", "annotations": annotations or {}},
                "spec": {"containers": [{"name": "trainer", "image": "trainer:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
                "status": {"phase": phase}}

    node = {"metadata": {"name": "gpu-train-01", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
    util = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv"]
    apps = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"]
    busy = pod()
    assert min(parse_utilization(run(util, busy, "trainer", node, 0.0).stdout.decode())) > 90
    assert len(parse_compute_apps(run(apps, busy, "trainer", node, 0.0).stdout.decode())) == 8
    unseen = pod({"twin.gpu-drills.io/cuda": "driver-too-old"})
    assert parse_utilization(run(util, unseen, "trainer", node, 0.0).stdout.decode()) == (0,) * 8
    assert parse_compute_apps(run(apps, unseen, "trainer", node, 0.0).stdout.decode()) == ()
    assert run(["nvidia-smi", "--query-gpu=name"], busy, "trainer", node, 0.0).code == 2  # not modelled: says so
