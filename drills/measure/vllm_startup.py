"""vLLM's startup, phase by phase, read from its own log: what a replica did between container start and Ready.

vLLM prints when a phase starts and, for most, how long it took. The lines, as the versions print them
(`tests/data/real/logs/vllm-*.log`):

| phase (key)              | starts with                                           | ends with (duration printed)                          |
|--------------------------|-------------------------------------------------------|-------------------------------------------------------|
| model load (model_load)  | `Starting to load model X...` (≥ 0.5.4)                | `Model loading took X GiB and S seconds` (≥ 0.8); `Loading model weights took X GB` (≤ 0.7, no time: read from the stamps) |
| weights (weights_load)   | —                                                      | `Loading weights took S seconds` (≥ 0.8, inside the model load) |
| torch.compile (compile)  | `Using cache directory: … for vLLM's torch.compile`    | `torch.compile takes|took S s in total` (V1; `graph compilation takes` in 0.7) |
| CUDA graphs (graph_capture) | `Capturing cudagraphs for decoding.` (0.6–0.8), `Capturing the model for CUDA graphs.` (≤ 0.5), `Capturing CUDA graph(s| shapes)` bars | `Graph capturing finished in S secs` |
| engine init (engine_init) | —                                                     | `init engine (profile, create kv cache, warmup model) took S seconds|s` |
| server (server_start)     | `Starting vLLM (API )?server on …`                    | uvicorn's `Application startup complete.` / `Uvicorn running on …` |

A line's time is the Kubernetes `--timestamps` stamp when the log was read with it, else vLLM's own
`INFO MM-DD HH:MM:SS` stamp (no year: only differences are used). Both line styles are read: vLLM ≤ 0.7
(`INFO 03-01 10:30:42 model_runner.py:1110] …`) and ≥ 0.8 (`INFO 06-02 11:03:55 [gpu_model_runner.py:1933] …`),
with or without a process prefix (`(EngineCore_DP0 pid=N) `, `(VllmWorkerProcess pid=N) `).

A startup that failed (`EngineCore failed to start`, `WorkerProc failed to start`, a V0 worker's `Exception in worker …`,
a CUDA OOM, a KV cache that does not fit, a model the Hub refused) says so (`failed`, the line) and has no phase in progress.
So does **any traceback before Ready** (issue 33: vLLM's front-end often dies with only a traceback, e.g. `RuntimeError:
Engine process failed to start. See stack trace for the root cause.`): its exception line is the failure (`Traceback (most
recent call last)` itself while the exception line is not there yet), unless a recognised failure line says more. A
server that still reaches Ready after a traceback did not fail. A phase that started and did not end when the
log was read is **in progress**: a replica stuck loading
weights names that phase, with how long it has run. A version line after the startup had begun (a restart in the
same log) starts a new one: the last startup is described. Pure: feed lines, read `summary()` / `breakdown()`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from drills.measure.logprefix import Record, split_records

__all__ = ["VllmStartup", "PHASE_LABELS", "read_startup"]

log = logging.getLogger(__name__)

# the phases that follow one another between container start and Ready, in order, with their report names
PHASE_LABELS = {"model_load": "model load", "compile": "torch.compile", "graph_capture": "CUDA graph capture",
                "server_start": "API server start"}

_STARTS = (  # (phase, pattern)
    ("model_load", re.compile(r"Starting to load model (?P<model>\S+?)(?:\.\.\.)?\s*$")),
    ("compile", re.compile(r"Using cache directory: .* for vLLM's torch\.compile")),
    ("graph_capture", re.compile(r"Capturing cudagraphs for decoding|Capturing the model for CUDA graphs|"
                                 r"^Capturing CUDA graph(?:s| shapes)\b")),
    ("server_start", re.compile(r"Starting vLLM (?:API )?server (?:\d+ )?on ")),  # newest: `Starting vLLM server on`
)
_ENDS = (  # (key, pattern); group s = seconds printed, gb = GiB
    ("model_load", re.compile(r"Model loading took (?P<gb>[\d.]+) Gi?B(?: memory)? and (?P<s>[\d.]+) (?:seconds|s)\b")),
    ("model_load", re.compile(r"Loading model weights took (?P<gb>[\d.]+) Gi?B")),
    ("weights_load", re.compile(r"Loading weights took (?P<s>[\d.]+) (?:seconds|s)\b")),
    ("download", re.compile(r"Time spent downloading weights for \S+: (?P<s>[\d.]+) seconds")),
    ("compile", re.compile(r"(?:torch\.compile|graph compilation) (?:takes|took) (?P<s>[\d.]+) s in total")),
    ("graph_capture", re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs?")),
    ("engine_init", re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) (?:seconds|s)\b")),
    ("server_start", re.compile(r"Application startup complete|Uvicorn running on")),
)
_VERSION = re.compile(r"vLLM API server version (?P<v>\d[\w.+-]*)|Initializing an? (?:V\d )?LLM engine \(v(?P<v2>\d[\w.+-]*?)\)"
                      r"|vLLM version (?P<v3>\d[\w.+-]*)"
                      r"|[\u2580-\u259f]\s+version (?P<v4>\d[\w.+-]*)\s*$")  # ≥ 0.2x: only in the ASCII-art banner
# the startup failed: the engine or a worker died (its traceback follows), or CUDA ran out of memory while loading
# (≤ 0.8 V1 `EngineCore hit an exception`, the same branch of run_engine_core; V0 Ray `Error executing method` of a startup
# step); the KV cache does not fit; the model could not be fetched from the Hub
_FAILED = re.compile(r"EngineCore failed to start|WorkerProc failed to start|Engine core initialization failed|"
                     r"EngineCore encountered a fatal error|"  # V1 run_engine_core: the engine died (EngineDeadError follows)
                     r"(?:^|[\s.])(?:Async)?EngineDeadError: |"  # the engine's death as the client raises it (class name)
                     r"Engine process failed to start|"
                     r"Exception in worker \S+ while processing method \w+: |torch\.OutOfMemoryError: CUDA out of memory|"
                     r"EngineCore hit an exception|Error executing method (?:init_device|load_model|"
                     r"determine_num_available_blocks|initialize_cache)\b|No available memory for the cache blocks|"
                     r"larger than the maximum number of tokens that can be stored in KV cache|"
                     r"\b(?:RepositoryNotFound|GatedRepo|RevisionNotFound|LocalEntryNotFound)Error: ")
# IPython (a notebook) names the exception before the header: `RuntimeError      Traceback (most recent call last)`
_TB_START = re.compile(r"^\s*Traceback \(most recent call last\):|^\s*File \"[^\"]+\", line \d+, in |"
                       r"^[A-Za-z_][\w.]*\s{2,}Traceback \(most recent call last\)\s*$")
_TB_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?::\s.*)?$")
# vLLM's own stamp; a wrapper's Python-logging one on the same clock (`INFO 2024-08-17 23:29:34,833 instructlab…`)
_STAMP = re.compile(r"(?:^|\s)(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) (?:\d{4}-)?(?P<mo>\d\d)-(?P<d>\d\d) "
                    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:,(?P<ms>\d{3}))?\b")


@dataclass
class VllmStartup:
    """What one replica's vLLM log said about its startup so far."""

    version: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # phase/key → seconds (printed, or from the stamps)
    started: dict[str, datetime] = field(default_factory=dict)  # phase → when its start line was printed
    ended: dict[str, datetime] = field(default_factory=dict)
    model_load_gb: float | None = None
    ready_at: datetime | None = None
    failed: str | None = None  # the line that said the startup failed (no phase is then in progress)
    failed_by_traceback: bool = False  # `failed` is a traceback's (a recognised failure line replaces it)
    _in_traceback: bool = False
    first_at: datetime | None = None
    last_at: datetime | None = None
    lines: int = 0  # lines that were vLLM's startup lines

    def feed(self, line: str) -> None:
        for rec in split_records(line):
            self.record(rec)

    def record(self, rec: Record) -> bool:
        """Read one record; True when it was a startup line (a phase's start or end, or the version)."""
        body = rec.body.strip()
        at = rec.at or _vllm_stamp(body)
        if at is not None:
            self.first_at = self.first_at or at
            self.last_at = at
        if m := _VERSION.search(body):
            # the API server's version line after a startup had begun is a restart (an engine's `Initializing … (vX)` is
            # not: data-parallel engine cores print it while another already loads)
            if m["v2"] is None and (self.ready or self.failed or self.started or self.ended or self.seconds):
                self.__init__(first_at=self.first_at, last_at=self.last_at, lines=self.lines)
            self.version = self.version or next(v for v in m.groups() if v)
            return True
        # after Ready it is no startup failure; a traceback's source line (`raise ValueError("No available …`) is not the message
        if (m := _FAILED.search(body)) and not self.ready and not body[:m.start()].endswith(('("', "('")):
            if self.failed is None or self.failed_by_traceback:
                self.failed, self.failed_by_traceback = body[m.start():][:300], False
            return True
        if self._traceback(_strip_level(body)):
            return True
        for phase, pattern in _STARTS:
            if pattern.search(body):
                if at is not None and phase not in self.started:
                    self.started[phase] = at
                self.lines += 1
                return True
        for key, pattern in _ENDS:
            if not (m := pattern.search(body)):
                continue
            self.lines += 1
            g = m.groupdict()
            if key == "model_load" and g.get("gb"):
                self.model_load_gb = self.model_load_gb or float(g["gb"])
            if at is not None and key not in self.ended:
                self.ended[key] = at
            if key == "server_start":
                self.ready_at = self.ready_at or at or datetime.min.replace(tzinfo=timezone.utc)
                if self.failed_by_traceback:  # it got to Ready after all: that traceback did not end the startup
                    self.failed, self.failed_by_traceback = None, False
            if g.get("s") is not None:
                self.seconds.setdefault(key, float(g["s"]))
            elif key in self.started and at is not None:  # no duration printed: from the stamps
                self.seconds.setdefault(key, max(0.0, (at - self.started[key]).total_seconds()))
            return True
        return False

    def _traceback(self, body: str) -> bool:
        """A traceback before Ready fails the startup: its exception line, once it comes, is the failure."""
        if self.ready:
            return False
        if _TB_START.match(body):
            self._in_traceback = True
            if self.failed is None:
                self.failed, self.failed_by_traceback = "Traceback (most recent call last) during start-up", True
            return True
        if self._in_traceback and _TB_EXCEPTION.match(body):
            self._in_traceback = False
            if self.failed_by_traceback:
                self.failed = body[:300]
            return True
        return False

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    def in_progress(self, now: datetime | None = None) -> tuple[str, float] | None:
        """The phase whose start line was printed and whose end line was not: (phase, seconds so far)."""
        open_ = [(at, p) for p, at in self.started.items() if p not in self.ended]
        if not open_ or self.ready or self.failed:
            return None
        at, phase = max(open_)
        until = now or self.last_at or at
        return phase, max(0.0, (until - at).total_seconds())

    def breakdown(self, total_s: float | None = None, now: datetime | None = None) -> dict[str, float]:
        """Seconds per phase of PHASE_LABELS that the log shows (finished, or in progress until `now`)."""
        out = {p: self.seconds[p] for p in PHASE_LABELS if p in self.seconds}
        if "server_start" in self.started and "server_start" in self.ended:
            out["server_start"] = max(0.0, (self.ended["server_start"] - self.started["server_start"]).total_seconds())
        if (running := self.in_progress(now)) is not None:
            out[running[0]] = running[1]
        if total_s is not None:
            out = {p: min(s, total_s) for p, s in out.items()}
        return out

    def summary(self, now: datetime | None = None) -> dict:
        """The facts a record or `drills validate` shows (keys absent when the log does not say); a phase
        in progress runs until `now` (default: the log's last line)."""
        out: dict = {}
        if self.version:
            out["version"] = self.version
        for key in ("download", "weights_load", "model_load", "compile", "graph_capture", "engine_init"):
            if key in self.seconds:
                out[f"{key}_s"] = round(self.seconds[key], 6)
        if self.model_load_gb is not None:
            out["model_load_gb"] = self.model_load_gb
        if self.ready:
            out["ready"] = True
        if self.failed:
            out["failed"] = self.failed
        if (running := self.in_progress(now)) is not None:
            out["in_progress"] = {"phase": running[0], "seconds": round(running[1], 3)}
        return out


def read_startup(text: str) -> VllmStartup:
    """A whole log's startup (lines starting with `# source:` are skipped)."""
    startup = VllmStartup()
    for line in text.split("\n"):
        if not line.startswith("# source:"):
            startup.feed(line)
    return startup


def _strip_level(body: str) -> str:
    """A traceback line as vLLM's logger prints it (`ERROR 01-02 03:04:05 [core.py:1] Traceback …`) or bare."""
    m = re.match(r"^(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})? "
                 r"(?:\[[^\]]+\]|\S+\.py:\d+\]) ?", body)
    return body[m.end():] if m else body


def _vllm_stamp(body: str) -> datetime | None:
    """vLLM's `INFO MM-DD HH:MM:SS` stamp, in a leap year (only differences between lines are used)."""
    m = _STAMP.search(body)
    if not m:
        return None
    return datetime(2000, int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), int(m["ms"] or 0) * 1000,
                    tzinfo=timezone.utc)
