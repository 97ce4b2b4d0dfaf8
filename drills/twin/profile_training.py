"""The twin profile's training jobs: a Volcano job's lifecycle policies, its NCCL, its checkpoints, what it does
after a resume and on its first run — strict pydantic models, as the rest of the twin profile's schema
(drills/twin/profile_model.py re-exports them). Durations are twin seconds (`50`, `5m`, `250ms`)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, model_validator

from drills.twin.profile_types import Duration, Fraction, Strict, Toleration

__all__ = ["Policy", "NcclSpec", "CheckpointSpec", "AfterResume", "FirstRun", "TrainingJob"]

log = logging.getLogger(__name__)


class Policy(Strict):
    """A Volcano lifecycle policy: `event` (or `exitCode`) → `action`."""

    event: Literal["*", "PodEvicted", "PodFailed", "PodPending", "TaskCompleted", "TaskFailed", "Unknown",
                   "OutOfSync", "CommandIssued", "JobUpdated"] | None = None
    exit_code: int | None = None
    action: Literal["AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob", "CompleteJob",
                    "ResumeJob", "SyncJob"] = "RestartTask"
    timeout: Duration | None = None

    def to_k8s(self) -> dict:
        out: dict[str, Any] = {"action": self.action}
        if self.event is not None:
            out["event"] = self.event
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.timeout is not None:
            out["timeout"] = f"{int(self.timeout)}s"
        return out


class NcclSpec(Strict):
    """How the job's NCCL communicates: RDMA devices, the socket fallback, bandwidth and timeouts."""

    version: str = "2.21.5"
    transport: Literal["roce", "ib", "socket"] = "roce"
    hcas: list[str] = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    socket_ifname: str = "eth0"
    bus_bandwidth_gbs: float = Field(default=25.0, gt=0)
    socket_bus_bandwidth_gbs: float = Field(default=5.0, gt=0)
    timeout: Duration = 600.0
    init_duration: Duration = 20.0


class CheckpointSpec(Strict):
    interval_steps: int = Field(default=2000, ge=1)
    size_gib: float = Field(default=96.0, gt=0)  # 8B params: bf16 weights + fp32 Adam states
    path: str = "/ckpt/{job}"
    load_duration: Duration = 30.0
    loadable: bool = True  # False (defect broken-resume): loading it crashes the job
    # False (defect lost-optimizer-state): the latest checkpoint's optimizer state (DeepSpeed's ZeRO partitions) is
    # gone from the store; what the job does then is its framework's (trainlogs.TrainLog.resume_without_optimizer)
    optimizer_state: bool = True
    persistent: bool = True  # False (defect ephemeral-checkpoints): saves go to node-local disk, lost on restart
    # False (defect lost-last-save): the store acknowledges writes before they are durable (a write-back cache in the
    # pod's storage client): the last save the job reported complete is lost with the node
    durable: bool = True
    # False (defect saves-lost-under-load): a write-back client that drops its flush when the store falls behind:
    # a save that ends while something else loads the store (the storage drill's fio) is logged complete, and the
    # store holds it without its completion evidence
    durable_under_load: bool = True


class AfterResume(Strict):
    """How a job behaves once it resumed after a restart (defects; a healthy job behaves as before).

    `crash_after`: every resumed run crashes this long after its first step (a bad replacement node, an
    OOM from a changed layout), so Volcano restarts it until maxRetry. `throughput_factor`: a resumed run
    trains at this fraction of its throughput (a straggler, a throttled GPU). `transport: socket`: the
    re-initialised communicator comes up on NET/Socket (a replacement node without working RDMA)."""

    crash_after: Duration | None = None
    throughput_factor: Fraction = 1.0
    transport: Literal["same", "socket"] = "same"
    # The next three apply from the moment the job trains again after a disruption: a resumed run's first step,
    # or — a fabric event, no restart — when its throughput is back. `loss: nan`: every step from then on logs a
    # NaN loss in the framework's own shape (trainlogs). `oom_after`: this long after, one worker's container is
    # OOMKilled (exit 137), once, and its log shows nothing of it (the kernel kills it; with the job's
    # restart_policy OnFailure the kubelet restarts it in place). `error_line_after`: this long after, one worker
    # prints an error line, once, and trains on — `error_line: unclassified` a Fabric Manager NVSwitch error no
    # reader classifies, `xid` the driver's Xid 74 (an NVLink error) that the GPU reader does. `loss: flat`: every
    # step logs one same finite value (a learning rate restored as 0, frozen parameters); `loss: reset`: the loss of
    # a fresh model, falling slowly (the step counter and scheduler restored, the weights not).
    # `loss: climbs`: finite and falling for the first CLIMB_AFTER_STEPS steps, then rising without bound (a learning
    # rate restored 10× too high, Adam's moments lost: a loss spike that never comes back) — finite all the way.
    loss: Literal["finite", "nan", "flat", "reset", "climbs"] = "finite"
    # `loss_scale: floor`: the fp16 loss scaler sits at its minimum (1) and every step overflows, so the optimizer
    # skips every step while the counter advances (defect loss-scale-floor): Megatron prints no loss, no grad norm and
    # the interval's `number of skipped iterations`, DeepSpeed one `OVERFLOW! … reducing to 1` line per step (formats
    # whose framework prints nothing of a skipped step — the HF Trainer's, Lightning's bar — print as usual)
    loss_scale: Literal["dynamic", "floor"] = "dynamic"
    oom_after: Duration | None = None
    error_line_after: Duration | None = None
    error_line: Literal["unclassified", "xid"] = "unclassified"


class FirstRun(Strict):
    """How the run the twin starts with behaves (defects; healthy: as any run). `throughput_factor`: the job is
    already degraded when the drill begins — it came back from an earlier worker crash on a straggler
    (defect degraded-before-drill) — and a later restart trains at full speed again."""

    throughput_factor: Fraction = 1.0
    # the first run's workers crash this long after it starts (an XID error) and Volcano restarts the job, which
    # then resumes healthy: the job restarted just before the drill (defect restarted-before-drill)
    crash_after: Duration | None = None


class TrainingJob(Strict):
    """A multi-node Volcano training job and the progress it has already made when the twin starts."""

    name: str
    namespace: str = "ai-platform"
    queue: str = "training"
    priority_class: str | None = "training-low"
    image: str = "registry.local/ai-platform/llm-trainer:2.4.0"
    task: str = "worker"
    replicas: int = Field(default=2, ge=1)
    gpus_per_worker: int = Field(default=8, ge=0)
    cpu_per_worker: int = Field(default=96, ge=0)
    memory_gib_per_worker: int = Field(default=1024, ge=0)
    min_available: int | None = Field(default=None, ge=0)
    max_retry: int = Field(default=3, ge=0)
    policies: list[Policy] = [Policy(event="PodEvicted", action="RestartJob"),
                              Policy(event="PodFailed", action="RestartJob")]
    task_policies: list[Policy] = []
    plugins: dict[str, list[str]] = {"env": [], "svc": []}
    node_selector: dict[str, str] = {"gpu-drills.io/role": "training"}
    tolerations: list[Toleration] = [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
    checkpoint: CheckpointSpec = CheckpointSpec()
    step_time: Duration = 0.25  # a checkpoint interval (2000 steps) is ~8 minutes of work: a job catches up in minutes
    samples_per_second: float = Field(default=256.0, gt=0)
    initial_step: int = Field(default=6150, ge=0)
    initial_checkpoint: int | None = Field(default=6000, ge=0)
    initial_loss: float = 1.92
    total_steps: int = Field(default=100000, ge=1)
    nccl: NcclSpec = NcclSpec()
    after_resume: AfterResume = AfterResume()
    first_run: FirstRun = FirstRun()
    # the framework whose log lines the workers print (drills.twin.workloads.trainlogs); `twin` is the legacy
    # private format, kept for old profiles only
    log_format: Literal["megatron", "hf-trainer", "deepspeed", "lightning", "twin"] = "megatron"
    # the worker pods' restartPolicy: Never (Volcano's policies restart the job), or OnFailure (the kubelet restarts
    # a failed container in place: the pod, its name and uid stay)
    restart_policy: Literal["Never", "OnFailure"] = "Never"
    # `driver-too-old` (defect gpus-unseen, the seed's §5.1): the image's CUDA runtime is newer than the nodes'
    # driver; torch's CUDA initialisation fails with its warning, the script falls back to the CPU and "runs": the
    # pod holds its GPUs, nvidia-smi shows them idle with no compute process, throughput is a few % of nominal
    cuda: Literal["ok", "driver-too-old"] = "ok"

    @property
    def effective_min_available(self) -> int:
        return self.replicas if self.min_available is None else self.min_available

    @model_validator(mode="after")
    def _progress_is_consistent(self) -> "TrainingJob":
        if self.initial_checkpoint is not None and self.initial_checkpoint > self.initial_step:
            raise ValueError(f"initial_checkpoint {self.initial_checkpoint} is after initial_step "
                             f"{self.initial_step}; a checkpoint cannot be ahead of training")
        return self
