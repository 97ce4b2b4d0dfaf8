"""The twin profile's `new_nodes` section: GPU nodes that arrived for an expansion and wait for
acceptance, what their tools report when they are sound, and the per-node faults real expansions hit.

A pool of `node_pools` is named the new one; its nodes run the acceptance Jobs (`drills accept`) and
the twin's acceptance workload (drills/twin/workloads/acceptance.py) prints the tools' output from
these figures. `faults` maps a node name to what is wrong with it (the defects `missing-gpu`,
`dcgm-fail`, `hot-gpu`, `slow-rail`, `nic-down`, `slow-store-client` set one entry each;
`pfc-off-on-new-port` is a fabric fault: `fabric.port_faults.lossy_nodes`; `gpu-lost-everywhere`,
`cloned-node-identity`, `rdma-loopback` set the evidence faults below; the red-team round's (issue 31):
`changed-after-checks`, `relabelled-after-checks`, `workload-lands-mid-run` and `reference-cordoned-mid-run`
(`changes`: the node, or the reference, is no longer what the checks judged; the second round's
`tainted-mid-run`, `ready-flaps-mid-run`, `pressure-mid-run`, `reference-pressure-mid-run` likewise), `inforom-corrupted`,
`nccl-async-warn` and `dcgm-warn` (a tool that warns, or fails, while its output reads healthy)).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drills.twin.profile_types import Duration, Fraction, Strict

__all__ = ["NodeTaint", "NodeChange", "NodeFault", "ToolFigures", "CheckDurations", "NewNodes"]

AcceptCheck = Literal["gpu", "dcgm", "burn", "nccl-node", "nccl-pair", "rdma", "storage"]


class NodeTaint(Strict):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodeChange(Strict):
    """The node changes under the acceptance once its `after` check's tool has printed, before any gate is
    lifted: the machine reboots (a new `status.nodeInfo.bootID`), a GPU falls off the bus and the device plugin
    re-registers fewer (`nvidia.com/gpu` capacity and allocatable), or someone relabels it — or, with `node`,
    another node does at that moment (the reference, cordoned for maintenance while the batch runs)."""

    after: AcceptCheck = "storage"
    node: str | None = None  # the node that changes (None: this one)
    cordon: bool = False  # spec.unschedulable
    # "namespace/name" of a pod someone starts on the node, tolerating every taint (a debug pod, a stray job):
    # the node is in use before it was accepted
    workload: str | None = Field(default=None, pattern=r"^[a-z0-9-]+/[a-z0-9-]+$")
    reboot: bool = False
    gpus: int | None = Field(default=None, ge=0)
    labels: dict[str, str | None] = {}  # label → its new value (None: removed)
    # condition type → the statuses it takes, one after the other, each a new lastTransitionTime (as the kubelet
    # or node-problem-detector writes them): {DiskPressure: ["True"]} a node filling up; {Ready: ["False", "True"]}
    # a NotReady flap that is over before anyone looks
    conditions: dict[str, list[Literal["True", "False", "Unknown"]]] = {}
    taints: list[NodeTaint] = []  # added to the node's taints (a GPU health checker's, an operator's)


class NodeFault(Strict):
    """What is wrong with one new node (healthy: every field at its default)."""

    visible_gpus: int | None = Field(default=None, ge=0)  # GPUs a pod sees (nvidia-smi -L); None: all
    dcgm_fail: str | None = None  # the DCGM test that fails (e.g. "GPU Memory"), on `dcgm_fail_gpu`
    dcgm_fail_gpu: int = Field(default=0, ge=0)
    dcgm_verdict: Literal["Fail", "Warn"] = "Fail"  # what DCGM prints for `dcgm_fail` (Warn: not a pass either)
    # the DCGM pod's host engine is this other node's (a `--host` pointing at a remote nv-hostengine, a stale
    # socket mount): its discovery and diagnostic are of that node's GPUs (defect dcgm-other-host)
    dcgm_host: str | None = None
    hot_gpu: int | None = Field(default=None, ge=0)  # this GPU runs hot under load and throttles
    hot_temp_c: int = Field(default=88, ge=0)
    throttle_factor: Fraction = 0.55  # its GEMM rate while throttled
    slow_rails: dict[str, Fraction] = {}  # HCA → fraction of line rate it reaches
    down_rails: list[str] = []  # HCAs whose port is down
    absent_rails: list[str] = []  # HCAs the machine does not show at all (a card not detected: ibstat omits it)
    store_factor: Fraction = 1.0  # share of the per-client store bandwidth this node gets
    # the device plugin saw the lost GPUs too: the node advertises only `visible_gpus` (nvidia.com/gpu)
    advertised_lost: bool = False
    # this Node object fronts another node's machine (a re-registered host whose old Node object lives on):
    # its tools print that machine's host name, GPU UUIDs and NIC GUIDs
    machine: str | None = None
    # the reference's address resolves to this node itself (a stale /etc/hosts in the image): ib_write_bw
    # loops through its own HCA and reports more than the wire carries
    rdma_loopback: bool = False
    # the shared store is not mounted on this node: the hostPath lands on its local NVMe (ext4) and fio
    # measures that disk
    store_not_mounted: bool = False
    # after its checks ran, the node is no longer the one they judged
    changes: NodeChange | None = None
    # check → lines its tool prints before its own output (nvidia-smi: `WARNING: infoROM is corrupted at gpu …`)
    warnings: dict[AcceptCheck, list[str]] = {}
    # check → its tool's exit code whatever it printed (nvidia-smi exits 14 when an infoROM is corrupted)
    exit_codes: dict[AcceptCheck, int] = {}


class ToolFigures(Strict):
    """What a sound new node's tools report (per GPU, per rail, per client)."""

    driver_version: str = "550.90.07"
    cuda_version: str = "12.4"
    dcgm_version: str = "3.3.8"
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    gemm_gflops: float = Field(default=52000.0, gt=0)  # gpu-burn's per-GPU Gflop/s (TF32 tensor cores)
    idle_temp_c: int = 34
    load_temp_c: int = 67
    nvlink_busbw_gbs: float = Field(default=480.0, gt=0)  # all_reduce_perf inside one node (NVSwitch)
    link_layer: str = "Ethernet"  # RoCE; "InfiniBand" for an IB fabric
    rail_gbps: int = Field(default=400, gt=0)  # the port rate ibstat prints
    rail_efficiency: Fraction = 0.97  # ib_write_bw's share of the line rate
    net_efficiency: Fraction = 0.93  # a node pair's all_reduce bus bandwidth, share of its rails' sum
    store_read_mb_s: float = Field(default=12000.0, gt=0)  # fio from one node to the shared store
    store_write_mb_s: float = Field(default=8000.0, gt=0)


class CheckDurations(Strict):
    """How long each tool runs on the twin (twin seconds; a real DCGM level 3 takes longer)."""

    gpu: Duration = 5.0
    dcgm: Duration = 120.0
    burn: Duration = 180.0  # the seed's 3-minute matmul stress
    nccl: Duration = 40.0
    rdma: Duration = 30.0
    storage: Duration = 60.0


class NewNodes(Strict):
    pool: str  # the node pool whose nodes are new
    reference: str | None = None  # a known-good node to pair with (default: the first training node)
    figures: ToolFigures = ToolFigures()
    durations: CheckDurations = CheckDurations()
    faults: dict[str, NodeFault] = {}
