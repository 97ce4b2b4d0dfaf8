"""The acceptance parsers on verbatim public tool outputs (tests/data/real/accept/, source on line 1).
Expected values were written by reading each file."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.core.errors import ToolOutputError
from drills.measure.accept import dcgmi, gpu_burn, ibstat, nccl_tests, nvidia_smi, perftest

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


# -- nccl-tests ---------------------------------------------------------------------------------------
def test_nccl_tests_single_gpu_table():
    result = nccl_tests.parse_perf(real("nccl-tests-allreduce-1gpu-5090.txt"))
    assert result.ranks == ((0, "GENOA-06", "NVIDIA GeForce RTX 5090"),)
    assert len(result.rows) == 25
    assert result.rows[0].size_bytes == 8 and result.rows[-1].size_bytes == 134217728
    assert result.peak_busbw == 0.0 and result.avg_busbw == 0.0
    assert result.wrong == 0 and result.failure is None and result.transports == {}


def test_nccl_tests_two_nodes_tree():
    result = nccl_tests.parse_perf(real("nccl-tests-allreduce-2node-tree-h100.txt"))
    assert [r.size_bytes for r in result.rows] == [2097152, 4194304, 8388608, 16777216, 33554432]
    assert result.rows[0].busbw_out == 18.53 and result.rows[0].busbw_in == 22.46
    assert result.peak_busbw == 41.52
    assert result.avg_busbw is None  # the excerpt stops before the summary


def test_nccl_tests_socket_transport_and_failure():
    result = nccl_tests.parse_perf(real("nccl-tests-allreduce-socket-cuda-failure.txt"))
    assert result.hosts == ("GENOA-06",)
    assert result.transports == {"GENOA-06": "Socket"} and result.socket == ("GENOA-06",)
    assert result.rows == () and result.avg_busbw is None
    assert result.failure == "common.cu:392 unhandled cuda error (run with NCCL_DEBUG=INFO for details)"


def test_nccl_tests_refuses_other_text():
    with pytest.raises(ToolOutputError):
        nccl_tests.parse_perf("bash: all_reduce_perf: command not found\n")


# -- perftest -----------------------------------------------------------------------------------------
def test_ib_write_bw_roce_in_gbits():
    result = perftest.parse_bw(real("ib-write-bw-roce-gbits.txt"))
    assert result.test == "RDMA_Write Post List BW Test"
    assert (result.device, result.link_type, result.mtu, result.unit) == ("ib0", "Ethernet", "4096[B]", "Gb/sec")
    (row,) = result.rows
    assert (row.size_bytes, row.iterations, row.peak, row.average, row.msg_rate_mpps) == (8, 224958464, 0.0, 0.48,
                                                                                          7.498617)
    assert result.average_gbps == 0.48


def test_ib_read_bw_in_megabytes():
    result = perftest.parse_bw(real("ib-read-bw-ib-mbytes.txt"))
    assert (result.device, result.link_type, result.unit) == ("mlx5_1", "IB", "MB/sec")
    assert [r.size_bytes for r in result.rows] == [2, 4, 8]
    assert result.rows[-1].average == 19.50
    assert result.average_gbps == pytest.approx(0.156)


def test_perftest_without_results():
    with pytest.raises(ToolOutputError, match="did not finish"):
        perftest.parse_bw(" Couldn't connect to 10.0.0.2:18515\n")


# -- ibstat -------------------------------------------------------------------------------------------
def test_ibstat_roce_with_one_port_down():
    cas = ibstat.parse_ibstat(real("ibstat-roce-one-port-down.txt"))
    assert [c.name for c in cas] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    assert cas[0].ca_type == "MT4129" and cas[0].firmware == "28.39.1002"
    port = cas[0].ports[0]
    assert (port.number, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        1, "Active", "LinkUp", 200, "Ethernet")
    assert port.up
    down = cas[2].ports[0]
    assert (down.state, down.physical_state, down.rate_gbps, down.link_layer) == ("Down", "Disabled", None, None)
    assert not down.up


def test_ibstat_ib_logical_down_physical_up():
    (ca,) = ibstat.parse_ibstat(real("ibstat-ib-state-down-linkup.txt"))
    port = ca.ports[0]
    assert (ca.name, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        "mlx5_7", "Down", "LinkUp", 200, "InfiniBand")
    assert not port.up


def test_ibstat_without_devices():
    with pytest.raises(ToolOutputError):
        ibstat.parse_ibstat("ibpanic: [12] main: stat of IB device 'mlx5_0' failed: No such file or directory\n")
