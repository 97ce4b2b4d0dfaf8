"""The twin profile's schema: what a simulated GPU cluster is made of, as strict pydantic models.

Every model forbids unknown fields so a typo in a profile or a defect fails on load. Defaults honour
DESIGN §9 (node-monitor-grace-period 50 s, tolerationSeconds 300, maxRetry 3, checkpoints every
2000 steps, vLLM model load ≈ 52 s + 0.16 s per billion parameters). Durations are twin seconds
and may be written `50`, `50s`, `5m`, `1h30m` or `250ms`. Named collections (node pools, switches,
workloads) are mappings keyed by name, so defects can address one entry or every entry (`"*"`).
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field, model_validator

from drills.twin.profile_acceptance import NewNodes
from drills.twin.profile_fabric import Fabric
from drills.twin.profile_training import AfterResume, CheckpointSpec, FirstRun, NcclSpec, Policy, TrainingJob
from drills.twin.profile_types import Duration, Fraction, Named, Strict, Taint, Toleration
from drills.twin.stages import Stage

__all__ = [
    "NodeInfo", "NodePool", "NodeSpec", "Timings",
    "Policy", "NcclSpec", "CheckpointSpec", "AfterResume", "TrainingJob", "InferenceDeployment", "Queue",
    "PriorityClass", "Storage", "Workloads", "HealthAgent", "GpuRemediation", "TwinProfile",
]

log = logging.getLogger(__name__)

class NodeInfo(Strict):
    """status.nodeInfo of every node (kubelet version follows `kubernetes_version` when unset)."""

    architecture: str = "amd64"
    operating_system: str = "linux"
    os_image: str = "Ubuntu 22.04.4 LTS"
    kernel_version: str = "5.15.0-119-generic"
    container_runtime_version: str = "containerd://1.7.22"
    kubelet_version: str | None = None
    nvidia_driver_version: str = "550.90.07"
    cuda_driver_major: int = 550


class NodePool(Strict):
    """`count` identical nodes named `<prefix>-NN`, spread in blocks over `leaves` (in order)."""

    name: str
    prefix: str | None = None  # default: the pool's name
    count: int = Field(ge=0)
    role: Literal["training", "inference", "cpu"] = "training"
    gpus: int = Field(default=8, ge=0)
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    gpu_memory_mib: int = Field(default=81559, ge=0)
    gpu_family: str = "hopper"
    cpu: int = Field(default=192, ge=1)
    memory_gib: int = Field(default=2048, ge=1)
    max_pods: int = Field(default=110, ge=1)
    ephemeral_storage_gib: int = Field(default=3500, ge=1)
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    cached_images: list[str] = []
    keep_pulled_images: bool = True  # False: image GC drops a pulled image, so every new pod pulls again
    leaves: list[str] = []
    rdma_devices: list[str] = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]

    @property
    def name_prefix(self) -> str:
        return self.prefix or self.name


class NodeSpec(Strict):
    """One node expanded from a pool: what seeding and the controllers need to know about it."""

    name: str
    pool: str
    index: int
    role: str
    leaf: str | None = None
    leaf_port: str | None = None
    internal_ip: str


class Timings(Strict):
    """Control-plane and kubelet timings, in twin seconds; `jitter` is a ± fraction applied to delays."""

    node_monitor_grace_period: Duration = 50.0
    node_status_update_frequency: Duration = 10.0
    lease_duration: Duration = 40.0
    node_lease_renew_interval: Duration = 10.0
    default_toleration_seconds: int = Field(default=300, ge=0)
    node_monitor_period: Duration = 5.0
    scheduling_delay: Duration = 0.5
    image_pull_cached: Duration = 0.5
    image_pull_cold: Duration = 90.0
    container_start: Duration = 1.5
    pod_startup: Duration = 2.0
    readiness_period: Duration = 10.0
    container_stop: Duration = 2.0
    termination_grace_period: Duration = 30.0
    model_load_base: Duration = 52.0
    model_load_per_billion_params: Duration = 0.16
    volcano_restart_delay: Duration = 3.0
    watch_lag: Duration = 0.0  # how late the API server delivers watch events (an overloaded watch cache)
    jitter: Fraction = 0.1


class InferenceDeployment(Strict):
    """A model-serving Deployment (vLLM-like) with its Service, PDB and the twin's HTTP gateway."""

    name: str
    namespace: str = "ai-platform"
    replicas: int = Field(default=2, ge=0)
    gpus: int = Field(default=1, ge=0)
    cpu: int = Field(default=8, ge=0)
    memory_gib: int = Field(default=64, ge=0)
    image: str = "vllm/vllm-openai:v0.6.3"
    model: str = "meta-llama/Llama-2-7b-chat-hf"
    served_model_name: str | None = None
    model_params_b: float = Field(default=7.0, gt=0)
    model_load: Duration | None = None  # default: timings.model_load_base + per-billion × params
    # CUDA graph capture after the model load (a defect sets it: vLLM once took hours with LoRA, vllm#16961);
    # None: its share of the startup. When set, it adds to the startup delay.
    graph_capture: Duration | None = None
    queue: str | None = "inference"
    priority_class: str | None = "inference-high"
    scheduler_name: str = "volcano"
    service: str | None = None  # default: the deployment's name
    port: int = Field(default=8000, ge=1, le=65535)
    gateway_port: int = Field(default=0, ge=0, le=65535)  # 0: any free port on 127.0.0.1
    pdb_min_available: int | str | None = 1
    max_concurrency: int = Field(default=32, ge=1)  # vLLM --max-num-seqs: sequences a replica batches at once
    base_latency: Duration = 0.35
    endpoints_lag: Duration = 0  # the gateway still routes to a replica this long after it left the Endpoints
    # Defects (False on a healthy platform): the gateway answers its errors (502/503) with HTTP 200 and an
    # error body that still has a `choices` list; replicas that join the Endpoints once the Deployment was
    # whole accept requests but never answer (a wedged engine whose /health still says ok); the endpoints
    # controller stops adding addresses once the Service had all its replicas (replacements stay out).
    errors_as_200: bool = False
    wedged_replacements: bool = False
    endpoints_skip_replacements: bool = False
    # Defect fallback-model: the gateway (a LiteLLM-style router with a fallback) answers what its replicas cannot
    # with HTTP 200 and a completion from this other model, named in the answer's `model`: users get text, not the model
    fallback_model: str | None = None
    # Defects empty-replacements / time-sliced-serving (issue 30, class 5; drills/twin/workloads/serving_defects.py):
    # the replicas a rollout brings answer 200 with no text; a replica sharing its node with another workload's GPU
    # pod (time-sliced GPUs) answers 200 with no text while that pod runs
    empty_replacements: bool = False
    shares_gpus: bool = False
    tokens_per_second: float = Field(default=1800.0, gt=0)
    node_selector: dict[str, str] = {"gpu-drills.io/role": "inference"}
    tolerations: list[Toleration] = [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
    readiness_path: str = "/health"
    # How a rollout and a termination treat users (a rolling restart, drills/faults/rollout.py). Healthy: a
    # readiness probe on /health (vLLM answers it once the model is loaded), one surge pod and none unavailable,
    # and a preStop sleep (40 s) that outlasts the endpoint propagation and the requests in flight before SIGTERM (vLLM
    # 0.6 exits at once on SIGTERM, aborting what is in flight: vllm-project/vllm#36666), within the grace period.
    readiness_probe: bool = True
    max_surge: int | str = 1
    max_unavailable: int | str = 0
    pre_stop: Duration = 40.0  # a preStop `sleep` (0: no hook): longer than the endpoint propagation
    termination_grace: Duration = 60.0  # more than the preStop: SIGTERM still comes before SIGKILL

    @property
    def service_name(self) -> str:
        return self.service or self.name

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model


class Queue(Strict):
    name: str
    weight: int = Field(default=1, ge=1)
    reclaimable: bool = True
    capability: dict[str, str] = {}
    guarantee: dict[str, str] = {}


class PriorityClass(Strict):
    name: str
    value: int
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    global_default: bool = False
    description: str = ""


class Storage(Strict):
    """The checkpoint store: a directory under the state dir and its bandwidths (GiB/s)."""

    store_dir: str = "checkpoint-store"
    save_bandwidth_gibs: float = Field(default=2.5, gt=0)
    read_bandwidth_gibs: float = Field(default=5.0, gt=0)
    capacity_gib: int = Field(default=100_000, ge=1)
    # saves take this many times longer while something else writes to the store's directory (e.g. the
    # storage drill's fio): a store with headroom barely notices, one without it crawls
    contention_slowdown: float = Field(default=1.0, ge=1)
    # The store real tools see (drills/twin/workloads/storefs.py): a mounted file system whose reads and
    # writes share `io_bandwidth_mb_s` (wall-clock MB/s) fairly among active clients, each capped at
    # `client_bandwidth_mb_s`; training saves slow down by the same model. None: a plain directory.
    io_bandwidth_mb_s: float | None = Field(default=None, gt=0)
    client_bandwidth_mb_s: float = Field(default=40.0, gt=0)
    corrupt_reads: int = Field(default=0, ge=0)  # the first N files read back get one flipped byte
    # Who may create directories in the store's root, as a pod's fio sees its volume (workloads/fio_pods.py): its
    # owner, group and mode bits (octal), and whether the volume applies a pod's fsGroup (block and local volumes
    # do; NFS and most parallel file systems do not): the kubelet then makes the fsGroup its group, rwx.
    owner_uid: int = Field(default=0, ge=0)
    owner_gid: int = Field(default=0, ge=0)
    mode: str = Field(default="0755", pattern=r"^0?[0-7]{3}$")
    fs_group_applied: bool = True
    # How a fio pod's container ends when its pod is deleted (workloads/fio_pods.py): "trap" — SIGTERM reaches the
    # rendered script's trap, fio stops and its directory is removed; "killed" — fio ignores SIGTERM, the kubelet
    # kills the container after the grace period, the trap never runs and fio's files stay on the store; "hung" —
    # killed as that, and the first fio pod of each Job hangs once its I/O is done (an I/O stuck on one storage
    # client): no report, no exit, until its pod is deleted.
    fio_stop: Literal["trap", "killed", "hung"] = "trap"
    unlink_denied: bool = False  # a retention lock (WORM): no pod may remove a file from the store (rm: EPERM)


class Workloads(Strict):
    training: Named(TrainingJob) = {}
    inference: Named(InferenceDeployment) = {}


class HealthAgent(Strict):
    """A node-health agent that acts on a node that came back from a loss: cordons it again `recordon_after` later
    (recordon-agent), labels it out of its pool (`quarantine_label` "key=value", quarantine-label-agent), or leaves
    its GPUs unregistered (`gpus_unregistered`: its device plugin died in the drain and never re-registered,
    allocatable nvidia.com/gpu 0; device-plugin-lost)."""

    recordon_after: Duration | None = None
    quarantine_label: str | None = Field(None, pattern=r"^[A-Za-z0-9./_-]{1,253}=[A-Za-z0-9._-]{0,63}$")
    gpus_unregistered: bool = False
    act_after: Duration = 5.0  # the label and the unregistered GPUs: this long after the node came back


class PdbPruner(Strict):
    """A deploy tool that syncs the serving namespace during an incident from a chart without the PDB: the PDB
    selecting a pod that was deleted is deleted `after` later (pdb-pruned)."""

    after: Duration = 5.0


class BatchResubmitter(Strict):
    """A batch resubmitter that submits a deleted, unfinished Volcano Job again `resubmit_after` later."""

    resubmit_after: Duration = 15.0


class ExporterOutage(Strict):
    """Exporters that stop answering a while after the fault they should report is in place (defects
    ksm-stops-mid-fault, snmp-stops-mid-fault): the alert built on them resolves while the fault is still there."""

    kube_state_metrics: Duration | None = None  # this long after a node is first seen lost
    snmp: Duration | None = None  # this long after a port of the scraped switch is first seen shut


class GpuRemediation(Strict):
    """A site's GPU remediation (NVSentinel-like): cordon and drain a node `after` its GPU is marked unhealthy."""

    after: Duration = 30.0


class TwinProfile(Strict):
    """A whole twin: cluster shape, timings, fabric, workloads, storage, stages and enabled defects."""

    name: str = "custom"
    description: str = ""
    scale: float = Field(default=60.0, gt=0)
    kubernetes_version: str = "v1.32.4"
    cluster_cidr: str = "10.128.0.0/9"
    node_cidr: str = "10.0.0.0/16"
    service_cidr: str = "10.96.0.0/12"
    namespaces: list[str] = ["default", "kube-system", "kube-public", "kube-node-lease", "ai-platform"]
    node_info: NodeInfo = NodeInfo()
    node_pools: Named(NodePool) = {}
    gpu_health_check: bool = True  # device plugin marks a GPU unhealthy (XID) and allocatable drops
    unhealthy_gpu_taint: Taint | None = Taint(key="nvidia.com/gpu.unhealthy", value="xid", effect="NoSchedule")
    health_agent: HealthAgent | None = None  # defect recordon-agent (drills/twin/controllers/healthagent.py)
    batch_resubmitter: BatchResubmitter | None = None  # defect burst-resubmitted (controllers/resubmitter.py)
    pdb_pruner: PdbPruner | None = None  # defect pdb-pruned (controllers/pdbpruner.py)
    gpu_remediation: GpuRemediation | None = None  # drills/twin/controllers/remediation.py (None: the site has none)
    exporter_outage: ExporterOutage = ExporterOutage()  # exporters that go quiet mid-fault (drills/twin/exporters)
    dcgm_exporter: bool = True  # the GPU Operator's dcgm-exporter DaemonSet runs on every GPU node (no-dcgm-exporter)
    node_exporter_mountstats: bool = True  # the system pool's node_exporter runs --collector.mountstats (its default: off)
    timings: Timings = Timings()
    fabric: Fabric = Fabric()
    queues: Named(Queue) = {}
    priority_classes: Named(PriorityClass) = {}
    workloads: Workloads = Workloads()
    storage: Storage = Storage()
    stages: Named(Stage) = {}
    new_nodes: NewNodes | None = None  # GPU nodes waiting for acceptance (drills/twin/profile_acceptance.py)
    defects: list[str] = []

    @model_validator(mode="after")
    def _references_resolve(self) -> "TwinProfile":
        leaves = set(self.fabric.leaves)
        for pool in self.node_pools.values():
            for leaf in pool.leaves:
                if leaf not in leaves:
                    raise ValueError(f"node pool {pool.name!r} attaches to leaf {leaf!r}, which fabric.leaves "
                                     f"does not declare (known: {', '.join(sorted(leaves)) or 'none'})")
        jobs = [*self.workloads.training.values(), *self.workloads.inference.values()]
        for w in jobs:
            if w.queue and w.queue not in self.queues:
                raise ValueError(f"workload {w.name!r} uses queue {w.queue!r}; declare it under queues")
            if w.priority_class and w.priority_class not in self.priority_classes:
                raise ValueError(f"workload {w.name!r} uses priority class {w.priority_class!r}; "
                                 f"declare it under priority_classes")
            if w.namespace not in self.namespaces:
                self.namespaces.append(w.namespace)
        if self.new_nodes is not None and self.new_nodes.pool not in self.node_pools:
            raise ValueError(f"new_nodes.pool {self.new_nodes.pool!r} is not a node pool "
                             f"(known: {', '.join(self.node_pools) or 'none'})")
        self.fabric.wire(self.nodes_per_leaf(), self.rdma_devices_per_node())
        return self

    # -- derived views (pure) -----------------------------------------------------------------
    def nodes(self) -> list[NodeSpec]:
        """Every node, pools expanded in declaration order; IPs are 10.0.<pool>.<n> style."""
        out: list[NodeSpec] = []
        seq = 0
        for pool in self.node_pools.values():
            width = max(2, len(str(pool.count)))
            for i in range(pool.count):
                leaf = pool.leaves[i * len(pool.leaves) // pool.count] if pool.leaves else None
                seq += 1
                out.append(NodeSpec(
                    name=f"{pool.name_prefix}-{i + 1:0{width}d}", pool=pool.name, index=i, role=pool.role,
                    leaf=leaf, internal_ip=f"10.0.{seq // 250}.{seq % 250 + 1}",
                ))
        ports = self.fabric.downlink_ports()
        return [n.model_copy(update={"leaf_port": ports.get(n.name)}) if n.leaf else n for n in out]

    def rdma_devices_per_node(self) -> dict[str, list[str]]:
        """node → its pool's RDMA NICs (what the fabric cables per NIC on rail leaves)."""
        out: dict[str, list[str]] = {}
        for pool in self.node_pools.values():
            width = max(2, len(str(pool.count)))
            for i in range(pool.count):
                out[f"{pool.name_prefix}-{i + 1:0{width}d}"] = list(pool.rdma_devices)
        return out

    def nodes_per_leaf(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {leaf: [] for leaf in self.fabric.leaves}
        for pool in self.node_pools.values():
            width = max(2, len(str(pool.count)))
            for i in range(pool.count):
                if pool.leaves:
                    out[pool.leaves[i * len(pool.leaves) // pool.count]].append(f"{pool.name_prefix}-{i + 1:0{width}d}")
        return out

    def model_load_seconds(self, deployment: InferenceDeployment) -> float:
        """A replica's startup delay (container start → Ready): the model load, plus a set graph capture."""
        t = self.timings
        load = deployment.model_load if deployment.model_load is not None else \
            t.model_load_base + t.model_load_per_billion_params * deployment.model_params_b
        return load + (deployment.graph_capture or 0.0)

    def checkpoint_save_seconds(self, job: TrainingJob) -> float:
        return job.checkpoint.size_gib / self.storage.save_bandwidth_gibs

    def image_cached(self, pool: str, image: str) -> bool:
        return image in self.node_pools[pool].cached_images
