"""The fabric acceptance parsers and judges (nccl-tests, perftest, ibstat) on verbatim public tool outputs
(tests/data/real/accept/, source on line 1); the GPU tools are in test_accept_parsers.py."""

from __future__ import annotations

import pytest

from drills.acceptance.judge import judge_nccl_node, judge_rdma
from drills.core.errors import ToolOutputError
from drills.measure.accept import ibstat, nccl_tests, perftest
from drills.profile.acceptance import Thresholds
from tests.unit.test_accept_parsers import real


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


# -- more real outputs (expectations written from reading each file) ----------------------------------
def test_nccl_tests_two_nodes_sixteen_ranks_with_summary():
    result = nccl_tests.parse_perf(real("nccl-tests-allreduce-2node-16rank-h100.txt"))
    assert len(result.ranks) == 16
    assert result.ranks[0] == (0, "ztan-mig-235z", "NVIDIA H100 80GB HBM3")
    assert result.ranks[15] == (15, "ztan-mig-gq73", "NVIDIA H100 80GB HBM3")
    assert result.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert len(result.rows) == 31  # 8 B … 8 GiB, factor 2
    assert (result.rows[-1].size_bytes, result.rows[-1].busbw_out, result.rows[-1].busbw_in) == (
        8589934592, 338.82, 337.35)
    assert result.peak_busbw == 338.82 and result.avg_busbw == 70.742 and result.out_of_bounds == 0
    assert result.wrong == 0 and result.failure is None and result.transports == {}


def test_nccl_tests_older_layout_without_root_and_with_an_error_column():
    # nccl-tests before the `root`/`#wrong` columns: `error` is the largest deviation (1e-07), not a count
    result = nccl_tests.parse_perf(real("nccl-tests-allreduce-old-layout-error-column.txt"))
    assert [r[1] for r in result.ranks] == ["gpu9"] * 4
    assert result.ranks[3] == (3, "gpu9", "NVIDIA GeForce RTX 2080 Ti")
    assert [r.size_bytes for r in result.rows] == [8, 16, 32]
    assert result.peak_busbw == 0.0 and result.wrong == 0
    assert result.avg_busbw is None and result.failure is None and result.out_of_bounds is None


# -- failures and faults in real outputs (expectations written from reading each file) ------------------
def test_nccl_tests_old_layout_without_redop_and_a_failed_validation():
    # all_gather of nccl-tests before 2.13 has no redop column; before cbe7f65 (2019-03) no `#` on the summary
    result = nccl_tests.parse_perf(real("nccl-tests-allgather-old-layout-oob-failed.txt"))
    (row,) = result.rows
    assert (row.size_bytes, row.busbw_out, row.busbw_in, row.wrong) == (4294967296, 129.05, 128.84, 0)
    assert result.out_of_bounds == 2 and result.wrong == 2
    assert result.avg_busbw == 128.942 and result.peak_busbw == 129.05
    assert result.failure is None and result.ranks == ()


def test_ib_write_bw_that_could_not_reach_its_server():
    with pytest.raises(ToolOutputError, match="did not finish"):
        perftest.parse_bw(real("ib-write-bw-socket-connect-failure.txt"))


def test_ib_read_bw_that_printed_its_header_then_failed_the_key_exchange():
    with pytest.raises(ToolOutputError, match="did not finish"):
        perftest.parse_bw(real("ib-read-bw-header-then-read-keys-failure.txt"))


def test_ibstat_two_port_mlx4_both_down():
    (ca,) = ibstat.parse_ibstat(real("ibstat-mlx4-ib-polling-eth-disabled.txt"))
    assert (ca.name, ca.ca_type, ca.firmware) == ("mlx4_0", "MT4099", "2.42.5000")
    assert [(p.number, p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in ca.ports] == [
        (1, "Down", "Polling", 10, "InfiniBand"), (2, "Down", "Disabled", 40, "Ethernet")]
    assert not any(p.up for p in ca.ports)


def test_ibstat_ib_port_polling_with_a_placeholder_rate():
    (ca,) = ibstat.parse_ibstat(real("ibstat-ib-down-polling-rate10.txt"))
    (port,) = ca.ports
    assert (ca.name, ca.ca_type, ca.firmware) == ("mlx5_10", "MT4129", "28.39.1002")
    assert (port.state, port.physical_state, port.rate_gbps, port.link_layer) == ("Down", "Polling", 10, "InfiniBand")
    assert not port.up


# -- the judges on those outputs ------------------------------------------------------------------------
def test_judge_nccl_counts_the_old_layouts_out_of_bounds_values():
    got = judge_nccl_node("gpu-new-01", real("nccl-tests-allgather-old-layout-oob-failed.txt"),
                          Thresholds(nvlink_busbw_min_gbs=100))
    assert not got.go and got.failure == "diag_failed" and got.reason.endswith("2 wrong results")


def test_judge_rdma_with_a_polling_port_and_a_failed_bandwidth_test():
    text = ("=== ibstat\n" + real("ibstat-ib-down-polling-rate10.txt")
            + "=== ib_write_bw -d mlx5_10\n" + real("ib-write-bw-socket-connect-failure.txt"))
    got = judge_rdma("gpu-new-01", text, Thresholds(link_layer="InfiniBand"))
    assert not got.go and got.failure == "port_down"
    assert got.reason == "RDMA port of mlx5_10 on gpu-new-01 is down (ibstat: mlx5_10 Down/Polling)"


# -- outputs committed to public repositories (round 6; expectations written from reading each file) ----
def test_ibstat_ib_port_initializing_with_the_link_up():
    # the cable trained (LinkUp) but no subnet manager configured the port (SM lid 0): not usable
    (ca,) = ibstat.parse_ibstat(real("ibstat-mlx4-ib-initializing-linkup.txt"))
    assert (ca.name, ca.ca_type, ca.firmware) == ("mlx4_0", "MT4099", "2.42.5000")
    (port,) = ca.ports
    assert (port.number, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        1, "Initializing", "LinkUp", 40, "InfiniBand")
    assert not port.up


def test_judge_rdma_refuses_an_initializing_port_whose_link_is_up():
    text = "=== ibstat\n" + real("ibstat-mlx4-ib-initializing-linkup.txt")
    got = judge_rdma("gpu-new-01", text, Thresholds(link_layer="InfiniBand", rail_rate_gbps=40))
    assert not got.go and got.failure == "port_down"
    assert got.reason == "RDMA port of mlx4_0 on gpu-new-01 is down (ibstat: mlx4_0 Initializing/LinkUp)"


def test_ibstat_nine_cas_mixed_link_layers_and_rates():
    cas = ibstat.parse_ibstat(real("ibstat-9ca-mixed-eth-ib-56-100.txt"))
    assert [c.name for c in cas] == ["mlx4_0"] + [f"mlx5_{i}" for i in range(8)]
    assert [c.ca_type for c in cas] == ["MT4099"] + ["MT4119"] * 8
    assert cas[0].firmware == "2.42.5000" and {c.firmware for c in cas[1:]} == {"16.24.1000"}
    assert all(len(c.ports) == 1 and c.ports[0].up for c in cas)
    assert [c.ports[0].rate_gbps for c in cas] == [10, 100, 56, 100, 100, 100, 56, 100, 56]
    assert [c.ports[0].link_layer for c in cas] == ["Ethernet", "InfiniBand", "InfiniBand", "InfiniBand", "Ethernet",
                                                    "InfiniBand", "InfiniBand", "InfiniBand", "InfiniBand"]


def test_judge_rdma_refuses_ports_at_the_wrong_rate_or_link_layer():
    text = "=== ibstat\n" + real("ibstat-9ca-mixed-eth-ib-56-100.txt")
    got = judge_rdma("gpu-new-01", text, Thresholds(link_layer="InfiniBand", rail_rate_gbps=100))
    assert not got.go and got.failure == "port_config"
    assert got.reason == "mlx4_0 on gpu-new-01: rate 10 Gb/s, link layer Ethernet (expected 100, InfiniBand)"
