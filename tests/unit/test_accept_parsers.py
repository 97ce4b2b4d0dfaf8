"""The GPU acceptance parsers and judges (nvidia-smi, dcgmi diag, gpu-burn) on verbatim public tool outputs
(tests/data/real/accept/, source on line 1; the fabric tools: test_accept_parsers_fabric.py). Expected values
were written by reading each file."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.acceptance.catalogue import expectation_for
from drills.acceptance.judge import judge_burn, judge_gpu
from drills.core.errors import ToolOutputError
from drills.measure.accept import dcgmi, gpu_burn, nvidia_smi
from drills.profile.acceptance import AcceptanceConfig, Thresholds

DATA = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"


def real(name: str) -> str:
    text = (DATA / name).read_text(encoding="utf-8")
    assert text.startswith("# source: "), f"{name}: first line must name its source"
    return text.split("\n", 1)[1]


def test_every_real_sample_names_its_source():
    files = sorted(DATA.glob("*.txt"))
    assert len(files) >= 12
    for path in files:
        assert path.read_text(encoding="utf-8").startswith("# source: "), path.name


# -- nvidia-smi ---------------------------------------------------------------------------------------
def test_nvidia_smi_list_two_a100s():
    gpus = nvidia_smi.parse_list(real("nvidia-smi-L-2x-a100.txt"))
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].name == "NVIDIA A100-PCIE-40GB"
    assert gpus[1].uuid == "GPU-c9bd25dc-c0c4-3ab6-8f7f-3ad16d6bde4a"


def test_nvidia_smi_list_of_a_pod_that_sees_no_gpu_is_empty():
    assert nvidia_smi.parse_list("No devices were found\n") == ()


def test_nvidia_smi_table_eight_h100s():
    table = nvidia_smi.parse_table(real("nvidia-smi-8x-h100.txt"))
    assert (table.driver_version, table.cuda_version) == ("560.35.03", "12.6")
    assert len(table.gpus) == 8
    assert [g.temperature_c for g in table.gpus] == [38, 35, 32, 35, 38, 35, 37, 32]
    assert table.gpus[0].name == "NVIDIA H100 80GB HBM3" and table.gpus[0].power_cap_w == 700
    assert table.gpus[1].power_w == 73 and table.gpus[7].perf_state == "P0"
    assert table.hottest_c == 38


def test_nvidia_smi_table_needs_its_header():
    with pytest.raises(ToolOutputError, match="not nvidia-smi"):
        nvidia_smi.parse_table("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


# -- dcgmi diag ---------------------------------------------------------------------------------------
def test_dcgmi_diag_dcgm3_gpu_memory_fail():
    result = dcgmi.parse_diag(real("dcgmi-diag-r3-gpu-memory-fail.txt"))
    assert result.metadata["DCGM Version"] == "3.3.8"
    assert result.metadata["Driver Version Detected"] == "560.35.03"
    names = [t.name for t in result.tests]
    assert names[:5] == ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                         "Persistence Mode"]
    assert names[-4:] == ["PCIe", "GPU Memory", "Memory Bandwidth", "EUD Test"]
    assert not result.passed
    (fail,) = result.failures
    assert (fail.section, fail.name, fail.result, fail.scope) == ("Hardware", "GPU Memory", "Fail", "All")
    assert len(fail.notes) == 8
    assert fail.notes[0].startswith("GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors.")
    assert "Unable to initialize CUDA library: 'system not yet initialized'" in fail.notes[0]
    pcie = next(t for t in result.tests if t.name == "PCIe")
    assert (pcie.section, pcie.result, pcie.scope) == ("Integration", "Skip", "All")
    persistence = next(t for t in result.tests if t.name == "Persistence Mode")
    assert persistence.result == "Pass" and persistence.notes[0].startswith(
        'Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i')


def test_dcgmi_diag_dcgm4_all_pass():
    result = dcgmi.parse_diag(real("dcgmi-diag-r3-dcgm4-pass.txt"))
    assert result.metadata["DCGM Version"] == "4.0.0"
    assert [(t.section, t.name) for t in result.tests] == [
        ("Deployment", "software"), ("Hardware", "memory"), ("Hardware", "diagnostic"), ("Integration", "pcie"),
        ("Stress", "memory_bandwidth"), ("Stress", "targeted_stress"), ("Stress", "targeted_power")]
    assert result.passed and result.failures == ()
    assert all(t.failed_gpus == () for t in result.tests)


def test_dcgmi_diag_without_a_table_is_refused():
    with pytest.raises(ToolOutputError, match="not `dcgmi diag`"):
        dcgmi.parse_diag("Error: unable to establish a connection to the specified host: localhost\n")


# -- gpu-burn -----------------------------------------------------------------------------------------
def test_gpu_burn_two_gpus_one_running_hot():
    result = gpu_burn.parse_burn(real("gpu-burn-2gpu-hot.txt"))
    assert result.gpus == 2 and len(result.snapshots) == 7
    assert result.snapshots[0].gflops == (7124.0, 6963.0)
    assert result.peak_gflops(0) == 7124.0 and result.peak_gflops(1) == 6963.0
    assert result.max_temp_c(0) == 63 and result.max_temp_c(1) == 83
    assert result.errors(0) == 0 and result.errors(1) == 0
    assert result.verdicts == {}


def test_gpu_burn_one_gpu():
    result = gpu_burn.parse_burn(real("gpu-burn-1gpu-ok.txt"))
    assert [s.percent for s in result.snapshots] == [60.0, 90.0, 100.0]
    assert result.peak_gflops(0) == 3519.0 and result.max_temp_c(0) == 53


def test_gpu_burn_that_never_reported():
    with pytest.raises(ToolOutputError, match="never ran"):
        gpu_burn.parse_burn("Couldn't init a GPU test: Error in \"load module\":\n")


# -- more real outputs (expectations written from reading each file) ----------------------------------
def test_dcgmi_diag_dcgm423_software_with_per_gpu_rows():
    result = dcgmi.parse_diag(real("dcgmi-diag-dcgm423-software-per-gpu.txt"))
    assert result.metadata["DCGM Version"] == "4.2.3"
    assert result.metadata["Driver Version Detected"] == "570.148.08"
    assert [(t.section, t.name, t.result) for t in result.tests] == [("Deployment", "software", "Pass")]
    assert result.passed and result.tests[0].failed_gpus == ()


def test_dcgmi_diag_deployment_error_without_a_test_row_is_a_failure():
    # DCGM stops at Deployment with an `Error` row (uncorrectable memory errors, row remappings pending)
    result = dcgmi.parse_diag(real("dcgmi-diag-deployment-error-row-remap.txt"))
    assert not result.passed
    (fail,) = result.failures
    assert fail.section == "Deployment" and fail.result == "Fail"
    # the first piece is exactly 45 characters ("… and row"); the wrapped piece starts with the space
    assert fail.notes == ("GPU 3 has uncorrectable memory errors and row remappings are pending",)


def test_dcgmi_diag_per_gpu_split_result_reads_the_failing_gpu():
    # DCGM 3 prints `Pass - GPUs: 1, …` then `Fail - GPU: 0` on the next row when GPUs disagree
    text = real("dcgmi-diag-r2-per-gpu-fail-fragment.txt")
    with pytest.raises(ToolOutputError, match="not `dcgmi diag`"):
        dcgmi.parse_diag(text)  # the quote has no table header: a fragment is refused as a whole
    (test,) = dcgmi._read_table(text)
    assert (test.name, test.result, test.failed_gpus) == ("GPU Memory", "Fail", (0,))
    assert test.notes[0].startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds")


def test_nvidia_smi_table_one_a100_driver_550():
    text = real("nvidia-smi-1x-a100-550.txt")
    table = nvidia_smi.parse_table(text)
    assert (table.driver_version, table.cuda_version) == ("550.90.12", "12.4")
    (gpu,) = table.gpus
    assert (gpu.index, gpu.name, gpu.temperature_c, gpu.perf_state, gpu.power_w, gpu.power_cap_w) == (
        0, "NVIDIA A100 80GB PCIe", 32, "P0", 69, 300)
    assert nvidia_smi.parse_list(text) == ()  # the table is not `nvidia-smi -L`


def test_nvidia_smi_table_of_an_old_driver_without_cuda_version():
    # drivers before 410 print no `CUDA Version` in the header
    table = nvidia_smi.parse_table(real("nvidia-smi-3x-v100-384-no-cuda-version.txt"))
    assert (table.driver_version, table.cuda_version) == ("384.145", None)
    assert [g.name for g in table.gpus] == ["Tesla V100-SXM2..."] * 3
    assert [g.temperature_c for g in table.gpus] == [66, 66, 59]
    assert [g.power_w for g in table.gpus] == [253, 202, 266] and table.gpus[0].power_cap_w == 300
    assert table.hottest_c == 66


def test_gpu_burn_two_gpus_one_throttling_at_93c():
    result = gpu_burn.parse_burn(real("gpu-burn-2gpu-k40m-93c.txt"))
    assert result.gpus == 2 and len(result.snapshots) == 1
    assert result.snapshots[0].percent == 10.4 and result.snapshots[0].gflops == (74.0, 423.0)
    assert result.max_temp_c(0) == 93 and result.max_temp_c(1) == 57
    assert result.errors(0) == 0 and result.errors(1) == 0 and result.verdicts == {}


# -- failures and faults in real outputs (expectations written from reading each file) ------------------
def test_nvidia_smi_list_with_mig_devices_counts_the_gpus_only():
    gpus = nvidia_smi.parse_list(real("nvidia-smi-L-4x-a100-mig.txt"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]  # the four `MIG 1g.20gb Device N` lines are not GPUs
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert gpus[0].uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpus[3].uuid == "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11"


def test_nvidia_smi_table_with_a_gpu_in_err():
    # GPU 4 lost its GSP (Xid 119): nvidia-smi prints ERR! for its name, temperature, power and ECC
    table = nvidia_smi.parse_table(real("nvidia-smi-8x-a40-one-err.txt"))
    assert (table.driver_version, table.cuda_version) == ("525.60.13", "12.0")
    assert [g.index for g in table.gpus] == [0, 1, 2, 3, 5, 6, 7]
    assert table.errored == (4,)
    assert [g.temperature_c for g in table.gpus] == [24, 25, 40, 30, 23, 22, 21]
    assert table.gpus[2].power_w == 81 and table.gpus[2].perf_state == "P0" and table.gpus[2].power_cap_w == 300
    assert table.hottest_c == 40


def test_dcgmi_diag_dcgm339_blackwell_skips_every_gpu_test():
    result = dcgmi.parse_diag(real("dcgmi-diag-r3-dcgm339-blackwell-all-skip.txt"))
    assert result.metadata["DCGM Version"] == "3.3.9"
    assert result.metadata["Driver Version Detected"] == "570.172.08"
    assert result.metadata["GPU Device IDs Detected"] == "2bb5,2bb5"
    assert len(result.tests) == 15
    assert all(t.result == "Pass" for t in result.tests if t.section == "Deployment")
    assert [(t.section, t.name, t.result, t.scope) for t in result.tests if t.section != "Deployment"] == [
        ("Integration", "PCIe", "Skip", "All"), ("Hardware", "GPU Memory", "Skip", "All"),
        ("Stress", "Targeted Stress", "Skip", "All"), ("Stress", "Targeted Power", "Skip", "All"),
        ("Stress", "Memory Bandwidth", "Skip", "All"), ("Stress", "EUD Test", "Skip", "All")]
    assert result.failures == ()


def test_gpu_burn_faulty_gpus_whose_last_interval_was_clean_still_count():
    # gpu-burn resets its error counts at every summary; its `FAULTY` verdict is sticky (gpu_burn-drv.cpp)
    result = gpu_burn.parse_burn(real("gpu-burn-16gpu-warning-faulty.txt"))
    assert result.gpus == 16 and len(result.snapshots) == 1
    (snap,) = result.snapshots
    assert snap.percent == 100.0 and snap.gflops[0] == 6311.0 and snap.gflops[10] == 6660.0
    w = -524288000
    assert snap.errors == (0, w, w, w, w, 0, 0, 0, 0, w, 0, w, 0, 0, w, 0)
    assert snap.died == (False,) * 16
    assert snap.temps_c[0] == 51 and snap.temps_c[15] == 52
    assert result.verdicts == {i: "FAULTY" for i in range(16)}
    assert result.errors(1) == 524288000
    assert all(result.errors(i) >= 1 for i in range(16))  # GPU 0 shows 0 in the last line, yet it is FAULTY


def test_gpu_burn_k80_that_died_while_the_others_never_started():
    result = gpu_burn.parse_burn(real("gpu-burn-4gpu-k80-init-fail-died.txt"))
    assert result.gpus == 4 and len(result.snapshots) == 4
    assert all(s.percent == 50.0 and s.gflops == (0.0, 0.0, 0.0, 0.0) for s in result.snapshots)
    assert all(s.died == (True, False, False, False) for s in result.snapshots)
    assert [s.errors[0] for s in result.snapshots] == [1641686072, 797249520, 1594499040, -1903218736]
    assert result.snapshots[-1].temps_c == (33, 29, 37, 31)  # `… 31 C read[0] error 0` on the same line
    assert result.errors(0) == 1903218736 and result.errors(1) == 0
    assert result.verdicts == {}


def test_gpu_burn_whose_init_failed_reports_zero_gflops():
    result = gpu_burn.parse_burn(real("gpu-burn-8gpu-init-fail-zero-gflops.txt"))
    assert result.gpus == 8 and [s.percent for s in result.snapshots] == [100.0, 100.0]
    assert [result.peak_gflops(i) for i in range(8)] == [0.0] * 8
    assert [result.errors(i) for i in range(8)] == [0] * 8
    assert result.max_temp_c(4) == 34 and result.verdicts == {}
    assert result.init_error == 'Error in "init": CUBLAS_STATUS_NOT_INITIALIZED'


# -- the judges on those outputs ------------------------------------------------------------------------
def test_judge_gpu_refuses_a_table_with_a_gpu_in_err():
    table = real("nvidia-smi-8x-a40-one-err.txt")
    listing = "".join(f"GPU {i}: NVIDIA A40 (UUID: GPU-{i})\n" for i in range(8))  # what -L printed is not quoted
    eight = expectation_for("gpu-new-01", {}, AcceptanceConfig(expect={"gpus": 8}))  # no A40 server catalogued
    got = judge_gpu("gpu-new-01", listing + table, Thresholds(), 8, eight)
    assert not got.go and got.failure == "diag_failed"
    assert "GPU 4" in got.reason and "ERR!" in got.reason


def test_judge_burn_fails_every_faulty_gpu():
    got = judge_burn("gpu-new-01", real("gpu-burn-16gpu-warning-faulty.txt"), Thresholds(gemm_gflops_min=6000))
    assert not got.go and got.failure == "diag_failed"
    assert got.reason.endswith("computation errors on GPU " + ", ".join(map(str, range(16))))


def test_judge_burn_of_a_run_that_never_started_is_a_no_go():
    """The seed's §5.1 in acceptance: the pod got its 8 GPUs, gpu-burn "ran", CUDA never computed on them."""
    got = judge_burn("gpu-new-01", real("gpu-burn-8gpu-init-fail-zero-gflops.txt"), Thresholds())
    assert not got.go and got.failure == "gpu_unusable" and got.measured["gflops_min"] == 0.0
    assert got.reason.startswith('gpu-burn on gpu-new-01 could not compute on its GPUs (`Couldn\'t init a GPU test: '
                                 'Error in "init": CUBLAS_STATUS_NOT_INITIALIZED`): 8 of 8 sat idle at 0 Gflop/s')


# -- outputs committed to public repositories (round 6; expectations written from reading each file) ----
def test_nvidia_smi_table_eight_h100s_driver_550():
    text = real("nvidia-smi-8x-h100-550.txt")
    table = nvidia_smi.parse_table(text)
    assert (table.driver_version, table.cuda_version) == ("550.90.07", "12.4")
    assert [g.index for g in table.gpus] == list(range(8)) and table.errored == ()
    assert {g.name for g in table.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.temperature_c for g in table.gpus] == [25, 27, 26, 27, 27, 25, 26, 24]
    assert [g.power_w for g in table.gpus] == [92, 93, 96, 93, 95, 91, 91, 91]
    assert {g.power_cap_w for g in table.gpus} == {700} and {g.perf_state for g in table.gpus} == {"P0"}
    assert table.hottest_c == 27
    assert nvidia_smi.parse_list(text) == ()


def test_judge_gpu_on_eight_h100s_with_another_driver_pinned():
    listing = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(8))  # -L is not quoted
    text = listing + real("nvidia-smi-8x-h100-550.txt")
    dgx = expectation_for("gpu-new-01", {"node.kubernetes.io/instance-type": "dgx-h100"}, AcceptanceConfig())
    got = judge_gpu("gpu-new-01", text, Thresholds(driver_version="560.35.03"), 8, dgx)
    assert not got.go and got.failure == "version_mismatch"
    assert got.reason == "gpu-new-01: driver 550.90.07, the profile pins 560.35.03"
    ok = judge_gpu("gpu-new-01", text, Thresholds(driver_version="550.90.07", cuda_version="12.4"), 8, dgx)
    assert ok.go and ok.measured["driver"] == "550.90.07"


def test_nvidia_smi_table_four_gh200s_driver_590_cuda_13():
    table = nvidia_smi.parse_table(real("nvidia-smi-4x-gh200-590.txt"))
    assert (table.driver_version, table.cuda_version) == ("590.48.01", "13.1")
    assert [(g.index, g.name) for g in table.gpus] == [(i, "NVIDIA GH200 120GB") for i in range(4)]
    assert [g.temperature_c for g in table.gpus] == [23, 26, 25, 23]
    assert [g.power_w for g in table.gpus] == [92, 80, 100, 99] and {g.power_cap_w for g in table.gpus} == {900}
    assert table.errored == () and table.hottest_c == 26
