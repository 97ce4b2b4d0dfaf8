"""The classes of failure the w7 unseen round found unread (issue 33, round 3), each with the line that must NOT read as it.

Lines verbatim from the sources named (tests/data/real/logs keeps the whole excerpts); a counterpart marked
`constructed` is the same shape with the one field changed that must change the reading.
"""

from __future__ import annotations

import pytest

from drills.measure.logloss import read_skipped
from tests.unit.logreading import read_lines as _read
from drills.measure.vllm_startup import read_startup


# -- Ray: the raylet's report of a worker process that died (vllm-project/vllm#38529, verl-project/verl#472) -----------
_RAYLET = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
           "the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffffa55573c318fcb45089df416702000000 "
           "Worker ID: 40060cc4698e6b41b7073182fde862a6a5ea32e8f6ac18bc2f4e1c15 Node ID: 1a6050c7a4f77ea40a9aa1d8f08ba6cfbe"
           "c96c0138c62b2190c918cb Worker IP address: 10.175.94.190 Worker port: 10005 Worker PID: 270291 Worker exit "
           "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.")


def test_the_raylets_dead_worker_is_a_worker_exit_with_its_pid():
    reader = _read([_RAYLET, _RAYLET])  # Ray repeats it per task the worker held: one dead worker
    assert [(e.kind, e.pid) for e in reader.errors] == [("worker_exit", 270291)]


def test_rays_explanation_of_an_actor_error_alone_is_no_dead_worker():
    # the ActorDiedError's message continues on this line; the exception line is the failure (hkust-nlp/simpleRL-reason#25)
    reader = _read(["The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
                    "detail: Worker unexpectedly exits with a connection error code 2. End of file."])
    assert not reader.errors


# -- torchelastic's error record (pytorch/pytorch#64926, #79388; facebookresearch/av_hubert#19) ------------------------
_RECORD = ["[ERROR] 2021-09-13 22:18:26,678 error_handler: {", '  "message": {',
           '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception '
           'for details.",']


def test_the_agents_error_record_names_its_exception_and_is_no_unknown_line():
    reader = _read(_RECORD)
    assert [(e.kind, e.exception) for e in reader.errors] == [
        ("traceback", "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception "
                      "for details.")]
    assert not reader.unknown


def test_a_record_cut_before_its_message_stays_unknown():
    reader = _read(_RECORD[:2])
    assert not reader.errors and [u[1] for u in reader.unknown] == [_RECORD[0]]


def test_the_traceback_of_the_same_exception_after_the_record_is_that_failure():
    tb = ["Traceback (most recent call last):", '  File "/usr/local/bin/torchrun", line 8, in <module>',
          "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
          "failed. See inner exception for details."]
    assert [e.kind for e in _read(_RECORD + tb).errors] == ["traceback"]
    other = tb[:2] + ["RuntimeError: CUDA out of memory."]  # constructed: another exception is another failure
    assert [e.kind for e in _read(_RECORD + other).errors] == ["traceback", "traceback"]


# -- a failed GPU in other words (pytorch/pytorch#8979; kubernetes-sigs/dra-driver-nvidia-gpu#982) ----------------------
def test_caffe2s_glog_check_of_a_failed_gpus_cuda_error_is_a_gpu_error():
    reader = _read(["F0628 15:21:28.669647  1910 context_gpu.h:107] Check failed: error == cudaSuccess unspecified "
                    "launch failureF0628 15:21:28.669657  1911 context_gpu.h:107] Check failed: error == cudaSuccess "
                    "unspecified launch failure"])
    assert [e.kind for e in reader.errors] == ["gpu_error"]


def test_the_same_check_of_a_kernel_bug_is_no_gpu_error_but_never_healthy():
    # constructed: a kernel bug's CUDA error in the same FATAL check — not the GPU; its FATAL level keeps it unknown
    reader = _read(["F0628 15:21:28.669647  1910 context_gpu.h:107] Check failed: error == cudaSuccess an illegal "
                    "memory access was encountered"])
    assert not reader.errors and len(reader.unknown) == 1


def test_the_driver_asking_for_a_gpu_reset_is_a_gpu_error():
    reader = _read(["[373871.354096] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
                    "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2827"])
    assert [e.kind for e in reader.errors] == ["gpu_error"]


def test_another_driver_assertion_stays_unknown():
    reader = _read(["[   32.840884] NVRM: nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1476"])
    assert not reader.errors and len(reader.unknown) == 1


# -- vLLM: the engine's death raised without a traceback header (vllm-project/vllm-metal#112) ---------------------------
_DEAD = ("(APIServer pid=83023) ERROR 02-23 18:49:03 [serving_chat.py:1343] vllm.v1.engine.exceptions.EngineDeadError: "
         "EngineCore encountered an issue. See stack trace (above) for the root cause.")


def test_engine_dead_error_fails_a_startup():
    assert read_startup(_DEAD).failed


def test_engine_dead_error_after_ready_is_no_startup_failure():
    ready = "(APIServer pid=83023) INFO:     Application startup complete."
    assert not read_startup(ready + "\n" + _DEAD).failed


# -- resumes of mmengine and axolotl (InternLM/xtuner#1034, axolotl-ai-cloud/axolotl#2634) -------------------------------
_MM_RESUME = "05/11 14:58:00 - mmengine - INFO - Resume checkpoint from /root/train/lora_output/iter_300.pth"


def test_an_mmengine_resume_without_its_resumed_line_before_a_traceback_failed():
    reader = _read([_MM_RESUME, "[rank0]: Traceback (most recent call last):",
                    '[rank0]:   File "/root/x/mmengine/runner/_flexible_runner.py", line 1141, in load_or_resume'])
    r = reader.summary().resume
    assert (r["attempted"], r["succeeded"], r["step"]) == (True, False, 300)


def test_an_mmengine_resume_with_its_resumed_line_succeeded():
    # constructed: mmengine's runner.resume() ends with `resumed epoch: {epoch}, iter: {iter}`
    reader = _read([_MM_RESUME, "05/11 14:58:02 - mmengine - INFO - resumed epoch: 0, iter: 300"])
    r = reader.summary().resume
    assert (r["succeeded"], r["step"]) == (True, 300)


def test_axolotls_auto_resume_is_an_hf_trainer_attempt():
    reader = _read(["[2025-05-05 01:38:55,524] [INFO] [axolotl.train.determine_resume_checkpoint:143] [PID:25] [RANK:0] "
                    "Using Auto-resume functionality to start with checkpoint at lora-out/checkpoint-9318"])
    r = reader.summary().resume
    assert (r["attempted"], r["succeeded"], r["step"], r["path"]) == (True, False, 9318, "lora-out/checkpoint-9318")


# -- optimizer steps the framework skipped (huggingface/transformers#14531, NVIDIA/nccl#743, epfLLM/Megatron-LLM#11) -----
@pytest.mark.parametrize(("line", "skipped"), [
    ("[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss "
     "scale: 1, reducing to 1", 1),
    (" iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration (ms): 356.2 | learning "
     "rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | number of skipped iterations:  10 | number of "
     "nan iterations:   0 |", 10),
    (" iteration      182/  250000 | consumed samples:       186368 | elapsed time per iteration (ms): 126995.3 | learning "
     "rate: 1.365E-05 | global batch size:  1024 | lm loss: 2.382640E+00 | loss scale: 1.0 | grad norm: 0.227 | number "
     "of skipped iterations:   0 | number of nan iterations:   0 |", 0),
    ("[2024-09-11 17:52:11,320] [INFO] [checkpointing.py:546:forward] ----Profiling time in checkpointing False", None),
])
def test_skipped_steps_are_read_as_the_framework_counts_them(line, skipped):
    assert read_skipped(line) == skipped


# -- held-out batch: DeepSpeed's launcher teardown and the kernel's OOM killer (2U1/Qwen-VL-Series-Finetune#135) --------
_TEARDOWN = [f"[2025-06-02 20:51:24,18{i}] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 41012{6 + i}"
             for i in range(3)]


def test_the_launchers_teardown_is_one_worker_failure_not_one_per_survivor():
    reader = _read(_TEARDOWN)
    assert [(e.kind, e.pid) for e in reader.errors] == [("worker_exit", None)]


def test_a_second_teardown_after_training_went_on_is_a_second_failure():
    step = "[2025-06-02 20:55:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[1e-05]"  # constructed
    assert [e.kind for e in _read(_TEARDOWN + [step] + _TEARDOWN).errors] == ["worker_exit", "worker_exit"]


def test_the_kernels_oom_kill_is_a_dead_worker_with_its_pid():
    reader = _read(["[856341.770960] Out of memory: Killed process 410126 (python) total-vm:79905000kB, "
                    "anon-rss:22957108kB, file-rss:72036kB, shmem-rss:15143164kB, UID:1000 pgtables:78032kB oom_score_adj:0"])
    assert [(e.kind, e.pid, e.signal) for e in reader.errors] == [("worker_exit", 410126, "SIGKILL")]


# -- held-out batch: the watchdog's verdict line (mila-iqia/milabench#269, hiyouga/LlamaFactory#7396) ------------------
_TIMEOUT = ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) "
            "ran for 600060 milliseconds before timing out.")
_VERDICT = ("[rank{r}]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {r}] Exception (either an error or "
            "timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.")


def test_the_verdict_after_its_process_timeout_line_is_the_same_failure():
    reader = _read([_TIMEOUT, _VERDICT.format(r=0)])
    assert [(e.kind, e.rank, e.seq, e.op_type) for e in reader.errors] == [("watchdog_timeout", 0, 1580, "ALLREDUCE")]


def test_a_verdict_alone_is_its_process_failure():
    reader = _read([_TIMEOUT, _VERDICT.format(r=3)])
    assert [(e.rank, e.seq) for e in reader.errors] == [(0, 1580), (3, 1580)]


# -- second held-out batch (rwth-i6/returnn#1486, swz30/Restormer#75, vllm-project/vllm#20226, LambdaLabsML/examples#41) --
def test_nvml_unable_to_reach_a_gpu_is_a_lost_gpu():
    reader = _read(["Unable to determine the device handle for GPU0000:03:00.0: Unknown Error"])
    assert [e.kind for e in reader.errors] == ["gpu_error"]


def test_pcie_errors_the_hardware_corrected_are_no_failure():
    reader = _read(["[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0",
                    "[  +0.000005] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
                    "(Transmitter ID)"])
    assert not reader.errors and not reader.unknown


def test_pytorch_1x_runtime_error_of_a_failed_nccl_call_is_its_dist_backend_report():
    reader = _read(["RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1616554786529/work/torch/lib/c10d/"
                    "ProcessGroupNCCL.cpp:33, unhandled cuda error, NCCL version 2.7.8"])
    assert [e.kind for e in reader.errors] == ["dist_backend"]


def test_vllms_own_nccl_error_wording_is_not_that_report_but_never_healthy():
    reader = _read(["RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"])
    assert not [e for e in reader.errors if e.kind == "dist_backend"] and (reader.errors or reader.unknown)


def test_the_shells_killed_is_never_healthy_and_the_scripts_own_message_is_nothing():
    reader = _read(["Summoning checkpoint.", "Killed"])
    assert not reader.errors and [u[1] for u in reader.unknown] == ["Killed"]
