"""The target profile's `acceptance` section: how `drills accept` checks new GPU nodes before they join
the pool — which checks, the image and command of each check's Job, and the thresholds a node must meet.

Every check is a batch/v1 Job pinned to the node (`spec.nodeName`), tolerating the gate taint and the
GPU taint. A command is a fixed argv (the script below) whose inputs arrive as environment variables
(`ACCEPT_PEER`, `ACCEPT_LEVEL`, `ACCEPT_SECONDS`, `ACCEPT_RAILS`, `ACCEPT_DIR`): no node or profile value
is ever formatted into a command line. The defaults are public images; a site overrides `image` (and,
if its image differs, `command`) per check.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drills.core.grammar import CONTROL, DnsLabel, DnsSubdomain, LabelKey, RemotePath, Text
from drills.profile.base import MAX_SECONDS
from drills.profile.images import FIO_IMAGE, check_reference

__all__ = ["CHECKS", "CheckName", "JobSpec", "Thresholds", "Requirement", "Waiver", "AcceptanceConfig",
           "GATE_TAINT_KEY", "DEFAULT_REQUIRED"]

CheckName = Literal["gpu", "dcgm", "burn", "nccl-node", "nccl-pair", "rdma", "switch-port", "storage"]
CHECKS: tuple[str, ...] = ("gpu", "dcgm", "burn", "nccl-node", "rdma", "nccl-pair", "switch-port", "storage")
GATE_TAINT_KEY = "gpu-drills.io/unaccepted"



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class JobSpec(_Strict):
    image: str
    command: list[str] = Field(min_length=1, max_length=64)
    gpus: bool = True  # request every GPU of the node (the check needs them all to itself)
    timeout_s: float = Field(1800.0, gt=0, le=MAX_SECONDS)  # cluster seconds for the Job to finish

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_reference(value)

    @field_validator("command")
    @classmethod
    def _argv(cls, argv: list[str]) -> list[str]:
        """An argv, never formatted: a script may span lines, but a NUL or escape sequence is no command."""
        for arg in argv:
            if not arg or len(arg) > 16_384 or CONTROL.search(arg.replace("\n", "").replace("\t", "")):
                raise ValueError(f"each argument must be 1 to 16384 printable characters (got {arg[:40]!r})")
        return argv


def _sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


DEFAULT_JOBS: dict[str, JobSpec] = {
    "gpu": JobSpec(image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", command=_sh("nvidia-smi -L; nvidia-smi")),
    "dcgm": JobSpec(image="nvcr.io/nvidia/cloud-native/dcgm:3.3.8-1-ubuntu22.04",
                    # the host engine's GPU list first: `dcgmi diag` names no host and no GPU (drills/acceptance/dcgm_gpus.py)
                    command=_sh('echo "=== dcgmi discovery -l"; dcgmi discovery -l; '
                                'echo "=== dcgmi diag -r $ACCEPT_LEVEL"; dcgmi diag -r "$ACCEPT_LEVEL"')),
    "burn": JobSpec(image="docker.io/chrstnhntschl/gpu_burn:latest", command=_sh('/app/gpu_burn -tc "$ACCEPT_SECONDS"')),
    "nccl-node": JobSpec(image="ghcr.io/coreweave/nccl-tests:12.4.1-devel-ubuntu22.04-nccl2.21.5-1",
                         command=_sh("NCCL_DEBUG=INFO all_reduce_perf -b 8M -e 8G -f 2 -g \"$ACCEPT_GPUS\"")),
    "nccl-pair": JobSpec(image="ghcr.io/coreweave/nccl-tests:12.4.1-devel-ubuntu22.04-nccl2.21.5-1",
                         command=_sh('mpirun -np "$ACCEPT_RANKS" -H "$ACCEPT_HOSTS" -x NCCL_DEBUG=INFO '
                                     "all_reduce_perf -b 8M -e 8G -f 2 -g 1")),
    "rdma": JobSpec(image="docker.io/mellanox/tcpdump-rdma:latest", gpus=False,
                    command=_sh('echo "=== ibstat"; ibstat; for d in ${ACCEPT_RAILS:-$(ibstat -l)}; do echo "=== ib_write_bw -d $d"; '
                                'ib_write_bw -d "$d" -s 65536 -D 10 --report_gbits "$ACCEPT_PEER"; done')),
    "storage": JobSpec(image=FIO_IMAGE, gpus=False,  # the storage drill's fio image, by digest
                       command=_sh('echo "=== df"; df -PT "$ACCEPT_DIR"; echo "=== fio"; '
                                   'fio --output-format=json --directory="$ACCEPT_DIR" --size=4G --bs=1M --direct=1 '
                                   "--ioengine=libaio --iodepth=32 --runtime=60 --time_based --group_reporting "
                                   "--name=seqread --rw=read --name=seqwrite --rw=write --stonewall")),
}


class Thresholds(_Strict):
    """What a new node must show. None: not checked (e.g. no expected driver pinned)."""

    gpus: int | None = Field(None, ge=1, le=64)  # GPUs a pod must see; None: the node's nvidia.com/gpu capacity
    driver_version: Text | None = None
    cuda_version: Text | None = None
    dcgm_level: int = Field(3, ge=1, le=4)
    burn_seconds: int = Field(180, gt=0, le=86_400)  # the seed's 3-minute matmul stress
    gemm_gflops_min: float = Field(45000.0, gt=0, le=10_000_000)  # per GPU, gpu-burn's Gflop/s
    max_temp_c: int = Field(80, gt=0, le=150)  # the seed: GPUs throttle at ≥ 80 °C; a GPU must stay below
    nvlink_busbw_min_gbs: float = Field(400.0, gt=0, le=100_000)  # all_reduce_perf inside the node
    pair_busbw_min_gbs: float = Field(160.0, gt=0, le=100_000)  # all_reduce_perf with a known-good node
    link_layer: Text | None = "Ethernet"  # ibstat's; "InfiniBand" on an IB fabric
    rail_rate_gbps: int | None = Field(400, gt=0, le=3200)  # ibstat's port rate
    rail_bw_min_gbps: float = Field(350.0, gt=0, le=3200)  # ib_write_bw per rail
    port_speed: Text | None = "400G"  # the switch port facing the node
    port_mtu: int | None = Field(9100, ge=576, le=9216)  # the least MTU the switch port must carry
    port_errors_max: int = Field(0, ge=0, le=1_000_000_000)  # input/output/CRC errors on the new node's port
    roce: bool = True  # RoCE: the node's switch port must have PFC (lossless priorities) and ECN on
    store_read_mb_s_min: float = Field(10000.0, gt=0, le=10_000_000)  # fio from one node to the shared store
    store_write_mb_s_min: float = Field(6000.0, gt=0, le=10_000_000)
    store_fs_types: list[DnsLabel] | None = None  # the shared store's filesystem types (df -PT), e.g. [nfs4, lustre]
    store_aggregate_read_mb_s_min: float | None = Field(None, gt=0, le=1_000_000_000)  # all new nodes together (the seed: ≥ 50 GB/s class)


class Requirement(_Strict):
    """A check a node must pass to be accepted; `min_level` for DCGM (the level that really ran), `min_seconds`
    for the burn-in (the run length gpu-burn itself announced)."""

    min_level: int | None = Field(None, ge=1, le=4)
    min_seconds: int | None = Field(None, gt=0, le=86_400)


class Waiver(_Strict):
    """An explicit exception, printed in the report's sign-off: this check need not pass on this node."""

    check: CheckName
    node: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    by: str = Field(min_length=1)  # who signed it off


# Every check is required by default, DCGM at level ≥ 2 (level 1 runs no GPU test); a site that cannot run
# one says so in `required` (or waives it per node) — it is never silently left out.
# The burn-in at least the seed's 3 minutes: a shorter one never reaches the temperatures that throttle.
DEFAULT_REQUIRED: dict[str, Requirement] = {c: Requirement(min_level=2 if c == "dcgm" else None,
                                                           min_seconds=180 if c == "burn" else None) for c in CHECKS}


class AcceptanceConfig(_Strict):
    namespace: DnsLabel = "ai-platform"  # where the Jobs run (must be in safety.allow.namespaces)
    checks: list[CheckName] = list(CHECKS)
    jobs: dict[CheckName, JobSpec] = {}  # per-check overrides of DEFAULT_JOBS
    thresholds: Thresholds = Thresholds()
    reference_node: DnsSubdomain | None = None  # a known-good node each new node is paired with (NCCL)
    store_dir: RemotePath = "/mnt/store/gpu-drills-accept"  # where fio writes on the shared store (hostPath)
    leaf_port_annotation: LabelKey = "network.gpu-drills.io/leaf-port"  # node annotation: its leaf switch port
    max_nodes: int = Field(64, ge=1, le=4096)  # new nodes one run may take (its blast radius)
    twin_profile: DnsLabel = "expansion"  # the twin `drills accept` starts when the target is the twin
    # Expectations (drills/acceptance/catalogue.yaml): the server type and GPU model are read from the node's
    # labels unless named here; `expect` overrides a catalogue figure by name (`gpus`, `nics.rate_gbps`, …)
    # and the report shows it as the profile's, not the catalogue's.
    server: Text | None = None
    product: Text | None = None
    expect: dict[str, Any] = {}
    required: dict[CheckName, Requirement] = DEFAULT_REQUIRED
    waivers: list[Waiver] = []
    pair_across_leaves: bool = True  # the reference node sits under another leaf: the pair test crosses the spine
    # node condition → its healthy status, for the types that are healthy when True (Ready always is); every
    # other type — MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable, node-problem-detector's — is
    # healthy when False. A node (or the reference) at any other status is not accepted (drills/acceptance/freshness.py)
    healthy_conditions: dict[LabelKey, Literal["True", "False"]] = {"GPUHealthy": "True"}

    @model_validator(mode="after")
    def _waivers_name_required_checks(self) -> "AcceptanceConfig":
        for w in self.waivers:
            if w.check not in self.required:
                raise ValueError(f"waiver for {w.check} on {w.node}: {w.check} is not a required check")
        return self

    def job(self, check: str) -> JobSpec:
        return self.jobs.get(check) or DEFAULT_JOBS[check]
