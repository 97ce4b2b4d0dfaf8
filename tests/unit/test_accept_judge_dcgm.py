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
