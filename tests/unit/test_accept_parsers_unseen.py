"""The GPU acceptance parsers and judge on tool outputs of the unseen round (tests/data/real/accept/, source on
line 1; expectations written from reading each file before any parser ran): a GPU the driver lost must read as a
lost GPU, never as "no GPU here", and a `dcgmi diag` fragment is refused whole while its rows still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.acceptance.catalogue import expectation_for
from drills.acceptance.judge import judge_gpu
from drills.core.errors import ToolOutputError
from drills.measure.accept import dcgmi
from drills.profile.acceptance import AcceptanceConfig, Thresholds

DATA = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"


def real(name: str) -> str:
    text = (DATA / name).read_text(encoding="utf-8")
    assert text.startswith("# source: "), f"{name}: first line must name its source"
    return text.split("\n", 1)[1]


@pytest.mark.parametrize("name, pci, words", [
    ("nvidia-smi-gpu-is-lost-reboot.txt", "0000:02:00.0", "GPU is lost"),
    ("nvidia-smi-a-i-0-unknown-error-device-handle.txt", "0000:09:00.0", "Unknown Error"),
])
def test_judge_gpu_names_the_gpu_the_driver_lost(name, pci, words):
    # nvidia-smi answers only `Unable to determine the device handle for GPU <pci>: <why>`: the node has a GPU
    # the driver cannot reach (fallen off the bus, Xid 79) — a failed diagnostic naming it, not "0 GPUs seen"
    four = expectation_for("gpu-new-01", {}, AcceptanceConfig(expect={"gpus": 4}))
    got = judge_gpu("gpu-new-01", real(name), Thresholds(), 4, four)
    assert not got.go and got.failure == "diag_failed"
    assert pci in got.reason and words in got.reason


def test_dcgmi_diag_fragment_is_refused_but_its_rows_read_the_failures():
    text = real("dcgmi-diag-fragment-gpu0-cuctxcreate-busy-diagnostic-fail-all.txt")
    with pytest.raises(ToolOutputError, match="not `dcgmi diag`"):
        dcgmi.parse_diag(text)  # no table header in the quote
    tests = dcgmi._read_table(text)
    assert [(t.name, t.result) for t in tests] == [("GPU Memory", "Fail"), ("Diagnostic", "Fail"),
                                                  ("Targeted Stress", "Fail")]
    memory, diagnostic, _ = tests
    assert memory.failed_gpus == (0,)
    assert memory.notes[0].startswith("GPU 0 Error using CUDA API cuCtxCreate")
    assert "Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or unavailable'." in memory.notes[0]
    assert diagnostic.scope == "All"
