"""The DCGM acceptance judge on NVIDIA's own `dcgmi diag -r 3` example (tests/data/real/accept): it passes as
printed; the same table with every GPU test skipped (what DCGM prints when it cannot run them) is a no-go."""

from __future__ import annotations

import re
from pathlib import Path

from drills.acceptance.judge import judge_dcgm
from drills.profile.acceptance import Thresholds

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"


def _real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8").split("\n", 1)[1]


def test_the_documented_level_3_run_is_a_go():
    got = judge_dcgm("gpu-new-01", _real("dcgmi-diag-r3-dcgm4-pass.txt"), Thresholds(dcgm_level=3))
    assert got.go and got.reason == "DCGM level 3: 6 GPU tests ran, none failed"


def test_a_level_3_run_that_skipped_every_gpu_test_is_a_no_go():
    text = _real("dcgmi-diag-r3-dcgm4-pass.txt")
    head, sep, rest = text.partition("Hardware")
    skipped = head + sep + re.sub(r"\bPass\b", "Skip", rest)  # Deployment passed; nothing after it ran
    got = judge_dcgm("gpu-new-01", skipped, Thresholds(dcgm_level=3))
    assert not got.go and got.failure == "not_run"
    assert got.reason == ("DCGM diagnostic level 3 on gpu-new-01 ran no GPU test: memory, diagnostic, pcie, "
                          "memory_bandwidth, targeted_stress, targeted_power skipped")


def test_a_real_level_3_run_where_dcgm_skipped_every_gpu_test_is_a_no_go():
    # DCGM 3.3.9 on RTX PRO 6000 Blackwell GPUs: the Deployment checks pass, every GPU test is `Skip - All`
    got = judge_dcgm("gpu-new-01", _real("dcgmi-diag-r3-dcgm339-blackwell-all-skip.txt"), Thresholds(dcgm_level=3))
    assert not got.go and got.failure == "not_run" and got.measured["dcgm"] == "3.3.9"
    assert got.reason == ("DCGM diagnostic level 3 on gpu-new-01 ran no GPU test: PCIe, GPU Memory, Targeted Stress, "
                          "Targeted Power, Memory Bandwidth, EUD Test skipped")


def _uncommented(name: str) -> str:
    """The quoted table without the `    # ` of the Python comment it is committed in (lines otherwise as printed)."""
    return "\n".join(line.strip().removeprefix("# ") for line in _real(name).splitlines())


def test_a_dcgm3_level_3_run_on_eight_h200s_keeps_its_hardware_diagnostic_row():
    # DCGM 3.x names a Hardware test `Diagnostic` (the header's first column is `Diagnostic` too)
    from drills.measure.accept import dcgmi

    result = dcgmi.parse_diag(_uncommented("dcgmi-diag-r3-dcgm339-h200-pass-commented.txt"))
    assert result.metadata["DCGM Version"] == "3.3.9" and result.metadata["Driver Version Detected"] == "570.133.20"
    assert result.metadata["GPU Device IDs Detected"] == ",".join(["2335"] * 8)
    assert len(result.tests) == 16
    assert [(t.section, t.name, t.result, t.scope) for t in result.tests if t.section != "Deployment"] == [
        ("Integration", "PCIe", "Pass", "All"), ("Hardware", "GPU Memory", "Pass", "All"),
        ("Hardware", "Diagnostic", "Pass", "All"), ("Stress", "Targeted Stress", "Pass", "All"),
        ("Stress", "Targeted Power", "Pass", "All"), ("Stress", "Memory Bandwidth", "Pass", "All"),
        ("Stress", "EUD Test", "Skip", "All")]
    assert result.passed
    got = judge_dcgm("gpu-new-01", _uncommented("dcgmi-diag-r3-dcgm339-h200-pass-commented.txt"), Thresholds())
    assert got.go and got.reason == "DCGM level 3: 6 GPU tests ran, none failed"


def test_a_failed_hardware_diagnostic_row_is_a_no_go():
    text = _uncommented("dcgmi-diag-r3-dcgm339-h200-pass-commented.txt")
    row = "| Diagnostic                | Pass - All"
    assert text.count(row) == 1
    got = judge_dcgm("gpu-new-01", text.replace(row, "| Diagnostic                | Fail - All"), Thresholds())
    assert not got.go and got.failure == "diag_failed"
    assert got.reason == "DCGM diagnostic level 3 on gpu-new-01: Diagnostic failed"
