"""Unknown is not healthy (issue 33), on lines of the unseen round: a CUDA error of a failed GPU outside any
traceback is the GPU reader's error; a CUDA error of a kernel bug, a C++/Python abort and an NCCL error in a shape no
recogniser knows stay in the reader's unknown lines, so a stability window cannot pass on them. Lines verbatim
from the sources named (tests/data/real/logs keeps the whole excerpts)."""

from __future__ import annotations

import pytest

from tests.unit.logreading import read_lines as _read


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",  # jade-hpc-gpu.github.io#194
    "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
    "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",  # NVIDIA/semantic-segmentation#33
])
def test_a_failed_gpus_cuda_error_outside_a_traceback_is_a_gpu_error(line):
    reader = _read([line])
    assert [e.kind for e in reader.errors] == ["gpu_error"] and not reader.unknown


def test_the_same_error_inside_a_traceback_is_the_traceback_readers():
    reader = _read(["Traceback (most recent call last):", '  File "/workspace/train.py", line 301, in train_step',
                    "    loss.backward()", "RuntimeError: CUDA error: uncorrectable ECC error encountered"])
    assert [e.kind for e in reader.errors] == ["traceback"]


@pytest.mark.parametrize("line", [
    # a kernel bug's CUDA error, not in the failed-GPU list: no kind for it, but never healthy (hpcaitech/Open-Sora#694)
    "RuntimeError: CUDA error: an illegal memory access was encountered                                    ",
    "Fatal Python error: Aborted",  # vllm-project/vllm#4108
    "terminate called without an active exception",  # NVIDIA/semantic-segmentation#33
    "NVRM: _threadNodeCheckTimeout: API_GPU_ATTACHED_SANITY_CHECK failed!",  # open-gpu-kernel-modules#1151
])
def test_an_error_no_reader_classifies_stays_unknown(line):
    reader = _read([line])
    assert not reader.errors and [u[1] for u in reader.unknown] == [line.strip()]


# -- the w6 unseen round: shapes of failure no reader had a kind for (lines verbatim from the sources named) --------
@pytest.mark.parametrize("line", [
    # Megatron-Core's rerun state machine under nemo-run, an exception line with no traceback (NVIDIA-NeMo/Speech#14348)
    "i.pretrain/0 [default2]:[rank2]: RuntimeError: Rank 2, node dcfai-xe9680-01, device 2, iteration -1: Unexpected "
    "result nan (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel "
    "communication collective')",
    # the watchdog's C++ exception whose what() line was cut (pytorch/pytorch#123678)
    "Exception raised from ncclCommWatchdog at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1389 "
    "(most recent call first):",
    "A03-R28-I49-2-6000166: Test NCCL failure common.cu:497 'unhandled cuda error'",  # nccl-tests (NVIDIA/nccl#629)
    # the host's memory failing uncorrectably, a machine check (ovro-lwa/lwa-issues#117)
    "[11189.970968] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0 page:0xb757589 "
    "offset:0x140 grain:32 -  OVERFLOW err_code:0101:0092 socket:1 imc:1 rank:0 bg:3 ba:0 row:1a1e8 col:180)",
    "[11219.196673] mce: [Hardware Error]: Machine check events logged",
])
def test_a_failure_in_words_no_reader_knew_stays_unknown(line):
    reader = _read([line])
    assert not reader.errors and len(reader.unknown) == 1


@pytest.mark.parametrize("line", [
    # a corrected memory error is the ECC doing its job (openstreetmap/operations#300): not a failure
    "May  7 06:45:12 errol kernel: [21584690.529877] EDAC MC0: 4 CE error on CPU#0Channel#2_DIMM#0 (channel:2 slot:0 "
    "page:0x0 offset:0x0 grain:8 syndrome:0x0)",
    # warnings name a class, not an error (vllm-project/vllm#5785)
    "(pid=53316) /opt/conda/lib/python3.10/site-packages/transformers/utils/hub.py:124: FutureWarning: Using "
    "`TRANSFORMERS_CACHE` is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead.",
])
def test_what_is_no_failure_does_not_become_unknown(line):
    reader = _read([line])
    assert not reader.errors and not reader.unknown


_GROUP_FAILED = "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts left; " \
                "will restart worker group"  # shun-zheng/Doc2EDAG#24


def test_a_worker_group_restart_with_no_dead_worker_read_is_a_worker_failure():
    reader = _read([_GROUP_FAILED, "INFO:torch.distributed.elastic.agent.server.api:[default] Stopping worker group"])
    assert [e.kind for e in reader.errors] == ["worker_exit"] and "Worker group FAILED" in reader.errors[0].detail


def test_the_restart_after_a_dead_worker_already_read_is_no_second_failure():
    dead = "E0323 21:57:08.583000 23 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) " \
           "local_rank: 0 (pid: 88) of binary: /opt/venv/bin/python3"  # torchrun 2.6 (tests/data/real/logs)
    reader = _read([dead, _GROUP_FAILED, dead.replace("pid: 88", "pid: 91"), _GROUP_FAILED])
    assert [(e.kind, e.pid) for e in reader.errors] == [("worker_exit", 88), ("worker_exit", 91)]


# -- wave 8 (red team): a process that died of a signal, in each shape that reports it, and the CRITICAL level. The
# red team appended these to a resumed worker's log and the window passed ("no error-like line the readers do not
# know"). Shapes from the sources named (PIDs, addresses and times changed).
@pytest.mark.parametrize("line", [
    "Segmentation fault (core dumped)",  # bash, after a tqdm bar (Henry1iu/TNT-Trajectory-Prediction#33)
    "run.sh: line 27: 17610 Segmentation fault      (core dumped) python train.py -epochs 100",  # donglixp/coarse2fine#18
    "12it [00:05,  2.29it/s]zsh: segmentation fault  python3 mobilenet/train.py",  # ml-explore/mlx#341
    "Aborted (core dumped)",
    "Bus error (core dumped)",
    '*** Aborted at 1525341000 (unix time) try "date -d @1525341000" if you are using GNU date ***',  # glog (Paddle#10378)
    "*** SIGSEGV (@0x8) received by PID 19200 (TID 0x7f79839ca700) from PID 8; stack trace: ***",  # glog (Paddle#10378)
    "*** SIGSEGV received at time=1785913000 on cpu 169 ***",  # abseil's failure signal handler (Ray actors' logs)
    "CRITICAL:root:async checkpoint writer died",  # Python logging.basicConfig's default format, its CRITICAL level
    "panic: runtime error: invalid memory address or nil pointer dereference",  # the Go runtime (a storage sidecar)
])
def test_a_process_that_died_of_a_signal_or_logged_critical_is_never_healthy(line):
    reader = _read([line])
    assert [u[1] for u in reader.unknown] == [line.strip()] or [e.kind for e in reader.errors], (reader.unknown,
                                                                                                 reader.errors)


@pytest.mark.parametrize("line", [
    "INFO:root:critical path analysis done in 2.1 s",  # the word, not the level
    "[2026-01-01 12:00:00,000] [INFO] [engine.py:100:step] step=6000, skipped=0, lr=[1e-05]",
    "Sending process 94476 closing signal SIGTERM",  # torchrun stopping its workers on purpose
])
def test_lines_that_only_mention_those_words_stay_healthy(line):
    reader = _read([line])
    assert not reader.unknown and not reader.errors, (reader.unknown, reader.errors)


# one line per alternative of the error-like pattern, in its order (drills/measure/logunknown.py)
_ONE_PER_ALTERNATIVE = [
    "Traceback (most recent call last):", "2024-01-01 ERROR worker died", "host:1:2 [0] NCCL WARN Net : x",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "RuntimeError: CUDA error: out of memory",
    "cuda runtime error (2) : out of memory", "NCCL error in: file.cpp:1", "Fatal Python error: Aborted",
    "terminate called after throwing", "NVRM: GPU at 0000:3b:00.0 has failed", "torch.OutOfMemoryError: x",
    "  ValueError: bad", "Exception raised from ncclCommWatchdog at ../torch/x.cpp:1", "Test NCCL failure x.cu:1",
    "Test failure common.cu:1", "EDAC MC0: 1 UE memory read error on CPU_SrcID", "[Hardware Error]: event severity",
    "mce: [Hardware Error]: Machine check events logged", "F0628 15:21:28.669647  1910 context_gpu.h:107] x",
    "[F0628 15:21:28.669647 context_gpu.h:107] x", "[F ProcessGroupNCCL.cpp:1169] x", "Killed", "Killed  ",
    "zsh: segmentation fault  python train.py", "Bus error (core dumped)", "*** Aborted at 1525341768 (unix time) try",
    "*** SIGSEGV (@0x8) received by PID 19262", "Signal 11 (SIGSEGV) received by PID 7", "CRITICAL:root:x",
    "   panic: runtime error", "fatal error: all goroutines are asleep", "goroutine 1 [running]:",
]


def test_the_error_like_prefilter_hides_no_match_of_its_pattern():
    """The error-like pattern is searched only in text holding one of its literals (a 30x cheaper first look): over
    one line per alternative and every line of the real artifacts, it matches exactly where the pattern does."""
    from pathlib import Path

    from drills.measure.logunknown import ERROR_LIKE

    assert all(ERROR_LIKE.search(line) and ERROR_LIKE.regex.search(line) for line in _ONE_PER_ALTERNATIVE)
    real = Path(__file__).parents[1] / "data"
    lines = matched = 0
    for path in sorted(p for p in real.rglob("*") if p.is_file() and p.stat().st_size < 4 << 20):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for line in text.splitlines():
            lines += 1
            hit = ERROR_LIKE.regex.search(line) is not None
            matched += hit
            assert (ERROR_LIKE.search(line) is not None) == hit, f"{path.name}: {line!r}"
    assert lines > 10_000 and matched > 100, (lines, matched)
