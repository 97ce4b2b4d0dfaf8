"""Reading what real clusters print: prefixes, several records per line, and facts that span lines.

`parse_line` (in `logformats`) reads one line; real logs need more. This module is the one reader
for training, NCCL and vLLM logs, used by the monitors (one `LogReader` per pod) and by `read_log`
(a whole file, as the corpus tests and `drills validate` do):

- **Prefixes** are peeled off in any order and nesting: the Kubernetes `--timestamps` stamp, launcher
  rank prefixes (`[N] `, `[rankN]:`, `[1,N]<stdout>:`, SLURM `N: `, pdsh `host-N: `, Ray/vLLM
  `(Worker pid=N) `), stray ANSI colour codes, then NCCL's own `host:pid:tid [dev]` prefix.
- **Several records per line**: tqdm redraws (`\\r`) and log records glued to the end of a progress bar
  (`…3.53it/s][INFO|trainer.py:2103] …`, `…v_num=95nc][E ProcessGroupNCCL.cpp:458] …`) are split.
- **NCCL transport** from every shape NCCL prints (`NET/IB : Using [0]mlx5_0:1/RoCE`, `Using network
  IBext`, `P2P plugin IBext`, per-channel `via NET/Socket/3`, `NET/IB : No device found.`), per process
  (host:pid) and rank. NCCL 2.4 printed `NET/Socket : Using` for its bootstrap even over IB, so that
  line alone decides nothing when the log says NCCL < 2.5. Any rank on Socket is a fallback.
- **Errors**, classified: `ib_completion` (old `with error 12, opcode 0` and new `with status=12
  opcode=0` wording), `watchdog_timeout` (SeqNum/OpType/Timeout), `comm_aborted`, `dist_backend`,
  `socket_closed`, `nccl_error` (a root-cause NCCL WARN: CUDA failure, SHARP/CollNet setup), and
  `traceback` (a Python traceback, chained ones as one, with its exception line when printed).
  A watchdog timeout repeated for the same rank and SeqNum is one error.
- **Resume**: an attempt (Megatron `loading checkpoint from … at iteration N`, HF `Loading model from
  …`, Lightning `Restoring states from the checkpoint path at …`, DeepSpeed `loading checkpoint …`)
  counts only when it succeeded: the framework's success line (Megatron `successfully loaded`, HF
  `Continuing training from global step N`, Lightning `Restored all states`, DeepSpeed `successfully
  loaded … ZeRO state_dicts` / `[Torch] Loaded checkpoint`). An attempt followed by an error or a
  traceback, a traceback through the framework's load function, Megatron's `will not load any
  checkpoints and will start from random`, or training steps without the success line where the
  framework prints one, is `resume_failed` with the error as its text.
- **Saves**, one per checkpoint: Megatron `saving …`/`successfully saved …` with its `save-checkpoint`
  timer, DeepSpeed shards (`Checkpoint global_stepN is about to be saved!` … the last `is ready now!`:
  the save ends when its last shard is written), HF `Saving model checkpoint to …` (a final save
  without a step too), Lightning `saving model to …`.
- **vLLM startup phases**: version, weight download, weight load, model load, torch.compile, CUDA
  graph capture, engine init, server ready (`Application startup complete.` / `Uvicorn running on`).
- **Framework detection** (`log_format: auto`): signature lines weighted per framework; DeepSpeed
  under Megatron/HF/Lightning counts as the outer framework, NCCL-only logs are `nccl`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from drills.measure.logformats import LogFormat, TrainingEvent, preset
from drills.measure.logprefix import Record, split_records, split_timestamp  # noqa: F401 (re-exported)
from drills.measure.vllm_startup import VllmStartup

__all__ = ["Record", "LogReader", "LogSummary", "NcclProcess", "LogError", "read_log", "split_records",
           "detect_framework", "FRAMEWORKS"]

FRAMEWORKS = ("hf-trainer", "megatron", "deepspeed", "lightning", "vllm", "twin", "nccl")

# -- NCCL ---------------------------------------------------------------------------------------

_NET_USING = re.compile(r"^NET/(?!Plugin)(?P<name>\w+)\s*: Using (?P<rest>.*)$")
_USING_NETWORK = re.compile(r"^Using network (?P<name>\S.*?)\s*$")
_P2P_PLUGIN = re.compile(r"^P2P plugin (?:v\d+ )?(?P<name>\w+)")
_VIA_NET = re.compile(r"(?:^|\s)(?P<a>\d+)\[[0-9a-fx]+\] -> (?P<b>\d+)\[[0-9a-fx]+\].*?via NET/(?P<name>[^/\s]+)/\d+")
_NO_IB = re.compile(r"^NET/IB\s*: No device found")
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")
_SHARP_DEV = re.compile(r"Sharp rank \d+/\d+ initialized on (?P<dev>\S+)")
_HCA = re.compile(r"\bhca (?P<dev>mlx5_\w+)")


def _devices(rest: str) -> tuple[str, ...]:
    """`[0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB eth0:…` → ("mlx5_10:1/RoCE", "mlx5_11:1/RoCE")."""
    head = rest.split(";")[0]
    out = []
    for token in head.split():
        if re.fullmatch(r"\[[A-Z]+\]", token):  # flags such as [RO]
            continue
        token = re.sub(r"^\[\d+\]", "", token)
        if token:
            out.append(token)
    return tuple(out)


@dataclass
class NcclProcess:
    """What one NCCL process (host:pid) said about its network."""

    host: str
    pid: int | None
    rank: int | None = None  # its global rank, from a launcher prefix or its channel lines
    name: str | None = None  # strong: Using network / P2P plugin / channel lines / NET/IB : Using
    weak_socket: bool = False  # `NET/Socket : Using` (decides only when the NCCL version is ≥ 2.5 or unknown)
    no_ib: bool = False  # `NET/IB : No device found.`
    bootstrap: bool = False  # printed `Bootstrap : Using` (NCCL ≥ 2.5)
    channel_socket: bool = False  # a channel went via NET/Socket
    devices: tuple[str, ...] = ()

    def transport(self, version: tuple[int, ...] | None) -> str | None:
        """IB | RoCE | IBext | Socket | … (the NET plugin NCCL uses), None when the lines do not say."""
        if self.channel_socket:
            return "Socket"
        name = self.name
        if name is None:
            if self.no_ib or (self.weak_socket and (self.bootstrap or version is None or version >= (2, 5))):
                return "Socket"
            return None
        if name == "IB" and self.devices and all(d.split("/")[1:2] == ["RoCE"] for d in self.devices if "/" in d) \
                and any("/" in d for d in self.devices):
            return "RoCE"
        return name

    @property
    def label(self) -> str:
        if self.host:
            return self.host
        return f"rank{self.rank}" if self.rank is not None else f"pid{self.pid}"


# -- errors ------------------------------------------------------------------------------------

_IB_COMPLETION = re.compile(
    r"Got completion (?:from peer (?P<peer>\S+) )?with (?:status=(?P<status>\d+)|error (?P<error>\d+)),?"
    r"\s*opcode[= ](?P<opcode>\d+),?\s*len[= ](?P<len>\d+),?\s*vendor err (?P<vendor>\d+)(?: \((?P<dir>\w+)\))?")
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\((?P<args>.*?)\)\s*ran for "
                       r"(?P<ran>\d+) milliseconds")
_RANK_IN = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]")
_COMM_ABORTED = re.compile(r"NCCL communicator was aborted(?: on rank (?P<rank>\d+))?|[Cc]ommunicator (?:was )?aborted")
_DIST_BACKEND = re.compile(r"instance of 'c10::DistBackendError'|(?:torch\.distributed\.)?DistBackendError: ")
_SOCKET_CLOSED = re.compile(r"Connection closed by remote peer (?P<peer>\S+)")
_NCCL_ROOT = re.compile(r"Cuda failure '|CUDA error|SHARP group create|Call to ibv_\w+ failed|NET/IB\s*: (?:\S+:\d+ )?(?:Got async event : (?!port active)|async fatal event)|"
                        r"unhandled (?:cuda|system) error|Failed to (?:open|query) .*ibv")
_TB_START = re.compile(r"^\s*Traceback \(most recent call last\):")
_TB_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TB_CHAIN = re.compile(r"^(?:During handling of the above exception, another exception occurred:|"
                       r"The above exception was the direct cause of the following exception:)")
_EXC_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)|"
                       r"[A-Za-z_][\w.]*\.\w*Error|AssertionError|KeyError|StopIteration)(?::\s?(?P<msg>.*))?$")


@dataclass
class LogError:
    """One classified error; fields the message does not carry are None."""

    kind: str  # ib_completion | watchdog_timeout | comm_aborted | dist_backend | socket_closed | nccl_error | traceback
    text: str
    at: datetime | None = None
    host: str | None = None
    rank: int | None = None
    seq: int | None = None
    op_type: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    status: int | None = None  # IB completion status / error
    vendor_err: int | None = None
    peer: str | None = None
    frames: tuple[str, ...] = ()  # traceback: function names, outermost first
    exception: str | None = None  # traceback: the exception line, when printed

    @property
    def detail(self) -> str:
        if self.kind == "traceback":
            return self.exception or f"traceback through {' -> '.join(self.frames[-3:]) or '?'} (exception line not in the log)"
        return self.text


# -- resume, saves ------------------------------------------------------------------------------

_RESUME_ATTEMPT = (  # (framework, pattern); groups: path, step
    ("megatron", re.compile(r"loading (?:\w+ )?checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)")),
    ("megatron", re.compile(r"global rank \d+ is loading checkpoint (?P<path>\S+)")),
    ("hf-trainer", re.compile(r"Loading model from (?P<path>\S*/\S*?)\.?\s*$")),
    ("hf-trainer", re.compile(r"Continuing training from checkpoint, will skip to saved global_step")),
    ("lightning", re.compile(r"Restoring states from the checkpoint(?: path)? at (?P<path>\S+)")),
    ("deepspeed", re.compile(r"_load_checkpoint\] (?:rank: \d+ |\[Rank \d+\] )?loading checkpoint:? (?P<path>\S+)")),
    ("deepspeed", re.compile(r"\[Torch\] Loading checkpoint from (?P<path>\S+?)(?:\.\.\.)?$")),
    ("twin", re.compile(r"loading checkpoint step=(?P<step>\d+)(?: path=(?P<path>\S+))?")),
)
_RESUME_OK = (
    ("megatron", re.compile(r"successfully loaded checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)")),
    ("megatron", re.compile(r"^\s*successfully loaded (?P<path>\S+\.pt)\s*$")),
    ("hf-trainer", re.compile(r"Continuing training from global step (?P<step>\d+)")),
    ("lightning", re.compile(r"Restored all states from the checkpoint(?: file| path)? at (?P<path>\S+)")),
    ("deepspeed", re.compile(r"successfully (?:loaded|read) \d+ ZeRO state_dicts")),
    ("deepspeed", re.compile(r"\[Torch\] Loaded checkpoint from (?P<path>\S+?)(?:\.\.\.|\.)?$")),
    ("twin", re.compile(r"resumed from checkpoint step=(?P<step>\d+)(?:.*?\bpath=(?P<path>\S+))?")),
)
_NO_CHECKPOINT = (
    re.compile(r"could not find the metadata file (?P<path>\S+)"),
    re.compile(r"will not load any checkpoints and will start from random"),
    re.compile(r"Can't find a valid checkpoint at (?P<path>\S+)"),
    re.compile(r"No valid checkpoint found in output directory"),
)
_LOAD_FRAMES = re.compile(r"^(?:load_checkpoint|_load_checkpoint|_load_from_checkpoint|_load_zero_checkpoint|"
                          r"_load_optimizer_and_scheduler|_restore_modules_and_callbacks|restore_model|"
                          r"restore_training_state|resume_start|_load_rng_state|load_checkpoint_and_dispatch)$")
_LOAD_ACTION = re.compile(r"\b(?:load_checkpoint|_load_from_checkpoint|resume_from_checkpoint)\b")
_FRAMEWORK_PRINTS_SUCCESS = {"megatron", "hf-trainer", "lightning", "twin"}

_SAVE_START = (  # groups: step, path
    ("megatron", re.compile(r"^\s*saving checkpoint at iteration\s+(?P<step>\d+) to (?P<path>\S+)")),
    ("deepspeed", re.compile(r"\[Torch\] Checkpoint (?:global_step)?(?P<step>\d+) is about to be saved")),
)
_SAVE_SHARD = re.compile(r"\[Torch\] Saved (?P<path>\S+?)\.?$|\[Torch\] Checkpoint (?:global_step)?(?P<step>\d+) is ready now")
_SAVE_TIMER = re.compile(r"save-checkpoint\s*[.:]*\s*:?\s*(?:\((?P<min>[\d.]+),\s*(?P<max>[\d.]+)\)|(?P<one>[\d.]+))")
_DS_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_HF_STAMP = re.compile(r"\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) >>")
_MEGATRON_DONE = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+)(?: to (?P<path>\S+))?")
_HF_SAVE = re.compile(r"Saving model checkpoint to (?P<path>\S+)")
_LIGHTNING_SAVE = re.compile(r"saving model to '?(?P<path>[^'\s]+)'?")
_STEP_IN_PATH = re.compile(r"(?:checkpoint-|global_step|iter_0*|step[=_-]?)(?P<step>\d+)")

# -- framework signatures -----------------------------------------------------------------------

_SIGNS: tuple[tuple[str, int, re.Pattern[str]], ...] = tuple((fw, w, re.compile(p)) for fw, w, p in (
    ("twin", 10, r"^step=\d+ loss=|^checkpoint saved step=\d+|^resumed from checkpoint step=\d+"),
    ("hf-trainer", 3, r"\[(?:INFO|WARNING|ERROR)\|[\w.]+\.py:\d+\] "),
    ("hf-trainer", 3, r"\{'loss': .*'epoch': |\{'train_runtime': "),
    ("hf-trainer", 3, r"transformers/trainer\.py|Continuing training from global step|Saving model checkpoint to "),
    ("hf-trainer", 1, r"^\s*\d+%\|[^|]*\|\s*\d+/\d+ \["),
    ("megatron", 5, r"^\s*iteration\s+\d+/\s*\d+ \||(?:^\s*saving|successfully saved) checkpoint (?:at|from) iteration"),
    ("megatron", 5, r"loading checkpoint from \S+ at iteration|\(min, max\) time across ranks|latest_checkpointed_iteration"),
    ("megatron", 3, r"megatron/|global rank \d+ is loading checkpoint|-+ end of arguments -+|model_optim_rng\.pt"),
    ("megatron", 2, r"^\s+[\w/-]+ \.{4,}\s*: \(\d+\.\d+, \d+\.\d+\)$"),  # a `(min, max) time across ranks` timer
    ("deepspeed", 2, r"\[(?:INFO|WARNING)\] \[[\w.]+\.py:\d+:\w+\]|ZeRO state_dicts|zero partition checkpoints"),
    ("deepspeed", 2, r"deepspeed/|\[Torch\] (?:Checkpoint|Saving|Saved)|^steps: \d+ loss: "),
    ("lightning", 5, r"Restoring states from the checkpoint|Restored all states|^Epoch \d+:\s+\d+%\|"),
    ("lightning", 3, r"pytorch_lightning/|lightning/pytorch/|lightning/fabric/|GPU available: (?:True|False)|"
                     r"LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|Initializing distributed: GLOBAL_RANK"),
    ("lightning", 2, r"^distributed_backend=nccl|All distributed processes registered"),
    ("vllm", 5, r"\((?:VllmWorkerProcess|EngineCore\w*|Worker_TP\d+|APIServer|RayWorkerWrapper) pid=\d+\)"),
    ("vllm", 3, r"(?:^|\s)(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d (?:\[[\w.]+:\d+\]|[\w.]+\.py:\d+\]) |"
                r"Loading safetensors checkpoint shards|vllm"),
    ("vllm", 1, r"^INFO:\s+(?:Started server process|Waiting for application startup|Application startup complete|"
                r"Uvicorn running on)"),  # uvicorn, as vLLM's OpenAI server runs it
))
# the rest of PyTorch's CUDA error message, printed after its exception line
_CUDA_ERROR_TAIL = re.compile(r"^(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing "
                              r"CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`)")
_NCCL_SIGN = re.compile(r"Watchdog caught collective|ProcessGroupNCCL|NCCL communicator|DistBackendError|NCCL version")
_VLLM_PROCS = re.compile(r"^(?:VllmWorkerProcess|EngineCore\w*|Worker\w*|APIServer|RayWorkerWrapper)$")
_HOSTS = ("hf-trainer", "megatron", "lightning", "vllm", "twin")


def detect_framework(scores: dict[str, int], nccl_lines: int) -> str | None:
    """The framework that runs the loop: the best of HF/Megatron/Lightning/vLLM/twin when it has a strong
    signature (DeepSpeed under them counts as them), else DeepSpeed, else `nccl` for NCCL-only logs."""
    host = max(_HOSTS, key=lambda f: scores.get(f, 0))
    if scores.get(host, 0) >= 5:
        return host
    if scores.get("deepspeed", 0) > 0:
        return "deepspeed"
    if scores.get(host, 0) > 0 and scores[host] >= nccl_lines:
        return host
    return "nccl" if nccl_lines else (host if scores.get(host, 0) else None)


# -- the reader ---------------------------------------------------------------------------------

@dataclass
class _Save:
    step: int | None
    path: str | None
    framework: str
    started: datetime | None = None
    last_shard: datetime | None = None
    duration_s: float | None = None
    done: bool = False
    emitted: bool = False


@dataclass
class _Resume:
    framework: str
    step: int | None
    path: str | None
    at: datetime | None
    state: str = "pending"  # pending | ok | failed
    reason: str | None = None
    tb: object = None  # the traceback that failed it


@dataclass
class _Traceback:
    start_at: datetime | None
    frames: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    exception: str | None = None
    error: LogError | None = None
    closed: bool = False
    failed_resume: bool = False


@dataclass(frozen=True)
class LogSummary:
    """A whole log read: what the corpus tests and `drills validate` compare."""

    framework: str | None
    nccl_version: str | None
    processes: tuple[NcclProcess, ...]
    transports: dict[str, str]  # label (host, or rankN) → transport; Socket wins per label
    socket_fallback: bool | None
    devices: tuple[str, ...]
    errors: tuple[LogError, ...]
    resume: dict | None  # {attempted, succeeded, step, path, reason}
    checkpoint_saves: tuple[dict, ...]  # {step, path, duration_s}
    vllm: dict
    unclassified: int
    steps: int


class LogReader:
    """Reads one stream of log lines (one pod, or one file) and yields `TrainingEvent`s in order.

    `fmt` is a LogFormat (a preset, `auto`, or profile patterns): its step/checkpoint_saved/resumed
    patterns are tried on every record, on top of the built-in recognisers of this module.
    """

    def __init__(self, fmt: LogFormat | str = "auto") -> None:
        self.fmt = preset(fmt) if isinstance(fmt, str) else fmt
        self.procs: dict[tuple[str, int | None], NcclProcess] = {}
        self.version: str | None = None
        self.errors: list[LogError] = []
        self.saves: list[_Save] = []
        self.resumes: list[_Resume] = []
        self.startup = VllmStartup()
        self.scores: dict[str, int] = {}
        self.nccl_lines = 0
        self.unclassified = 0
        self.steps = 0
        self._seen_watchdog: set[tuple] = set()
        self._seen_root: set[str] = set()
        self._tb: _Traceback | None = None
        self._pending_no_ckpt: _Resume | None = None
        self._last_at: datetime | None = None
        self._consumed = False
        self._known = False
        self._steps_since_resume = 0

    # -- public ---------------------------------------------------------------------------------
    def feed(self, line: str) -> list[TrainingEvent]:
        out: list[TrainingEvent] = []
        records = split_records(line)
        step_events: list[TrainingEvent] = []
        for rec in records:
            if rec.at is not None:
                self._last_at = rec.at
            events = self._record(rec)
            if not events and rec.body.strip() and not self._known:
                self.unclassified += 1
            for e in events:
                (step_events if e.kind == "step" else out).append(e)
        if step_events:  # tqdm redraws: the last update of a line is the current one
            out.append(step_events[-1])
            self.steps += 1
        return out

    def close(self) -> list[TrainingEvent]:
        """End of the stream: close an open traceback and judge a pending resume."""
        out = self._close_traceback(None)
        for r in self.resumes:
            if r.state == "pending" and r.framework in _FRAMEWORK_PRINTS_SUCCESS:
                out += self._fail(r, f"no success line after the attempt ({_framework_ok_line(r.framework)})", None)
            elif r.state == "pending":
                r.state = "ok"
                out.append(self._ev("resumed", None, step=r.step, path=r.path))
        return out

    @property
    def framework(self) -> str | None:
        return detect_framework(self.scores, self.nccl_lines)

    def transports(self) -> dict[tuple[str, int | None], tuple[NcclProcess, str]]:
        v = _version_tuple(self.version)
        return {k: (p, t) for k, p in self.procs.items() if (t := p.transport(v)) is not None}

    def summary(self) -> LogSummary:
        v = _version_tuple(self.version)
        labels: dict[str, str] = {}
        for p in self.procs.values():
            t = p.transport(v)
            if t is None:
                continue
            if labels.get(p.label) != "Socket":
                labels[p.label] = t
        devices: list[str] = []
        for p in self.procs.values():
            for d in p.devices:
                if d not in devices:
                    devices.append(d)
        resume = None
        if self.resumes:
            r = self.resumes[-1]
            resume = {"attempted": True, "succeeded": r.state == "ok", "step": r.step, "path": r.path,
                      "reason": r.reason}
        saves = tuple({"step": s.step, "path": s.path, "duration_s": s.duration_s} for s in self.saves if s.done)
        return LogSummary(self.framework, self.version, tuple(self.procs.values()), labels,
                          ("Socket" in labels.values()) if labels else None, tuple(devices), tuple(self.errors),
                          resume, saves, self.startup.summary(), self.unclassified, self.steps)

    # -- one record -------------------------------------------------------------------------------
    def _ev(self, kind: str, rec: Record | None, **kw) -> TrainingEvent:
        at = rec.at if rec is not None else None
        return TrainingEvent(kind=kind, at=at or self._last_at, line=rec.raw if rec else "", **kw)  # type: ignore[arg-type]

    def _record(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        signed = self._score(rec)
        self._consumed = False
        in_traceback = self._tb is not None and not self._tb.closed
        out: list[TrainingEvent] = []
        out += self._traceback(rec)
        # a record is classified when it yields a fact or is a known kind of line: NCCL's, a framework's
        # signature, part of a traceback, or a line one of the recognisers took without an event
        self._known = bool(signed or rec.nccl is not None or in_traceback or _TB_START.match(body)
                           or _TB_FRAME.match(body) or _VERSION.search(body) or _CUDA_ERROR_TAIL.match(body))
        if rec.nccl is not None:
            self.nccl_lines += 1
            out += self._nccl(rec)
        out += self._errors(rec)
        out += self._resume(rec)
        out += self._save(rec)
        if self.startup.record(rec):
            out.append(self._ev("vllm_phase", rec))
        m = _VERSION.search(body)
        if m and self.version is None:
            self.version = m.group("v")
        # profile / preset patterns: steps, saves and resumes the built-ins do not know
        if not self._consumed and not any(e.kind in ("checkpoint_saved", "resumed", "resume_attempt", "resume_failed")
                                          for e in out):
            ev = _match_format(self.fmt, rec, self._last_at)
            if ev is not None and ev.kind == "step" and not _is_progress_noise(body):
                out.append(ev)
            elif ev is not None and ev.kind in ("checkpoint_saved", "resumed") and rec.nccl is None:
                out += self._format_event(ev, rec)
        if any(e.kind == "step" for e in out):
            self._steps_since_resume += 1
            out += self._steps_started(rec)
        self._known = self._known or self._consumed
        return out

    def _score(self, rec: Record) -> bool:
        """Weigh the record's framework signatures; True when it carries any (vLLM, a framework, NCCL)."""
        body = rec.body
        signed = False
        if rec.proc and _VLLM_PROCS.match(rec.proc):
            self.scores["vllm"] = self.scores.get("vllm", 0) + 5
            signed = True
        for fw, weight, pattern in _SIGNS:
            if pattern.search(body):
                self.scores[fw] = self.scores.get(fw, 0) + weight
                signed = True
        if rec.nccl is None and _NCCL_SIGN.search(body):
            self.nccl_lines += 1
            signed = True
        return signed

    # NCCL transport
    def _proc(self, rec: Record) -> NcclProcess:
        key = (rec.host or "", rec.pid)
        p = self.procs.get(key)
        if p is None:
            p = self.procs[key] = NcclProcess(rec.host or "", rec.pid, rec.rank)
        elif rec.rank is not None:
            p.rank = rec.rank
        return p

    def _nccl(self, rec: Record) -> list[TrainingEvent]:
        msg = rec.body
        p = self._proc(rec)
        before = p.transport(_version_tuple(self.version))
        if rec.nccl == "INFO":
            if m := _NET_USING.match(msg):
                devices = _devices(m.group("rest"))
                if m.group("name") == "Socket":
                    p.weak_socket = True
                else:
                    p.name = p.name if p.name not in (None, "IB") or m.group("name") != "IB" else "IB"
                    if p.name is None:
                        p.name = m.group("name")
                    p.devices = tuple(dict.fromkeys(p.devices + devices))
            elif m := _USING_NETWORK.match(msg):
                p.name = m.group("name")
            elif m := _P2P_PLUGIN.match(msg):
                p.name = m.group("name")
            elif _NO_IB.match(msg):
                p.no_ib = True
            elif msg.startswith("Bootstrap : Using") or msg.startswith("Bootstrap: Using"):
                p.bootstrap = True
            elif m := _VIA_NET.search(msg):
                if m.group("name") == "Socket":
                    p.channel_socket = True
                elif p.name is None or p.name == "Socket":
                    p.name = m.group("name")
                if p.rank is None:
                    local = m.group("b") if "[receive]" in msg else m.group("a")
                    p.rank = int(local)
            elif m := _SHARP_DEV.search(msg):
                if m.group("dev") not in p.devices:
                    p.devices = p.devices + (m.group("dev"),)
        elif rec.nccl == "WARN":
            if m := _HCA.search(msg):
                if m.group("dev") not in p.devices:
                    p.devices = p.devices + (m.group("dev"),)
        after = p.transport(_version_tuple(self.version))
        if after is not None and (after != before or _is_transport_line(msg)):
            return [self._ev("nccl_transport", rec, transport=after, devices=p.devices,
                             text=f"{p.host}:{p.pid}" if p.pid is not None else p.host, rank=p.rank)]
        if rec.nccl == "WARN":
            return [self._ev("nccl_warn", rec, text=msg.strip(), rank=p.rank)]
        return []

    # errors
    def _errors(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        err: LogError | None = None
        if m := _IB_COMPLETION.search(body):
            err = LogError("ib_completion", body.strip(), rec.at, rec.host, rec.rank,
                           status=int(m.group("status") or m.group("error")), vendor_err=int(m.group("vendor")),
                           peer=m.group("peer"))
        elif (m := _COMM_ABORTED.search(body)) and "Connection closed" not in body:
            err = LogError("comm_aborted", body.strip(), rec.at, rec.host,
                           int(m.group("rank")) if m.group("rank") else rec.rank)
            w = _WATCHDOG.search(body)
            if w:
                _fill_watchdog(err, w, body)
        elif _DIST_BACKEND.search(body):
            err = LogError("dist_backend", body.strip(), rec.at, rec.host, rec.rank)
        elif m := _WATCHDOG.search(body):
            err = LogError("watchdog_timeout", body.strip(), rec.at, rec.host, rec.rank)
            _fill_watchdog(err, m, body)
            key = (err.rank, err.seq, err.op_type, err.timeout_ms)
            if key in self._seen_watchdog:
                return []
            self._seen_watchdog.add(key)
        elif (m := _SOCKET_CLOSED.search(body)) and (rec.nccl in (None, "WARN")):
            err = LogError("socket_closed", body.strip(), rec.at, rec.host, rec.rank, peer=m.group("peer"))
        elif rec.nccl == "WARN" and _NCCL_ROOT.search(body):
            if body.strip() in self._seen_root:  # the same root cause from several processes is one error
                return []
            self._seen_root.add(body.strip())
            err = LogError("nccl_error", body.strip(), rec.at, rec.host, rec.rank)
        if err is None:
            return []
        if err.kind == "comm_aborted" and err.seq is not None:
            self._seen_watchdog.add((err.rank, err.seq, err.op_type, err.timeout_ms))
        return self._add_error(err, rec)

    def _add_error(self, err: LogError, rec: Record | None) -> list[TrainingEvent]:
        self.errors.append(err)
        out = [self._ev("error", rec, text=f"{err.kind}: {err.detail}", error=err.kind, rank=err.rank)]
        if err.kind in ("watchdog_timeout", "ib_completion", "socket_closed", "comm_aborted", "nccl_error") \
                and rec is not None and rec.nccl != "WARN":  # a WARN line is already an nccl_warn
            out.append(self._ev("nccl_warn", rec, text=err.text, rank=err.rank))
        for r in self.resumes:  # an error while a resume is pending: the resume failed
            if r.state == "pending" and err.kind != "traceback":
                out += self._fail(r, f"{err.kind}: {err.detail}", rec)
        return out

    # tracebacks
    def _traceback(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        tb = self._tb
        if tb is not None and not tb.closed:
            if _TB_START.match(body) or _TB_CHAIN.match(body) or not body.strip():
                return []
            if (m := _TB_FRAME.match(body)) or body.startswith((" ", "\t")):
                if m:
                    tb.frames.append(m.group("func"))
                tb.texts.append(body)
                return []
            return self._close_traceback(rec)
        if _TB_START.match(body):
            self._tb = _Traceback(rec.at)
            return []
        if (m := _TB_FRAME.match(body)) and (tb is None or tb.closed):
            self._tb = _Traceback(rec.at, [m.group("func")], [body])
            return []
        if tb is not None and tb.closed and tb.exception and (_TB_CHAIN.match(body)):
            tb.closed = False  # a chained traceback follows its exception line
            self.errors.remove(tb.error) if tb.error in self.errors else None
            return []
        return []

    def _close_traceback(self, rec: Record | None) -> list[TrainingEvent]:
        tb = self._tb
        if tb is None or tb.closed:
            return []
        tb.closed = True
        body = rec.body.strip() if rec is not None else ""
        m = _EXC_LINE.match(body) if body else None
        if m:
            tb.exception = body
        err = LogError("traceback", tb.exception or "", tb.start_at, rank=rec.rank if rec else None,
                       frames=tuple(tb.frames), exception=tb.exception)
        tb.error = err
        # keep order: the traceback started before its exception line
        self.errors.append(err)
        out = [self._ev("error", rec, text=f"traceback: {err.detail}", error="traceback")]
        loading = any(_LOAD_FRAMES.match(f) for f in tb.frames) or any(_LOAD_ACTION.search(t) for t in tb.texts)
        pending = [r for r in self.resumes if r.state == "pending"]
        reason = err.detail
        if pending:
            for r in pending:
                out += self._fail(r, reason, rec)
                r.tb = tb
            tb.failed_resume = True
        elif tb.failed_resume:
            for r in self.resumes:
                if r.state == "failed" and r.tb is tb:
                    r.reason = reason  # a chained traceback: its last exception is the one to report
        elif loading and not (tb.exception and _is_nccl_exception(tb.exception)):
            r = _Resume(_framework_of_frames(tb.texts) or self.framework or "?", None, None, tb.start_at)
            if tb.exception and (m2 := _NO_CHECKPOINT[2].search(tb.exception)):
                r.path = m2.group("path")
                r.step = _step_in(r.path)
            self.resumes.append(r)
            out.append(self._ev("resume_attempt", rec, step=r.step, path=r.path))
            out += self._fail(r, reason, rec)
            r.tb = tb
            tb.failed_resume = True
        return out

    # resume
    def _resume(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        out: list[TrainingEvent] = []
        for fw, pattern in _RESUME_OK:
            if m := pattern.search(body):
                g = m.groupdict()
                step = int(g["step"]) if g.get("step") else None
                path = g.get("path")
                self._consumed = True
                r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
                if r is None and (fw == "deepspeed" or (self.resumes and self.resumes[-1].state == "ok"
                                                        and self._steps_since_resume == 0)):
                    return []  # the same resume, confirmed again (by another rank or another shard)
                if r is None:
                    r = _Resume(fw, step, path, rec.at)
                    self.resumes.append(r)
                if r.state != "pending":
                    return []
                r.state = "ok"
                self._steps_since_resume = 0
                r.step = r.step if r.step is not None else (step if step is not None else _step_in(path))
                if fw == "twin" and path:
                    r.path = path
                r.path = r.path or path
                return [self._ev("resumed", rec, step=r.step, path=r.path)]
        for i, pattern in enumerate(_NO_CHECKPOINT):
            if m := pattern.search(body):
                self._consumed = True
                if i == 0:
                    path = m.group("path")
                    r = _Resume("megatron", None, path.rsplit("/", 1)[0] if "/" in path else path, rec.at)
                    self.resumes.append(r)
                    out.append(self._ev("resume_attempt", rec, path=r.path))
                    self._pending_no_ckpt = r
                    return out
                if i == 1:
                    r = self._pending_no_ckpt or _Resume("megatron", None, None, rec.at)
                    if r not in self.resumes:
                        self.resumes.append(r)
                    self._pending_no_ckpt = None
                    return self._fail(r, "no checkpoint found" + (f" at {r.path}" if r.path else "")
                                      + ": will not load any checkpoints and will start from random", rec)
                return []
        for fw, pattern in _RESUME_ATTEMPT:
            if m := pattern.search(body):
                self._consumed = True
                g = m.groupdict()
                path = g.get("path")
                if fw == "hf-trainer" and path is None:
                    if any(r.state == "pending" for r in self.resumes):
                        return []
                step = int(g["step"]) if g.get("step") else _step_in(path)
                if fw == "deepspeed" and path:
                    path = _ds_tag_dir(path)
                    step = step if step is not None else _step_in(path, tag=True)
                prev = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
                if prev is not None and (prev.path == path or fw == "deepspeed" and prev.framework == "deepspeed"):
                    return []
                r = _Resume(fw, step, path, rec.at)
                self.resumes.append(r)
                return [self._ev("resume_attempt", rec, step=step, path=path)]
        return out

    def _fail(self, r: _Resume, reason: str, rec: Record | None) -> list[TrainingEvent]:
        if r.state == "failed":
            return []
        r.state, r.reason = "failed", reason
        return [self._ev("resume_failed", rec, step=r.step, path=r.path, text=reason)]

    def _steps_started(self, rec: Record) -> list[TrainingEvent]:
        out: list[TrainingEvent] = []
        for r in self.resumes:
            if r.state != "pending":
                continue
            if r.framework in _FRAMEWORK_PRINTS_SUCCESS:
                out += self._fail(r, f"training steps without the success line ({_framework_ok_line(r.framework)})", rec)
            else:
                r.state = "ok"
                out.append(self._ev("resumed", rec, step=r.step, path=r.path))
        return out

    # saves
    def _save(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        at = rec.at or _stamp(body) or self._last_at
        for fw, pattern in _SAVE_START:
            if m := pattern.search(body):
                self._consumed = True
                step = int(m.group("step"))
                open_ = self._open_save()
                if fw == "deepspeed" and open_ is not None and open_.step == step:
                    open_.started = open_.started or _stamp(body)
                    return []
                self.saves.append(_Save(step, m.groupdict().get("path"), fw, started=_stamp(body) or rec.at))
                return [self._ev("checkpoint_started", rec, step=step, path=m.groupdict().get("path"))]
        if re.search(r"\[Torch\] Saving \S", body):
            self._consumed = True
            return []
        if m := _SAVE_SHARD.search(body):
            self._consumed = True
            s = self._open_save() or self._last_save_for(m.group("step"))
            step = int(m.group("step")) if m.group("step") else _step_in(m.group("path") or "", tag=False)
            if s is None:
                s = _Save(step, _ds_tag_dir(m.group("path")) if m.group("path") else f"global_step{step}", "deepspeed",
                          started=None)
                self.saves.append(s)
            if m.group("path") and s.path is None:
                s.path = _ds_tag_dir(m.group("path"))
            shard_at = _stamp(body) or rec.at
            if shard_at is not None:
                s.last_shard = max(s.last_shard, shard_at) if s.last_shard else shard_at
            if s.framework == "deepspeed" and m.group("step"):
                s.done = True
            if s.started and s.last_shard:
                s.duration_s = round((s.last_shard - s.started).total_seconds(), 3)
            if s.done and s.framework == "deepspeed":
                s.emitted = True
                return [self._ev("checkpoint_saved", rec, step=s.step, path=s.path, duration_s=s.duration_s)]
            return []
        if m := _MEGATRON_DONE.search(body):
            step = int(m.group("step"))
            s = self._open_save()
            if s is None or s.step != step:
                s = _Save(step, m.group("path"), "megatron")
                self.saves.append(s)
            s.done, s.emitted = True, True
            s.path = m.group("path") or s.path
            if s.started and s.last_shard and s.duration_s is None:
                s.duration_s = round((s.last_shard - s.started).total_seconds(), 3)
            return [self._ev("checkpoint_saved", rec, step=step, path=s.path, duration_s=s.duration_s)]
        if m := _SAVE_TIMER.search(body):
            done = [s for s in self.saves if s.done]
            if done and done[-1].framework == "megatron":
                secs = float(m.group("max") or m.group("one")) / 1000.0
                done[-1].duration_s = round(secs, 3)
                return [self._ev("checkpoint_saved", rec, step=done[-1].step, path=done[-1].path,
                                 duration_s=done[-1].duration_s)]
            return []
        if m := _HF_SAVE.search(body):
            path = m.group("path").rstrip(".")
            step = _step_in(path) if re.search(r"checkpoint-\d+", path) else None
            if self.saves and self.saves[-1].path == path and self.saves[-1].done:
                return []
            self.saves.append(_Save(step, path, "hf-trainer", started=_stamp(body) or rec.at, done=True, emitted=True))
            return [self._ev("checkpoint_saved", rec, step=step, path=path)]
        if "global step" in body and (m := _LIGHTNING_SAVE.search(body)):
            path = m.group("path")
            step = _step_in(path)
            self.saves.append(_Save(step, path, "lightning", done=True, emitted=True))
            return [self._ev("checkpoint_saved", rec, step=step, path=path)]
        del at
        return []

    def _open_save(self) -> _Save | None:
        s = self.saves[-1] if self.saves else None
        return s if s is not None and not s.done else None

    def _last_save_for(self, step: str | None) -> _Save | None:
        if step is None or not self.saves:
            return None
        s = self.saves[-1]
        return s if s.step == int(step) and s.framework == "deepspeed" else None

    def _format_event(self, ev: TrainingEvent, rec: Record) -> list[TrainingEvent]:
        """A save / resume line only the profile's (or the twin's) patterns know."""
        if ev.kind == "checkpoint_saved":
            self.saves.append(_Save(ev.step, ev.path, "custom", done=True, emitted=True, duration_s=ev.duration_s))
            return [ev]
        r = next((r for r in reversed(self.resumes) if r.state == "pending"), None)
        if r is None:
            r = _Resume("custom", ev.step, ev.path, ev.at)
            self.resumes.append(r)
        r.state = "ok"
        r.step = ev.step if ev.step is not None else r.step
        r.path = ev.path or r.path
        return [replace(ev, step=r.step, path=r.path)]

def read_log(text: str, fmt: LogFormat | str = "auto") -> LogSummary:
    """Read a whole log (a file's text; lines starting with `# source:` are skipped)."""
    reader = LogReader(fmt)
    for line in text.split("\n"):
        if line.startswith("# source:"):
            continue
        reader.feed(line)
    reader.close()
    return reader.summary()


# -- helpers --------------------------------------------------------------------------------------

def _is_transport_line(msg: str) -> bool:
    return bool(_NET_USING.match(msg) or _USING_NETWORK.match(msg) or _P2P_PLUGIN.match(msg) or _NO_IB.match(msg))


def _fill_watchdog(err: LogError, m: re.Match[str], body: str) -> None:
    args = dict(re.findall(r"(\w+(?:\(ms\))?)=([^,\s)]+)", m.group("args")))
    err.seq = int(args["SeqNum"]) if "SeqNum" in args else None
    err.op_type = args.get("OpType")
    err.timeout_ms = int(args["Timeout(ms)"]) if "Timeout(ms)" in args else None
    err.ran_ms = int(m.group("ran"))
    ranks = [int(x.group("rank")) for x in _RANK_IN.finditer(body[: m.start()])]
    if ranks:
        err.rank = ranks[-1]


def _is_nccl_exception(line: str) -> bool:
    return bool(_COMM_ABORTED.search(line) or _DIST_BACKEND.search(line) or _WATCHDOG.search(line))


def _framework_of_frames(texts: list[str]) -> str | None:
    joined = " ".join(texts)
    for fw, needle in (("megatron", "megatron/"), ("hf-trainer", "transformers/trainer"),
                       ("lightning", "lightning"), ("deepspeed", "deepspeed/")):
        if needle in joined:
            return fw
    return None


def _framework_ok_line(fw: str) -> str:
    return {"megatron": "'successfully loaded checkpoint'", "hf-trainer": "'Continuing training from global step'",
            "lightning": "'Restored all states from the checkpoint'", "twin": "'resumed from checkpoint'"}.get(fw, "?")


def _step_in(path: str | None, tag: bool = False) -> int | None:
    if not path:
        return None
    m = None
    for m in _STEP_IN_PATH.finditer(path):
        pass
    if m is not None:
        return int(m.group("step"))
    if tag:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        return int(last) if last.isdigit() else None
    return None


def _ds_tag_dir(path: str) -> str:
    """`ckpt/global_step100/mp_rank_00_model_states.pt` → `ckpt/global_step100` (the checkpoint's tag dir)."""
    path = path.rstrip(".")
    if re.search(r"\.(?:pt|pth|bin|safetensors)$", path) and "/" in path:
        return path.rsplit("/", 1)[0]
    return path


def _stamp(body: str) -> datetime | None:
    m = _DS_STAMP.match(body) or _HF_STAMP.search(body)
    if not m:
        return None
    return datetime.strptime(f"{m.group(1)}.{m.group(2)}000", "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in version.split(".")) if version else None


def _is_progress_noise(body: str) -> bool:
    return bool(re.search(r"shards|CUDA graph|Capturing|Processed prompts|Downloading|Fetching|Map|Tokeniz|"
                          r"Validation|Evaluating|Testing|Predicting|Sanity Checking", body.split("|")[0]))


def _match_format(fmt: LogFormat, rec: Record, last_at: datetime | None) -> TrainingEvent | None:
    from drills.measure.logformats import _event

    for kind in ("checkpoint_saved", "resumed", "step"):
        for pattern in fmt.patterns.get(kind, ()):
            m = pattern.search(rec.body)
            if m:
                return _event(kind, m, rec.at or last_at, rec.raw)
    return None
