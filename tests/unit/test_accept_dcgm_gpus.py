"""DCGM's evidence bound to the node's GPUs (issue 31 (a) × DCGM): `dcgmi diag` names no host and no GPU, so the
dcgm Job also prints `dcgmi discovery -l`, and the host engine's UUIDs must be the ones nvidia-smi -L listed on
the node. The reader on a verbatim discovery output; the binding on the twin's printers (the same shapes)."""

from __future__ import annotations

from pathlib import Path

from drills.acceptance import dcgm_gpus, identity
from drills.acceptance.judge import judge, judge_gpu
from drills.profile.acceptance import Thresholds
from drills.twin.workloads import accept_tools as T

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "accept"
H100 = "NVIDIA H100 80GB HBM3"


def test_discovery_reads_each_gpus_bus_id_and_uuid_from_a_real_output():
    # expectations written from the text before running the reader: GPU 0 at 4C, GPU 1 at 5D
    got = dcgm_gpus.parse_discovery((REAL / "dcgmi-discovery-l-h100-sxm-null-names-excerpt.txt").read_text())
    assert [(g.gpu_id, g.name, g.pci_bus_id, g.uuid) for g in got] == [
        (0, "<<<NULL>>>", "00000000:4C:00.0", "GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de"),
        (1, "<<<NULL>>>", "00000000:5D:00.0", "GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8")]


def test_the_twins_discovery_has_the_real_shape():
    lines = T.dcgmi_discovery("n1", H100, 2)
    real = (REAL / "dcgmi-discovery-l-h100-sxm-null-names-excerpt.txt").read_text().splitlines()
    assert {len(x) for x in lines[1:]} == {len(real[3].rstrip())}  # the boxes are as wide as DCGM's
    assert [g.uuid for g in dcgm_gpus.parse_discovery("\n".join(lines))] == [T.gpu_uuid("n1", 0), T.gpu_uuid("n1", 1)]


def _dcgm(node: str, machine: str, gpus: int = 8) -> str:
    return "\n".join(["=== dcgmi discovery -l", *T.dcgmi_discovery(machine, H100, gpus), "=== dcgmi diag -r 3",
                      *T.dcgmi_diag(3, "3.3.8", "550.90.07", gpus)])


def _run(node: str, machine: str, gpus: int = 8, dcgm_text: str | None = None) -> list:
    t = Thresholds()
    gpu = judge_gpu(node, "\n".join(T.nvidia_smi(node, H100, 8, "550.90.07", "12.4", [34] * 8)), t, 8)
    text = dcgm_text if dcgm_text is not None else _dcgm(node, machine, gpus)
    dcgm = dcgm_gpus.record(judge("dcgm", node, text, t, capacity=8), text)
    return [gpu, dcgm]


def test_a_diagnostic_of_the_nodes_own_gpus_stays_go():
    gpu, dcgm = identity.cross_check(_run("gpu-new-02", "gpu-new-02"))
    assert dcgm.go, dcgm.reason
    assert dcgm.measured["dcgm_gpu_uuids"] == gpu.measured["gpu_uuids"]
    assert dcgm.evidence["dcgm_gpus"] == "the 8 GPUs nvidia-smi -L listed on gpu-new-02"


def test_a_diagnostic_of_another_nodes_gpus_is_wrong_node_naming_that_node():
    other = judge_gpu("gpu-new-01", "\n".join(T.nvidia_smi("gpu-new-01", H100, 8, "550.90.07", "12.4", [34] * 8)),
                      Thresholds(), 8)
    got = identity.cross_check([*_run("gpu-new-02", "gpu-new-01"), other])
    dcgm = next(r for r in got if r.check == "dcgm")
    assert not dcgm.go and dcgm.failure == "wrong_node"
    assert "ran on other GPUs than the node's (`dcgmi discovery -l`): its host engine lists GPU GPU-" in dcgm.reason
    assert "(gpu-new-01's, by nvidia-smi -L on gpu-new-01), which nvidia-smi -L on gpu-new-02 did not list" in dcgm.reason
    assert dcgm.evidence["other_node"] == "gpu-new-01"
    assert {r.failure for r in got if r.check == "gpu"} == {"no_expectation"}  # not wrong_node: their own GPUs
    alone = identity.cross_check(_run("gpu-new-02", "gpu-new-01"))[1]  # the owner not in this run: still wrong_node
    assert alone.failure == "wrong_node" and "which nvidia-smi -L on gpu-new-02 did not list" in alone.reason


def test_a_diagnostic_that_lists_fewer_of_the_nodes_gpus_is_partial():
    dcgm = identity.cross_check(_run("gpu-new-02", "gpu-new-02", gpus=6))[1]
    assert not dcgm.go and dcgm.failure == "partial" and "lists 6 of the 8 GPUs" in dcgm.reason


def test_a_diagnostic_whose_job_named_no_gpu_is_not_run():
    bare = "\n".join(T.dcgmi_diag(3, "3.3.8", "550.90.07", 8))  # a profile whose command runs `dcgmi diag` alone
    dcgm = _run("gpu-new-02", "gpu-new-02", dcgm_text=bare)[1]
    assert not dcgm.go and dcgm.failure == "not_run" and "no `=== dcgmi discovery -l` section" in dcgm.reason
    empty = "=== dcgmi discovery -l\n0 GPUs found.\n=== dcgmi diag -r 3\n" + bare
    assert _run("gpu-new-02", "gpu-new-02", dcgm_text=empty)[1].failure == "not_run"
