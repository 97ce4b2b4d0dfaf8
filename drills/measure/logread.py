"""The one reader of what real clusters print: training, NCCL and vLLM logs, line by line.

Used by the monitors (one `LogReader` per pod) and by `read_log` (a whole file, as the corpus tests and
`drills validate` do). Each idea is its own module; the reader composes them:

- `logprefix`: prefixes peeled (Kubernetes stamps, launcher ranks, Ray/vLLM process names, NCCL's own),
  several records per line split (tqdm redraws, records glued to a progress bar);
- `lognccl`: the NCCL transport per process and rank, classified errors;
- `logelastic`: dead workers as torchrun's elastic agent reports them (`failed (exitcode: …)`, ChildFailedError box);
- `logresume`: resumes (an attempt counts only when it succeeded), tracebacks;
- `logrestore`: state-dict mismatches, NeMo 0.x restores, torchtitan's start step after a load;
- `logsave`: checkpoint saves;
- `vllm_startup`: vLLM's startup phases;
- here: **framework detection** (`log_format: auto`): signature lines weighted per framework; DeepSpeed
  under Megatron/HF/Lightning counts as the outer framework, NCCL-only logs are `nccl`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from drills.measure.logelastic import ElasticReading
from drills.measure.logformats import LogFormat, TrainingEvent, preset
from drills.measure.logloss import read_loss, read_skipped
from drills.measure.loggpu import GpuReading
from drills.measure.lognccl import _TB_FRAME, _TB_START, _VERSION, LogError, NcclProcess, NcclReading, _version_tuple
from drills.measure.logprefix import Record, split_records, split_timestamp  # noqa: F401 (re-exported)
from drills.measure.logrestore import RestoreReading
from drills.measure.logresume import (_FRAMEWORK_PRINTS_SUCCESS, CheckpointReading, _framework_ok_line, _Resume,
                                      _Traceback)
from drills.measure.logsave import SaveReading, _Save
from drills.measure.logunknown import UnknownReading
from drills.measure.logstacks import PropagatedWarns
from drills.measure.vllm_startup import VllmStartup

__all__ = ["Record", "LogReader", "LogSummary", "NcclProcess", "LogError", "read_log", "split_records",
           "detect_framework", "FRAMEWORKS"]

FRAMEWORKS = ("hf-trainer", "megatron", "deepspeed", "lightning", "torchtitan", "mmengine", "vllm", "twin", "nccl")

# -- framework signatures -----------------------------------------------------------------------

_SIGNS: tuple[tuple[str, int, re.Pattern[str]], ...] = tuple((fw, w, re.compile(p)) for fw, w, p in (
    ("twin", 10, r"^step=\d+ loss=|^checkpoint saved step=\d+|^resumed from checkpoint step=\d+"),
    ("hf-trainer", 3, r"\[(?:INFO|WARNING|ERROR)\|[\w.]+\.py:\d+\] "),
    ("hf-trainer", 3, r"\{'loss': .*'epoch': |\{'train_runtime': "),
    ("hf-trainer", 3, r"transformers/trainer\.py|Continuing training from global step|Saving model checkpoint to "),
    ("hf-trainer", 1, r"^\s*\d+%\|[^|]*\|\s*\d+/\d+ \["),
    ("hf-trainer", 2, r"\] \[axolotl\.[\w.]+:\d+\] \[PID:\d+\]"),  # axolotl's logger (it runs the HF Trainer)
    # the iteration line, bare or behind Megatron-Core's `[2025-05-09 06:11:17] ` stamp
    ("megatron", 5, r"^\s*(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]\s*)?iteration\s+\d+/\s*\d+ \||"
                    r"(?:^\s*saving|successfully saved) checkpoint (?:at|from) iteration"),
    ("megatron", 5, r"loading checkpoint from \S+ at iteration|\(min, max\) time across ranks|latest_checkpointed_iteration"),
    ("megatron", 3, r"megatron/|global rank \d+ is loading checkpoint|-+ end of arguments -+|model_optim_rng\.pt"),
    ("megatron", 2, r"^\s+[\w/-]+ \.{4,}\s*: \(\d+\.\d+, \d+\.\d+\)$"),  # a `(min, max) time across ranks` timer
    ("megatron", 5, r"AssertionError: Rank \d+: found NaN in local grad norm"),  # Megatron's own gradient check
    # the iteration line's fields, there even when a terminal wrapped its start onto the line before (Megatron spells
    # `lm loss:`; Megatron-DeepSpeed's `lm_loss:` line is DeepSpeed's, as its `samples/sec:` start says)
    ("megatron", 5, r"\|\s*lm loss: [-+\w.]+ \|.*\| number of nan iterations:\s+\d+ \|"),
    ("deepspeed", 2, r"\[(?:INFO|WARNING)\] \[[\w.]+\.py:\d+:\w+\]|ZeRO state_dicts|zero partition checkpoints"),
    ("deepspeed", 2, r"deepspeed/|deepspeed\.runtime\.|\[Torch\] (?:Checkpoint|Saving|Saved)|^steps: \d+ loss: "),
    ("lightning", 5, r"Restoring states from the checkpoint|Restored all states|^Epoch \d+:\s+\d+%\|"),
    ("lightning", 3, r"pytorch_lightning[/\\]|lightning[/\\](?:pytorch|fabric)[/\\]|GPU available: (?:True|False)|"
                     r"LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|Initializing distributed: GLOBAL_RANK"),
    ("lightning", 2, r"^distributed_backend=nccl|All distributed processes registered"),
    ("lightning", 5, r"Epoch \d+, global step \d+: \S+ (?:was not in top \d+|reached )"),  # ModelCheckpoint's verdict
    ("lightning", 5, r"^\[NeMo [IWE] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d "),  # NeMo's logger (NeMo runs on Lightning)
    ("torchtitan", 5, r"^\[titan\] \d{4}-\d\d-\d\d |Loading the checkpoint at step \d+|Finished (?:loading|saving) the checkpoint"),
    ("mmengine", 5, r"^(?:\d{4}/)?\d\d/\d\d \d\d:\d\d:\d\d - mmengine - (?:INFO|WARNING|ERROR|DEBUG) - "),
    # mmcv's runner (mmengine's predecessor) logs under the OpenMMLab package's name: `… 01:32:34,502 - mmocr - INFO - `
    ("mmengine", 5, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - mm\w+ - (?:INFO|WARNING|ERROR|DEBUG) - "),
    ("vllm", 5, r"\((?:VllmWorkerProcess|EngineCore\w*|Worker_TP\d+|APIServer|RayWorkerWrapper) pid=\d+\)"),
    ("vllm", 3, r"(?:^|\s)(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d (?:\[[\w.]+:\d+\]|[\w.]+\.py:\d+\]) |"
                r"Loading safetensors checkpoint shards|vllm"),
    ("vllm", 1, r"^INFO:\s+(?:Started server process|Waiting for application startup|Application startup complete|"
                r"Uvicorn running on)"),  # uvicorn, as vLLM's OpenAI server runs it
))
# the rest of PyTorch's CUDA error message, printed after its exception line
_CUDA_ERROR_TAIL = re.compile(r"^(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing "
                              r"CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`)")
_NCCL_SIGN = re.compile(r"Watchdog caught collective|ProcessGroupNCCL|NCCL communicator|DistBackendError|NCCL version|"
                        r"watchdog thread terminated with exception|NCCL communication aborted|"
                        r"NCCL operation \w+\(")  # XLA's report of a failed NCCL call
_VLLM_PROCS = re.compile(r"^(?:VllmWorker\w*|EngineCore\w*|Worker\w*|APIServer|RayWorkerWrapper|RayWorkerVllm)$")
_HOSTS = ("hf-trainer", "megatron", "lightning", "torchtitan", "mmengine", "vllm", "twin")


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
    unknown_errors: tuple[str, ...] = ()  # error-like lines no recogniser classified (`logunknown`)
    losses: tuple[tuple[float | None, float | None], ...] = ()  # (loss, grad norm) per line that printed one
    skipped_steps: int | None = None  # optimizer steps the framework said it skipped (None: it said nothing of it)


class LogReader(NcclReading, GpuReading, ElasticReading, CheckpointReading, RestoreReading, SaveReading,
                UnknownReading):
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
        self._seen_root: set = set()
        self._propagated = PropagatedWarns()
        self._box: dict = {}
        self._ib_fatal_hosts: set = set()
        self._workers: dict = {}
        self._wrapped: tuple[str, int] | None = None  # a hard-wrapped watchdog message's start
        self._terminate_open = False  # a `terminate called` line seen, its what() not yet
        self._proxy_failure: Record | None = None  # the first `[Proxy Service N] Failed to execute …` WARN
        self._tb: _Traceback | None = None
        self._pending_no_ckpt: _Resume | None = None
        self._titan_folder: str | None = None
        self._last_at: datetime | None = None
        self._consumed = False
        self._known = False
        self._steps_since_resume = 0
        self.losses: list[tuple[float | None, float | None]] = []
        self.skipped_steps: int | None = None
        self.unknown: list[tuple[datetime | None, str, str]] = []  # error-like records no recogniser classified
        self._known_bodies: set[str] = set()
        self._gpu_seen: set = set()
        self._gpu_held = None
        self._in_traceback = False

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
        out = self._close_traceback(None) + self._unexplained_proxy_failure()
        for r in self.resumes:
            if r.state == "pending" and (r.framework in _FRAMEWORK_PRINTS_SUCCESS or r.zero_partitions):
                out += self._fail(r, f"no success line after the attempt ({_framework_ok_line(r)})", None)
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
                          resume, saves, self.startup.summary(), self.unclassified, self.steps,
                          tuple(u[1] for u in self.unknown), tuple(self.losses), self.skipped_steps)

    # -- one record -------------------------------------------------------------------------------
    def _ev(self, kind: str, rec: Record | None, **kw) -> TrainingEvent:
        at = rec.at if rec is not None else None
        return TrainingEvent(kind=kind, at=at or self._last_at, line=rec.raw if rec else "", **kw)  # type: ignore[arg-type]

    def _record(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        signed = self._score(rec)
        self._consumed = False
        in_traceback = self._tb is not None and not self._tb.closed
        self._in_traceback = in_traceback  # the GPU reader leaves a traceback's CUDA error to the traceback reader
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
        if not any(e.kind == "error" for e in out):
            out += self._gpu(rec)
        out += self._elastic(rec)
        out += self._resume(rec)
        if not self._consumed:
            out += self._restore(rec)
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
        out = self._loss(rec, out)
        if any(e.kind in ("resume_attempt", "resumed") for e in out):
            self.withdraw_saves()  # a restarted process: the saves the old one logged never got a step after them
        if any(e.kind == "step" for e in out):
            self._steps_since_resume += 1
            out += self.confirm_saves(rec)  # training stepped past an HF/Lightning save: it completed
            out += self._steps_started(rec)
        self._known = self._known or self._consumed
        self._withdraw_unknown(out)
        self._check_unknown(rec, out, in_traceback)
        return out

    def _loss(self, rec: Record, out: list[TrainingEvent]) -> list[TrainingEvent]:
        """The loss a record printed (`logloss`): on its step event, else as a `loss` event of its own."""
        if rec.nccl is None and (n := read_skipped(rec.body)) is not None:
            self.skipped_steps = (self.skipped_steps or 0) + n
        reading = read_loss(rec.body) if rec.nccl is None else None
        if reading is None:
            return out
        self.losses.append((reading.loss, reading.grad_norm))
        if any(e.kind == "step" for e in out):
            return [replace(e, loss=reading.loss, grad_norm=reading.grad_norm) if e.kind == "step" else e for e in out]
        return out + [self._ev("loss", rec, loss=reading.loss, grad_norm=reading.grad_norm)]

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
def read_log(text: str, fmt: LogFormat | str = "auto") -> LogSummary:
    """Read a whole log (a file's text; lines starting with `# source:` are skipped)."""
    reader = LogReader(fmt)
    for line in text.split("\n"):
        if line.startswith("# source:"):
            continue
        reader.feed(line)
    reader.close()
    return reader.summary()



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
