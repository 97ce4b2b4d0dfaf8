"""Issue 31's red-team round, the pure rules: a GO never rests on a tool that failed (its exit code), on a
warning the tool printed (nvidia-smi's `WARNING:`, DCGM's `Warn`, `NCCL WARN` in a run that finished), nor
on a node that changed after its checks (the gate's re-read). Inputs are the tools' shapes as the twin
prints them (drills/twin/workloads/accept_tools.py), with one line changed each; every test shows the same
input without that line is a GO, so each rule is what turns it."""

from __future__ import annotations

from drills.acceptance import exits, freshness
from drills.acceptance.catalogue import expectation_for
from drills.acceptance.judge import judge_dcgm, judge_gpu, judge_nccl_node, judge_nccl_pair
from drills.measure.accept import nccl_tests, nvidia_smi
from drills.profile.acceptance import AcceptanceConfig, Thresholds
from drills.profile.model import load_target
from drills.twin.workloads import accept_tools as T

H100 = "NVIDIA H100 80GB HBM3"
DGX = expectation_for("gpu-new-01", {"node.kubernetes.io/instance-type": "dgx-h100"}, AcceptanceConfig())
T_ = Thresholds(driver_version=None, cuda_version=None)
INFOROM = "WARNING: infoROM is corrupted at gpu 0000:18:00.0"  # nvidia-smi(1) RETURN VALUE 14: infoROM corrupted
ASYNC = "gpu-new-01:4100:4157 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : mlx5_3:1 Got async event : port error"


def _smi() -> list[str]:
    return T.nvidia_smi("gpu-new-01", H100, 8, "550.90.07", "12.4", [34] * 8)


def test_nvidia_smis_own_warning_makes_a_whole_table_a_warned_no_go():
    assert judge_gpu("gpu-new-01", "\n".join(_smi()), T_, 8, DGX).go
    text = "\n".join([*_smi(), INFOROM])  # where nvidia-smi prints it: after its table
    assert nvidia_smi.parse_warnings(text) == (INFOROM,)
    got = judge_gpu("gpu-new-01", text, T_, 8, DGX)
    assert not got.go and got.failure == "warned" and INFOROM in got.reason
    assert got.measured["warnings"] == [INFOROM] and got.measured["visible_gpus"] == 8


def test_an_nccl_warn_in_a_run_that_finished_is_a_warned_no_go():
    node = T.all_reduce_perf([("gpu-new-01", "10.0.0.1")], 8, H100, 480.0, "IB", [], "RoCE")
    assert judge_nccl_node("gpu-new-01", "\n".join(node), T_).go
    cut = node.index("# Out of bounds values : 0 OK")
    warned = [*node[:cut], ASYNC, *node[cut:]]
    assert nccl_tests.parse_perf("\n".join(warned)).warnings == (ASYNC,)
    got = judge_nccl_node("gpu-new-01", "\n".join(warned), T_)
    assert not got.go and got.failure == "warned" and "Got async event : port error" in got.reason
    pair = T.all_reduce_perf([("gpu-new-01", "10.0.0.1"), ("gpu-train-01", "10.0.0.9")], 8, H100, 372.0, "IB",
                             ["mlx5_0"], "RoCE")
    assert judge_nccl_pair("gpu-new-01", "gpu-train-01", "\n".join(pair), T_).go
    got = judge_nccl_pair("gpu-new-01", "gpu-train-01", "\n".join([ASYNC, *pair]), T_)
    assert not got.go and got.failure == "warned" and got.peer == "gpu-train-01"


def test_a_dcgm_test_that_ends_warn_is_not_a_pass():
    ok = T.dcgmi_diag(3, "3.3.8", "550.90.07", 8)
    assert judge_dcgm("gpu-new-01", "\n".join(ok), T_, 2).go
    warn = T.dcgmi_diag(3, "3.3.8", "550.90.07", 8, "GPU Memory", 0, verdict="Warn")
    got = judge_dcgm("gpu-new-01", "\n".join(warn), T_, 2)
    assert not got.go and got.failure == "warned" and "GPU Memory ended Warn" in got.reason
    assert got.measured["failed"] == []  # DCGM failed nothing: the Warn alone decides


def _pod(phase: str, code: int | None) -> dict:
    state = {"terminated": {"exitCode": code, "reason": "Error"}} if code is not None else {"running": {}}
    return {"metadata": {"name": "acc-gpu"}, "status": {"phase": phase, "containerStatuses": [{"name": "gpu", "state": state}]}}


def test_a_go_whose_tool_exited_non_zero_is_a_tool_error_and_a_no_go_keeps_its_reason():
    go = judge_gpu("gpu-new-01", "\n".join(_smi()), T_, 8, DGX)
    assert exits.check(go, _pod("Succeeded", 0)).go
    got = exits.check(go, _pod("Failed", 14))
    assert not got.go and got.failure == "tool_error" and "exited with code 14" in got.reason
    assert got.evidence["exit_code"] == 14 and exits.check(go, _pod("Failed", None)).failure == "tool_error"
    warned = judge_gpu("gpu-new-01", "\n".join([*_smi(), INFOROM]), T_, 8, DGX)
    assert exits.check(warned, _pod("Failed", 14)).failure == "warned"  # the more specific reason stands


def _node(boot: str = "b-1", gpus: str = "8", itype: str = "dgx-h100", ready: str = "True") -> dict:
    return {"metadata": {"name": "gpu-new-01", "labels": {"node.kubernetes.io/instance-type": itype},
                         "annotations": {}},
            "status": {"nodeInfo": {"bootID": boot, "systemUUID": "s-1"}, "capacity": {"nvidia.com/gpu": gpus},
                       "allocatable": {"nvidia.com/gpu": gpus}, "conditions": [{"type": "Ready", "status": ready}]}}


def test_the_gates_re_read_names_every_change_since_the_plan():
    profile = load_target(None)
    planned = freshness.state(_node(), profile)
    assert freshness.changes(planned, freshness.state(_node(), profile)) == []
    moved = freshness.changes(planned, freshness.state(_node(boot="b-2", gpus="7"), profile))
    assert moved == ["allocatable nvidia.com/gpu '8' → '7'", "bootID 'b-1' → 'b-2'", "capacity nvidia.com/gpu '8' → '7'"]
    relabelled = freshness.changes(planned, freshness.state(_node(itype="p5.48xlarge"), profile))
    assert relabelled == ["label node.kubernetes.io/instance-type 'dgx-h100' → 'p5.48xlarge'"]
    assert freshness.changes(planned, freshness.state(_node(ready="Unknown"), profile)) == ["Ready 'True' → 'Unknown'"]


def test_a_lossless_word_the_reader_does_not_know_is_unknown_not_on():
    """(f) × switch-port: Onyx's real `show roce` with its congestion mode changed to a word no list holds
    (and NVUE's pfc-priority likewise): before, anything not known as "off" read as on — a GO."""
    from pathlib import Path

    from drills.acceptance.port_facts import read_facts
    from drills.acceptance.switch import judge_port
    from drills.faults.switch.dialect import load_switch_dialect

    real = Path(__file__).resolve().parents[1] / "data" / "real" / "switch_port"
    onyx = (real / "onyx-show_roce-1.txt").read_text().split("\n", 1)[1]
    view = [load_switch_dialect("onyx").port[1]]
    assert read_facts(view, [onyx], "Eth1/1").ecn is True
    odd = read_facts(view, [onyx.replace("Mode: ecn, absolute", "Mode: tail-drop")], "Eth1/1")
    assert odd.pfc is True and odd.ecn is None
    t = Thresholds(port_speed=None, port_mtu=None)
    from dataclasses import replace

    got = judge_port("gpu-new-01", "leaf Eth1/1", "up", "up", replace(odd, errors={"packets": 0}), t, "onyx")
    assert not got.go and got.failure == "not_run" and "ECN not shown" in got.reason
    nvue = (real / "cumulus-nv_show_interface_qos_roce_status-1.txt").read_text().split("\n", 1)[1]
    cview = [load_switch_dialect("cumulus").port[1]]
    assert read_facts(cview, [nvue], "swp16").pfc is True
    assert read_facts(cview, [nvue.replace("pfc-priority      3 ", "pfc-priority      auto ")], "swp16").pfc is None


def test_an_all_reduce_that_validated_nothing_is_no_pass():
    """(f) `all_reduce_perf -c 0` prints `N/A` in its #wrong columns and still `Out of bounds values : 0 OK`
    (the shape of nccl-tests#82's run): zero checks found zero errors. Before: a GO on its bandwidth."""
    node = T.all_reduce_perf([("gpu-new-01", "10.0.0.1")], 8, H100, 480.0, "IB", [], "RoCE")

    def no_check(line: str) -> str:  # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        cells = line.split()
        if len(cells) != 13 or not cells[0].isdigit():
            return line
        return "  ".join([*cells[:8], "N/A", *cells[9:12], "N/A"])

    unchecked = [no_check(line) for line in node]
    assert sum("N/A" in line for line in unchecked) == 11 and "# Out of bounds values : 0 OK" in unchecked
    assert nccl_tests.parse_perf("\n".join(unchecked)).unchecked and not nccl_tests.parse_perf("\n".join(node)).unchecked
    got = judge_nccl_node("gpu-new-01", "\n".join(unchecked), T_)
    assert not got.go and got.failure == "not_run" and "-c 0" in got.reason


def test_a_burn_in_cut_before_its_end_is_not_run():
    """(c) gpu-burn announced 180 s and stopped after its first snapshot (20 %): before, a GO on 36 s of load."""
    from drills.acceptance.judge import judge_burn

    burn = T.gpu_burn("gpu-new-01", H100, 180, [52000.0] * 8, [67] * 8)
    assert judge_burn("gpu-new-01", "\n".join(burn), T_, 180).go
    cut = burn[:burn.index("") + 1]
    got = judge_burn("gpu-new-01", "\n".join(cut), T_, 180)
    assert not got.go and got.failure == "not_run" and "stopped at 20 %" in got.reason


def test_an_nvidia_smi_table_that_shows_fewer_gpus_than_it_lists_is_unread():
    """(f) -L lists 8 GPUs, the table's last block is missing (a cut log): before, a GO on 7 readings."""
    smi = _smi()
    got = judge_gpu("gpu-new-01", "\n".join(smi[:-4]), T_, 8, DGX)
    assert not got.go and got.failure == "tool_error" and "table shows 7" in got.reason


def test_a_port_whose_error_counters_were_not_shown_is_not_a_clean_port():
    """(f) × switch-port: no error counter read (a view that matched nothing) summed to "0 errors" — a GO."""
    from drills.acceptance.port_facts import PortFacts
    from drills.acceptance.switch import judge_port

    t = Thresholds(port_speed="400G", port_mtu=9100)
    seen = PortFacts(400.0, 9216, {"input": 0, "output": 0}, True, (3,), True)
    assert judge_port("gpu-new-01", "leaf Ethernet1/1", "up", "up", seen, t, "nxos").go
    unseen = PortFacts(400.0, 9216, {}, True, (3,), True)
    got = judge_port("gpu-new-01", "leaf Ethernet1/1", "up", "up", unseen, t, "nxos")
    assert not got.go and got.failure == "not_run" and "error counters not shown" in got.reason


def _conditioned(ready_since: str = "t0", taints: list | None = None, **conds: str) -> dict:
    node = _node()
    node["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_since},
                                    *({"type": k, "status": v.split("@")[0], "lastTransitionTime": v.split("@")[1]}
                                      for k, v in conds.items())]
    node["spec"] = {"taints": taints or []}
    return node


def test_the_gates_re_read_names_a_taint_a_flap_and_a_pressure_that_came_and_went():
    """(g) the second round: what the gate compared before was Ready's status only — a health checker's taint,
    a NotReady that flapped back, a pressure that came and went all read as the node the checks judged."""
    profile = load_target(None)
    planned = freshness.state(_conditioned(DiskPressure="False@t0"), profile)
    assert freshness.changes(planned, freshness.state(_conditioned(DiskPressure="False@t0"), profile)) == []
    gate = {"key": "gpu-drills.io/unaccepted", "value": "pending", "effect": "NoSchedule"}  # the run's own
    assert freshness.changes(planned, freshness.state(_conditioned(DiskPressure="False@t0", taints=[gate]), profile)) == []
    health = {"key": "nvidia.com/gpu.unhealthy", "value": "xid", "effect": "NoSchedule"}
    assert freshness.changes(planned, freshness.state(_conditioned(DiskPressure="False@t0", taints=[gate, health]),
                                                      profile)) == ["taints None → 'nvidia.com/gpu.unhealthy=xid:NoSchedule'"]
    assert freshness.changes(planned, freshness.state(_conditioned("t9", DiskPressure="False@t0"), profile)) == [
        "Ready since 't0' → 't9'"]
    assert freshness.changes(planned, freshness.state(_conditioned(DiskPressure="False@t5"), profile)) == [
        "condition DiskPressure 'False since t0' → 'False since t5'"]


def test_a_condition_away_from_its_healthy_status_is_unhealthy_and_unfits_a_reference():
    """(i) under pressure since before the run: nothing changed, yet the node is not healthy; a condition that is
    healthy when True (the profile's acceptance.healthy_conditions) is judged the other way round."""
    from drills.acceptance.plan import unfit_reference

    healthy = AcceptanceConfig().healthy_conditions
    ok = freshness.conditions(_conditioned(DiskPressure="False@t0", GPUHealthy="True@t0"))
    assert freshness.unhealthy(ok, healthy) == []
    sick = freshness.conditions(_conditioned(DiskPressure="True@t3", GPUHealthy="False@t4", KernelDeadlock="Unknown@t1"))
    assert freshness.unhealthy(sick, healthy) == ["DiskPressure True since t3", "GPUHealthy False since t4",
                                                  "KernelDeadlock Unknown since t1"]
    assert freshness.unhealthy(freshness.conditions(_node(ready="False")), healthy) == ["Ready False since None"]
    assert unfit_reference(_conditioned(MemoryPressure="False@t0"), healthy) is None
    assert unfit_reference(_conditioned(MemoryPressure="True@t2"), healthy) == (
        "gpu-new-01 is not healthy (MemoryPressure True since t2)")


def test_an_error_line_beside_a_healthy_output_is_an_unread_error_no_go():
    """(f) a zero-exit tool with an error line: the judges read their tools' shapes and skip the rest, so a
    libmlx5 completion-error dump before the rdma Job's sections (or an `ERROR`, an `Xid`, a crash anywhere in
    any tool's output) left a GO; the second look (drills/acceptance/unread.py) turns it, and keeps a no-go's own
    reason."""
    from drills.acceptance import unread
    from drills.acceptance.judge import judge_rdma

    hcas = [(f"mlx5_{i}", True, 400, "Ethernet") for i in range(8)]
    lines = ["=== ibstat", *T.ibstat(hcas, "gpu-new-01")]
    for h, *_ in hcas:
        lines += [f"=== ib_write_bw -d {h}", *T.ib_write_bw(h, True, "Ethernet", 388.0, "10.0.0.9")]
    dump = ["mlx5: gpu-new-01: got completion with error:", "00000000 00000000 00000000 00000000",
            "00000000 00008716 0a001f8e 000027d2"]  # rdma-core providers/mlx5/cq.c: its header, then dump_cqe
    text = "\n".join([*dump, *lines])
    go = judge_rdma("gpu-new-01", text, T_, DGX)
    assert go.go  # the reader alone: a GO
    got = unread.check(go, text)
    assert not got.go and got.failure == "unread_error" and got.measured["unread_errors"] == [dump[0]]
    assert unread.check(judge_rdma("gpu-new-01", "\n".join(lines), T_, DGX), "\n".join(lines)).go
    smi = "\n".join([*_smi(), "terminate called after throwing an instance of 'std::runtime_error'"])
    assert unread.check(judge_gpu("gpu-new-01", smi, T_, 8, DGX), smi).failure == "unread_error"
    warned = judge_gpu("gpu-new-01", "\n".join([*_smi(), INFOROM, "ERROR: x"]), T_, 8, DGX)
    assert unread.check(warned, "ERROR: x").failure == "warned"  # the judge's own, more specific reason stands
    node = "\n".join(T.all_reduce_perf([("gpu-new-01", "10.0.0.1")], 8, H100, 480.0, "IB", [], "RoCE"))
    assert unread.error_lines("nccl-node", node) == []  # NCCL's INFO/WARN lines are its reader's


def test_the_real_healthy_outputs_carry_no_error_line_and_the_real_failures_do():
    """The second look against the verbatim corpus (tests/data/real/accept): no healthy output trips it; the
    failing ones show the line a reader would quote (their first line, `# source:`, is no tool output)."""
    from pathlib import Path

    from drills.acceptance.unread import error_lines

    real = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"

    def body(name: str) -> str:
        return (real / name).read_text().split("\n", 1)[1]

    for name in ("nvidia-smi-8x-h100-550.txt", "dcgmi-diag-r3-dcgm4-pass.txt", "gpu-burn-1gpu-ok.txt",
                 "ib-write-bw-roce-gbits.txt", "ibstat-9ca-mixed-eth-ib-56-100.txt",
                 "nccl-tests-allreduce-2node-16rank-h100.txt"):
        assert error_lines("nccl-pair" if name.startswith("nccl") else "x", body(name)) == [], name
    assert error_lines("rdma", body("ib-write-bw-socket-connect-failure.txt"))[0] == (
        "Couldn't connect to 192.168.125.211:18515")
    assert error_lines("gpu", body("nvidia-smi-gpu-is-lost-reboot.txt")) == [
        "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU"]


def test_a_node_not_ready_or_under_pressure_when_planned_runs_no_check():
    """(i) the checks of a node that was NotReady (its Jobs would wait out every phase's timeout and end a vague
    not_run) or under pressure when planned are not run; the node is a node_unhealthy no-go naming why."""
    from types import SimpleNamespace

    profile = load_target(None)
    plan = SimpleNamespace(nodes=("gpu-new-01", "gpu-new-02", "gpu-new-03"), state={
        "gpu-new-01": freshness.state(_conditioned(DiskPressure="False@t0"), profile),
        "gpu-new-02": freshness.state(_node(ready="False"), profile),
        "gpu-new-03": freshness.state(_conditioned(PIDPressure="True@t1"), profile)})
    sick = freshness.ailing_when_planned(plan, profile)
    assert sick == {"gpu-new-02": ["Ready False since None"], "gpu-new-03": ["PIDPressure True since t1"]}
    r = freshness.planned_unhealthy("gpu-new-03", plan.state["gpu-new-03"], sick["gpu-new-03"])
    assert not r.go and r.failure == "node_unhealthy" and "its checks were not run" in r.reason
    from drills.acceptance.plan import AcceptPlan

    dry = AcceptPlan(plan.nodes, None, ("gpu",), {}, {}, {}, {}, state=plan.state).describe(
        "ai-platform", True, AcceptanceConfig().healthy_conditions)  # what `drills accept --dry-run` prints
    assert [line for line in dry if "NOT HEALTHY" in line] == [
        "gpu-new-02 NOT HEALTHY (Ready False since None): its checks will not run; it will be a no-go",
        "gpu-new-03 NOT HEALTHY (PIDPressure True since t1): its checks will not run; it will be a no-go"]


def test_a_reference_or_a_new_node_with_no_leaf_is_not_across_the_spine():
    """Red team, wave 8: the reference's leaf label removed, the pair check took "no leaf" for "another leaf" and a
    node under a leaf cut off from the spines got GO over its own leaf. Unknown is not another leaf."""
    from drills.acceptance.plan import _across

    label = "network.gpu-drills.io/leaf"
    assert "gpu-new-01 has no network.gpu-drills.io/leaf label" in _across("gpu-new-01", None, {"leaf-3"}, label)
    assert "a node under test has no" in _across("gpu-train-01", "leaf-1", {"leaf-3", None}, label)
    assert "the pair would never cross the spine" in _across("gpu-new-01", "leaf-3", {"leaf-3"}, label)
    assert _across("gpu-train-01", "leaf-1", {"leaf-3"}, label) is None
