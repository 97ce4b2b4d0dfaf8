"""Acceptance on evidence, as pure functions: the product catalogue is the expectation (never the node's own
capacity), required checks that left no result are no-gos, waivers are explicit, evidence is bound to its
node (pod, host names, GPU UUIDs, NIC GUIDs), pair tests must show a network path between both hosts, and
a value above its physical bound is implausible. Real outputs from tests/data/real/accept where they exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.acceptance import identity, plausible, policy
from drills.acceptance.catalogue import catalogue, expectation_for
from drills.acceptance.judge import CheckResult, judge_gpu, judge_nccl_pair, judge_rdma
from drills.core.errors import InvalidProfile
from drills.profile.acceptance import AcceptanceConfig, Thresholds, Waiver
from drills.twin.workloads import accept_tools as T

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"
DGX = {"node.kubernetes.io/instance-type": "dgx-h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def _real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8").split("\n", 1)[1]


def _smi(node: str, n: int, name: str = "NVIDIA H100 80GB HBM3") -> str:
    return "\n".join(T.nvidia_smi(node, name, n, "550.90.07", "12.4", [34] * n))


# -- the catalogue ------------------------------------------------------------------------------------------
def test_the_catalogue_names_a_source_for_every_figure_of_the_five_gpus():
    data = catalogue()
    assert {"H100-SXM", "H200-SXM", "B200", "A100-SXM-80GB", "L40S"} <= set(data["gpus"])
    for key, gpu in data["gpus"].items():
        assert {"memory_gb", "nvlink_gbs", "pcie_gbs", "tflops_dense", "thermal"} <= set(gpu), key
        cite = gpu["cite"]
        assert all(cite.get(f, cite.get("*")) in data["sources"] for f in gpu if f not in ("labels", "cite")), key


def test_the_expectation_comes_from_the_instance_type_and_a_profile_override_says_so():
    e = expectation_for("gpu-new-01", DGX, AcceptanceConfig())
    assert (e.server, e.gpu, e.value("gpus"), e.nic_aggregate_gbps()) == ("DGX-H100", "H100-SXM", 8, 3200.0)
    assert e.get("gpus").origin == "catalogue" and "DGX H100/H200 User Guide" in e.get("gpus").source
    assert e.value("tflops.tf32") == 494.7 and e.value("thermal.shutdown_c") == 92
    over = expectation_for("gpu-new-01", DGX, AcceptanceConfig(expect={"gpus": 4}))
    assert over.get("gpus").value == 4 and over.get("gpus").origin == "profile"
    only_gpu = expectation_for("gpu-new-01", {"nvidia.com/gpu.product": "NVIDIA-L40S"}, AcceptanceConfig())
    assert only_gpu.gpu == "L40S" and only_gpu.get("gpus") is None  # a GPU model says nothing of the count
    with pytest.raises(InvalidProfile, match="not in the catalogue"):
        expectation_for("n", {}, AcceptanceConfig(server="dgx-h999"))


# -- expectation: the node agreeing with itself is not evidence --------------------------------------------
def test_seven_gpus_advertised_and_seen_on_an_eight_gpu_server_is_a_no_go():
    got = judge_gpu("gpu-new-02", _smi("gpu-new-02", 7), Thresholds(), 7, expectation_for("gpu-new-02", DGX, AcceptanceConfig()))
    assert not got.go and got.failure == "missing_gpu"
    assert "sees 7 GPUs" in got.reason and "advertises 7" in got.reason and "a DGX-H100 has 8" in got.reason
    assert got.thresholds == {"gpus": 8, "gpus_from": "catalogue"}


def test_without_a_catalogued_product_the_gpu_check_cannot_go():
    got = judge_gpu("gpu-new-02", _smi("gpu-new-02", 8), Thresholds(), 8,
                    expectation_for("gpu-new-02", {"node.kubernetes.io/instance-type": "gpu-h100x8"}, AcceptanceConfig()))
    assert not got.go and got.failure == "no_expectation" and "acceptance.expect.gpus" in got.reason


def test_another_gpu_model_than_the_server_carries_is_a_product_mismatch():
    got = judge_gpu("gpu-new-02", _smi("gpu-new-02", 8, "NVIDIA A100-SXM4-80GB"), Thresholds(), 8,
                    expectation_for("gpu-new-02", DGX, AcceptanceConfig()))
    assert not got.go and got.failure == "product_mismatch" and "NVIDIA A100-SXM4-80GB" in got.reason


# -- required checks and waivers ------------------------------------------------------------------------------
def test_a_required_check_left_out_of_the_list_is_a_not_run_no_go_unless_waived():
    cfg = AcceptanceConfig(checks=["gpu", "burn"])
    ran = [CheckResult("n1", "gpu", True, "ok"), CheckResult("n1", "burn", True, "ok")]
    missing = policy.missing_required(cfg, ("n1",), ran)
    assert {r.check for r in missing} == {"dcgm", "nccl-node", "rdma", "nccl-pair", "switch-port", "storage"}
    dcgm = next(r for r in missing if r.check == "dcgm")
    assert not dcgm.go and dcgm.failure == "not_run" and "not in acceptance.checks" in dcgm.reason
    assert policy.blocking(cfg, dcgm)
    waived = AcceptanceConfig(checks=["gpu", "burn"], waivers=[Waiver(check="dcgm", node="n1", reason="DCGM image not "
                                                                      "mirrored yet", by="j.doe")])
    assert not policy.blocking(waived, dcgm) and policy.waiver_for(waived, "n1", "dcgm").by == "j.doe"
    assert policy.blocking(waived, CheckResult("n2", "dcgm", False, "x", failure="not_run"))


def test_dcgm_that_ran_below_the_policys_level_is_a_no_go():
    from drills.acceptance.judge import judge_dcgm

    level1 = "\n".join(T.dcgmi_diag(1, "3.3.8", "550.90.07", 8))
    got = judge_dcgm("n1", level1, Thresholds(dcgm_level=1), min_level=2)
    assert not got.go and got.failure == "not_run" and "requires level ≥ 2" in got.reason
    assert judge_dcgm("n1", _real("dcgmi-diag-r3-dcgm4-pass.txt"), Thresholds(dcgm_level=3), min_level=2).go


# -- identity ---------------------------------------------------------------------------------------------------
def test_the_same_gpu_uuids_on_two_nodes_make_both_wrong_node_naming_each_other():
    e = AcceptanceConfig()
    a = judge_gpu("gpu-new-01", _smi("gpu-new-01", 8), Thresholds(), 8, expectation_for("gpu-new-01", DGX, e))
    b = judge_gpu("gpu-new-02", _smi("gpu-new-01", 8), Thresholds(), 8, expectation_for("gpu-new-02", DGX, e))
    assert a.go and b.go  # each alone looks perfect
    got = identity.cross_check([a, b])
    assert [r.failure for r in got] == ["wrong_node", "wrong_node"]
    assert "also reported by gpu-new-02" in got[0].reason and "also reported by gpu-new-01" in got[1].reason


def test_a_pod_on_another_node_is_not_evidence_about_this_one():
    r = CheckResult("gpu-new-02", "storage", True, "fio ok")
    got = identity.bind(r, {"metadata": {"name": "acc-storage-x"}, "spec": {"nodeName": "gpu-new-01"}})
    assert not got.go and got.failure == "wrong_node" and "ran on gpu-new-01 (spec.nodeName)" in got.reason
    same = identity.bind(r, {"metadata": {"name": "acc-storage-x"}, "spec": {"nodeName": "gpu-new-02"}})
    assert same.go and same.evidence == {"pod": "acc-storage-x", "spec.nodeName": "gpu-new-02"}


def test_nic_guids_from_ibstat_are_recorded_and_must_be_unique():
    one = "=== ibstat\n" + _real("ibstat-roce-one-port-down.txt")
    r = judge_rdma("n1", one, Thresholds())
    assert r.measured["nic_guids"]["mlx5_0"] == "0x58a2e10300dae626"
    got = identity.cross_check([r, judge_rdma("n2", one, Thresholds())])
    assert {x.failure for x in got} == {"wrong_node"}


# -- pair tests prove the path; values within physical bounds -------------------------------------------------
def _pair(hosts, busbw: float) -> str:
    return "\n".join(T.all_reduce_perf(hosts, 1, "NVIDIA H100 80GB HBM3", busbw, "IB", ["mlx5_0"], "RoCE"))


def test_a_pair_whose_ranks_never_left_one_machine_is_wrong_path():
    got = judge_nccl_pair("gpu-new-02", "gpu-train-01", "\n".join(T.all_reduce_perf(
        [("gpu-new-02", "10.0.3.2")], 2, "NVIDIA H100 80GB HBM3", 360.0, "IB", [], "RoCE")), Thresholds())
    assert not got.go and got.failure == "wrong_path" and "never left the node" in got.reason


def test_a_pair_with_both_hosts_and_rdma_is_judged_on_its_bandwidth():
    got = judge_nccl_pair("gpu-new-02", "gpu-train-01", _pair([("gpu-new-02", "10.0.3.2"), ("gpu-train-01", "10.0.1.1")],
                                                              180.0), Thresholds())
    assert got.go and got.measured["hosts"] == ["gpu-new-02", "gpu-train-01"]


def test_a_real_two_node_run_without_nccl_info_does_not_show_its_path():
    text = _real("nccl-tests-allreduce-2node-16rank-h100.txt")
    got = judge_nccl_pair("ztan-mig-235z", "ztan-mig-gq73", text, Thresholds(pair_busbw_min_gbs=100))
    assert not got.go and got.failure == "wrong_path" and "no NCCL network transport printed" in got.reason


def test_the_real_a3_mega_result_is_within_its_bound_and_a_faster_one_is_implausible():
    # 16 ranks on 2 hosts: busbw counts 15/16 of the data, the NICs carry 1/2 → bound 1600/8 × 1.875 = 375 GB/s
    r = CheckResult("ztan-mig-235z", "nccl-pair", True, "ok", peer="ztan-mig-gq73",
                    measured={"busbw_gbs": 338.82, "ranks": 16, "hosts": ["ztan-mig-235z", "ztan-mig-gq73"]})
    e = expectation_for("ztan-mig-235z", {"node.kubernetes.io/instance-type": "a3-megagpu-8g"}, AcceptanceConfig())
    assert plausible.check(r, e).go
    one_rank = CheckResult("n1", "nccl-pair", True, "ok", peer="n2", measured={"busbw_gbs": 338.82, "ranks": 2,
                                                                             "hosts": ["n1", "n2"]})
    got = plausible.check(one_rank, e)
    assert not got.go and got.failure == "implausible" and "above the physical limit 200.0" in got.reason


def test_a_rail_faster_than_its_port_is_implausible():
    text = "\n".join(["=== ibstat", *T.ibstat([("mlx5_0", True, 400, "Ethernet")], "n1"), "=== ib_write_bw -d mlx5_0",
                      *T.ib_write_bw("mlx5_0", True, "Ethernet", 465.6)])
    e = expectation_for("n1", DGX, AcceptanceConfig(expect={"nics.count": 1}))
    r = judge_rdma("n1", text, Thresholds(), e)
    assert r.go  # the judge's own floor is met
    got = plausible.check(r, e)
    assert not got.go and got.failure == "implausible" and "rail mlx5_0" in got.reason
    assert got.expected["max: rail mlx5_0 Gb/s (NIC rate)"]["origin"] == "catalogue"


def test_a_burn_above_the_gpus_tf32_peak_is_implausible_and_a_real_one_is_not():
    e = expectation_for("n1", DGX, AcceptanceConfig())
    ok = CheckResult("n1", "burn", True, "ok", measured={"gflops_per_gpu": [52000.0] * 8, "temp_max_c": 67})
    assert plausible.check(ok, e).go
    fast = CheckResult("n1", "burn", True, "ok", measured={"gflops_per_gpu": [52000.0, 610000.0], "temp_max_c": 67})
    assert plausible.check(fast, e).failure == "implausible"


def test_an_identity_an_accepted_node_recorded_is_wrong_node_on_a_new_one():
    e = expectation_for("gpu-new-07", DGX, AcceptanceConfig())
    r = judge_gpu("gpu-new-07", _smi("gpu-train-01", 8), Thresholds(), 8, e)
    recorded = identity.of_node([judge_gpu("gpu-train-01", _smi("gpu-train-01", 8), Thresholds(), 8, e)], "gpu-train-01")
    assert len(recorded["gpus"]) == 8 and recorded["nics"] == []
    got = identity.cross_check([r], {"gpu-train-01": recorded})
    assert got[0].failure == "wrong_node" and "also reported by gpu-train-01" in got[0].reason
    assert identity.cross_check([r], {"gpu-train-01": {"gpus": ["GPU-other"]}})[0].go


def test_a_check_that_covered_part_of_the_node_is_partial():
    from drills.acceptance import coverage
    from drills.acceptance.judge import judge_dcgm

    e = expectation_for("n1", DGX, AcceptanceConfig())
    four = judge_dcgm("n1", _real("dcgmi-diag-r3-dcgm4-pass.txt"), Thresholds(dcgm_level=3))  # 4 GPUs detected
    assert four.go and four.measured["gpus_tested"] == 4
    got = coverage.check(four, e)
    assert not got.go and got.failure == "partial" and "covered 4 of the 8 GPUs a DGX-H100 has" in got.reason
    rails = CheckResult("n1", "rdma", True, "ok", measured={"rails_tested": 4})
    assert coverage.check(rails, e).failure == "partial"
    assert coverage.check(CheckResult("n1", "rdma", True, "ok", measured={"rails_tested": 8}), e).go


def test_mig_partitioned_gpus_are_not_the_product():
    listing = _real("nvidia-smi-L-4x-a100-mig.txt")
    e = expectation_for("n1", {"node.kubernetes.io/instance-type": "dgx-a100"}, AcceptanceConfig())
    got = judge_gpu("n1", listing, Thresholds(), 4, e)
    assert not got.go and got.failure == "product_mismatch" and "4 MIG devices" in got.reason


def test_a_gpu_with_less_memory_than_its_datasheet_is_not_the_product():
    text = _smi("n1", 8).replace("81559MiB", "40960MiB")
    got = judge_gpu("n1", text, Thresholds(), 8, expectation_for("n1", DGX, AcceptanceConfig()))
    assert not got.go and got.failure == "product_mismatch" and "has 40960 MiB; a H100-SXM has 80 GB" in got.reason
    assert judge_gpu("n1", _smi("n1", 8), Thresholds(), 8, expectation_for("n1", DGX, AcceptanceConfig())).go


def test_a_burn_shorter_than_the_policy_is_not_run_whatever_its_figures():
    from drills.acceptance.judge import judge_burn

    text = _real("gpu-burn-1gpu-ok.txt")  # `Burning for 10 seconds.`
    assert judge_burn("n1", text, Thresholds(gemm_gflops_min=1000)).go
    got = judge_burn("n1", text, Thresholds(gemm_gflops_min=1000), min_seconds=180)
    assert not got.go and got.failure == "not_run" and "burned 10 s" in got.reason and got.measured["burn_s"] == 10


def test_fio_on_the_nodes_own_disk_is_not_the_store():
    from drills.acceptance.identity import store_mount

    ok = CheckResult("n1", "storage", True, "fio ok")
    df = "Filesystem     Type 1024-blocks    Used Available Capacity Mounted on\n{} /store\n"
    local = "=== df\n" + df.format("/dev/md0       ext4   2031616 2030624       992     100%") + "=== fio\n{}"
    shared = "=== df\n" + df.format("10.0.0.5:/ckpt nfs4   2031616 2030624       992     100%") + "=== fio\n{}"
    got = store_mount(ok, local, Thresholds())
    assert not got.go and got.failure == "wrong_target" and "/dev/md0, a ext4 filesystem at /store" in got.reason
    assert store_mount(ok, shared, Thresholds()).go
    assert store_mount(ok, shared, Thresholds(store_fs_types=["lustre"])).failure == "wrong_target"
    assert store_mount(ok, "{}", Thresholds()).failure == "not_run"
