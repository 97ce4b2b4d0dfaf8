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


def test_sonic_pfc_priority_view_reads_two_lossless_priorities():
    # sonic-utilities' `show pfc priority Ethernet0` (the PR that added it): priorities 3 and 4 lossless
    from drills.acceptance.port_facts import read_facts
    from drills.faults.switch.dialect import load_switch_dialect

    text = (DATA.parent / "switch_port" / "sonic-show_pfc_priority-lossless-3-4.txt").read_text().split("\n", 1)[1]
    got = read_facts([load_switch_dialect("sonic").port[2]], [text], "Ethernet0")
    assert (got.pfc, got.pfc_priorities) == (True, (3, 4))
    assert read_facts([load_switch_dialect("sonic").port[2]], [text], "Ethernet4").pfc is None  # not listed: unknown


def test_nccl_tests_2_20_header_read_and_a_run_without_its_summary_is_not_a_result():
    from drills.acceptance.judge import judge_nccl_pair
    from drills.measure.accept import nccl_tests

    text = real("nccl-tests-2.20-gb10-two-nodes-cut-before-summary.txt")
    result = nccl_tests.parse_perf(text)
    assert result.ranks == ((0, "spark-d708", "NVIDIA GB10"), (1, "spark-dbf4", "NVIDIA GB10"))
    assert [r.size_bytes for r in result.rows] == [8192, 16384, 32768, 65536]
    assert result.peak_busbw == 1.01 and result.avg_busbw is None and result.out_of_bounds is None
    # the run printed no `# Avg bus bandwidth` / `# Out of bounds values`: it did not finish; whatever its rows
    # reached (even above the floor), it is no result
    got = judge_nccl_pair("spark-d708", "spark-dbf4", text, Thresholds(pair_busbw_min_gbs=0.5))
    assert not got.go and got.failure == "tool_error" and "did not finish" in got.reason


def test_nccl_tests_rows_behind_mpis_tag_output_prefix():
    from drills.measure.accept import nccl_tests

    result = nccl_tests.parse_perf(real("nccl-tests-mpi-tag-output-prefix-p5-cut-rows.txt"))
    assert [(r.size_bytes, r.busbw_out, r.busbw_in, r.wrong) for r in result.rows] == [
        (8, 0.0, 0.0, 0), (16, 0.0, 0.0, 0), (32, 0.0, 0.0, 0)]
    assert result.avg_busbw is None and result.failure is None
