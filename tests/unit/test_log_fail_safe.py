"""Unknown is not healthy (issue 33), on lines of the unseen round: a CUDA error of a failed GPU outside any
traceback is the GPU reader's error; a CUDA error of a kernel bug, a C++/Python abort and an NCCL error in a shape no
recogniser knows stay in the reader's unknown lines, so a stability window cannot pass on them. Lines verbatim
from the sources named (tests/data/real/logs keeps the whole excerpts)."""

from __future__ import annotations

import pytest

from drills.measure.logread import LogReader


def _read(lines: list[str]) -> LogReader:
    reader = LogReader()
    for line in lines:
        reader.feed(line)
    reader.close()
    return reader


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
