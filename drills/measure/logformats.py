"""Training-log formats as data: regex presets that turn one log line into a TrainingEvent.

A check only needs five facts from a training log: a step ran (with throughput), a checkpoint was
saved, the job resumed from a checkpoint, which NCCL transport it uses, and NCCL warnings. Each
preset maps those kinds to regexes with named groups; `parse_line` is the one parser.

The twin's format (the twin's training workload writes exactly these lines)::

    step=6150 loss=1.234 samples_per_s=812.5 step_time_s=0.63
    checkpoint saved step=6000 duration_s=41.2 path=/ckpt/step-6000
    resumed from checkpoint step=6000 path=/ckpt/step-6000

NCCL lines are recognised in every preset, as NCCL prints them with `NCCL_DEBUG=INFO`::

    node-1:42:42 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>
    node-1:42:42 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
    node-1:42:99 [0] NCCL WARN ... Timeout ...       (any `NCCL WARN`, and PyTorch's NCCL watchdog timeout)

The other presets follow the real frameworks: Hugging Face Trainer (steps from the tqdm bar,
`Saving model checkpoint to …/checkpoint-6000`, `Continuing training from global step 6000`),
Megatron-LM (` iteration 6150/ 100000 | … | elapsed time per iteration (ms): 630.1 | …`,
`successfully saved checkpoint from iteration 6000 to …`, `loading checkpoint from … at iteration
6000`) and DeepSpeed (`[Rank 0] step=6150, skipped=0, …`, `Saving model checkpoint: …/global_step6000/…` and
`Checkpoint global_step6000 is ready now!`, `loading checkpoint … global_step6000`).
DeepSpeed's two save lines both give a `checkpoint_saved` event here: consumers key checkpoints by step
(`LogReader` reads `Saving model checkpoint:` as the save's start, done at `is ready now!`). Megatron prints both "loading … at iteration N" and
"successfully loaded … at iteration N": both are `resumed` events for the same step.

Lines read with the Kubernetes `timestamps=true` option start with an RFC 3339 (nano) stamp and a
space; `parse_line` strips it into `TrainingEvent.at`. A tqdm line holding several `\\r` updates is
read by its last update.

Named groups a pattern may use: step, samples_per_s, step_time_s, step_time_ms, it_per_s, s_per_it,
global_batch, duration_s, path, transport, devices, text.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Mapping

from drills.measure.logprefix import split_timestamp

__all__ = [
    "EventKind",
    "TrainingEvent",
    "LogFormat",
    "PRESETS",
    "EVENT_KINDS",
    "preset",
    "custom_format",
    "parse_line",
    "parse_lines",
    "split_timestamp",
]

log = logging.getLogger(__name__)

EventKind = Literal["step", "checkpoint_saved", "resumed", "resume_attempt", "nccl_transport", "nccl_warn",
                    # from `drills.measure.logread.LogReader` (facts that need more than one line):
                    "checkpoint_started", "resume_failed", "error", "vllm_phase",
                    "loss",  # a loss line without a step (the HF Trainer's log dict): `logloss`
                    "skipped"]  # a line saying optimizer steps were skipped, without a step (DeepSpeed's OVERFLOW)
EVENT_KINDS: tuple[str, ...] = ("step", "checkpoint_saved", "resumed", "resume_attempt", "nccl_transport", "nccl_warn")


@dataclass(frozen=True)
class TrainingEvent:
    """One fact read from one log line; fields that the line does not carry are None."""

    kind: EventKind
    step: int | None = None
    samples_per_s: float | None = None
    step_time_s: float | None = None
    duration_s: float | None = None
    path: str | None = None
    transport: str | None = None  # "IB", "Socket", … as NCCL names its NET plugin
    devices: tuple[str, ...] = ()
    text: str | None = None
    at: datetime | None = None  # from the Kubernetes timestamp prefix, when present
    line: str = field(default="", repr=False, compare=False)
    rank: int | None = None  # the launcher's rank, when a prefix or an NCCL channel line names it
    error: str | None = None  # kind "error": ib_completion, watchdog_timeout, traceback, …
    loss: float | None = None  # kinds "step" and "loss": the training loss the line printed (NaN/inf kept)
    grad_norm: float | None = None  # … and the gradient norm, where the framework logs it
    skipped: int | None = None  # kinds "step" and "skipped": optimizer steps the line says were skipped (`logloss`)

    @property
    def is_rdma(self) -> bool:
        """NCCL over IB verbs (InfiniBand or RoCE) rather than the TCP socket fallback."""
        return self.kind == "nccl_transport" and self.transport is not None and self.transport != "Socket"

    @property
    def is_timeout(self) -> bool:
        return self.kind == "nccl_warn" and "timeout" in (self.text or "").lower()


@dataclass(frozen=True)
class LogFormat:
    """A named set of compiled patterns per event kind; the first pattern that matches wins."""

    name: str
    patterns: Mapping[str, tuple[re.Pattern[str], ...]]


# NCCL prints the same lines whatever framework drives it.
_NCCL = {
    "nccl_transport": (
        r"NCCL INFO NET/(?P<transport>\w+)\s*: Using (?P<devices>.*?)\s*(?:;\s*OOB\b.*)?$",
        r"NCCL INFO Using network (?P<transport>\w+)",
        r"NCCL INFO (?:Channel|Ring) \d+.*? via NET/(?P<transport>[^/\s]+)/\d+",
    ),
    "nccl_warn": (
        r"NCCL WARN\s*(?P<text>.*)$",
        r"(?P<text>Watchdog caught collective operation timeout.*)$",
    ),
}

_NUM = r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"

PRESETS: dict[str, dict[str, tuple[str, ...]]] = {
    "twin": {
        "step": (
            rf"(?:^|\s)step=(?P<step>\d+)\b(?:.*?\bsamples_per_s=(?P<samples_per_s>{_NUM}))?"
            rf"(?:.*?\bstep_time_s=(?P<step_time_s>{_NUM}))?",
        ),
        "checkpoint_saved": (
            rf"checkpoint saved step=(?P<step>\d+)(?:.*?\bduration_s=(?P<duration_s>{_NUM}))?"
            r"(?:.*?\bpath=(?P<path>\S+))?",
        ),
        "resumed": (r"resumed from checkpoint step=(?P<step>\d+)(?:.*?\bpath=(?P<path>\S+))?",),
    },
    "hf-trainer": {
        # tqdm: " 51%|█████     | 6150/12000 [1:02:03<59:01,  1.65it/s]" (or "s/it" when slow); a bar
        # with a description ("Loading checkpoint shards: …") is not the training loop
        "step": (
            rf"^\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+\s*\[[^\]]*?,\s*(?:(?P<it_per_s>{_NUM})it/s|(?P<s_per_it>{_NUM})s/it)",
            r"^\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+\s*\[",
        ),
        "checkpoint_saved": (r"Saving model checkpoint to (?P<path>\S*?checkpoint-(?P<step>\d+))\S*",),
        "resumed": (r"Continuing training from global step (?P<step>\d+)",),
        "resume_attempt": (r"Loading model from (?P<path>\S*?checkpoint-(?P<step>\d+))",),
    },
    "lightning": {
        # "Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37, 14.80it/s, v_num=0, train_loss=0.5]"
        "step": (
            rf"^Epoch \d+:\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+\s*\[[^\]]*?,\s*(?:(?P<it_per_s>{_NUM})it/s|(?P<s_per_it>{_NUM})s/it)",
            r"^Epoch \d+:\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+\s*\[",
        ),
        "checkpoint_saved": (r"global step (?P<step>\d+):.*saving model to '?(?P<path>[^'\s]+)",),
        "resumed": (r"Restored all states from the checkpoint(?: file| path)? at (?P<path>\S*?step=(?P<step>\d+)\S*)",),
        "resume_attempt": (r"Restoring states from the checkpoint(?: path)? at (?P<path>\S*?step=(?P<step>\d+)\S*)",),
    },
    "megatron": {
        "step": (
            rf"iteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|"
            rf"(?:.*?elapsed time per iteration \(ms\):\s*(?P<step_time_ms>{_NUM}))?"
            r"(?:.*?global batch size:\s*(?P<global_batch>\d+))?",
        ),
        "checkpoint_saved": (r"successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+)(?: to (?P<path>\S+))?",),
        # only the success line is a resume; "loading checkpoint from … at iteration N" is an attempt
        "resumed": (r"successfully loaded (?:\w+ )?checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)",),
        "resume_attempt": (r"(?<!successfully )loading (?:\w+ )?checkpoint from (?P<path>\S+).*?at iteration\s+(?P<step>\d+)",),
    },
    "deepspeed": {
        "step": (
            rf"global_step=(?P<step>\d+), RunningAvgSamplesPerSec=(?P<samples_per_s>{_NUM})",
            r"\[Rank \d+\] step=(?P<step>\d+), skipped=",
            rf"^steps: (?P<step>\d+) loss: \S+ iter time \(s\): (?P<step_time_s>{_NUM}) samples/sec: (?P<samples_per_s>{_NUM})",
        ),
        "checkpoint_saved": (
            r"Checkpoint (?P<path>global_step(?P<step>\d+)) is ready now",
            r"Saving model checkpoint: (?P<path>\S*?global_step(?P<step>\d+)\S*)",
        ),
        "resumed": (r"\[Torch\] Loaded checkpoint from (?P<path>\S*global_step(?P<step>\d+)\S*)",),
        "resume_attempt": (r"[Ll]oading (?:model )?checkpoint\b.*?(?P<path>\S*global_step(?P<step>\d+)\S*)",),
    },
    "mmengine": {
        # iteration mode: "Iter(train) [10000/10000]  lr: …" (epoch mode prints no global step)
        "step": (r" - mmengine - \w+ - Iter\(train\)\s*\[\s*(?P<step>\d+)/\d+\]",),
        "resumed": (r"resumed epoch: \d+, iter: (?P<step>\d+)",),
    },
    "vllm": {},
}
# `auto` (the default for real targets): every preset's patterns; `drills.measure.logread` tells which matched
PRESETS["auto"] = {kind: tuple(p for name in ("twin", "hf-trainer", "lightning", "megatron", "deepspeed", "mmengine")
                               for p in PRESETS[name].get(kind, ()))
                   for kind in ("step", "checkpoint_saved", "resumed", "resume_attempt")}


def preset(name: str) -> LogFormat:
    """The built-in format `name` (twin, hf-trainer, megatron, deepspeed), NCCL patterns included."""
    if name not in PRESETS:
        raise KeyError(f"unknown log format {name!r} (known: {', '.join(PRESETS)})")
    return _preset(name)


@functools.lru_cache(maxsize=None)
def _preset(name: str) -> LogFormat:
    """A preset compiled once per process (every log reader, one per pod, asks for it; ~40 patterns to compile
    that the `re` module's own cache does not keep); a LogFormat is frozen and its patterns are only read."""
    return _compile(name, PRESETS[name])


def custom_format(patterns: Mapping[str, str | list[str] | tuple[str, ...]], base: str | None = None) -> LogFormat:
    """A format from profile regexes (kind → pattern or patterns), layered over preset `base` if given.

    Raises ValueError naming the kind when a pattern does not compile or lacks a needed group.
    """
    merged: dict[str, tuple[str, ...]] = dict(PRESETS[base]) if base else {}
    for kind, value in patterns.items():
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {kind!r} (known: {', '.join(EVENT_KINDS)})")
        merged[kind] = (value,) if isinstance(value, str) else tuple(value)
    try:
        fmt = _compile(f"custom({base})" if base else "custom", merged)
    except re.error as err:
        raise ValueError(f"pattern {err.pattern!r} does not compile: {err.msg}") from None
    for kind in ("step", "checkpoint_saved", "resumed", "resume_attempt"):
        for pattern in fmt.patterns.get(kind, ()):
            if "step" not in pattern.groupindex:
                raise ValueError(f"{kind} pattern {pattern.pattern!r} needs a (?P<step>...) group")
    return fmt


def parse_line(fmt: LogFormat | str, line: str) -> TrainingEvent | None:
    """Read one log line; None when it carries none of the facts the drills use."""
    if isinstance(fmt, str):
        fmt = preset(fmt)
    at, body = split_timestamp(line.rstrip("\r\n"))
    if "\r" in body:  # tqdm redraws in place: the last update is the current one
        body = next((seg for seg in reversed(body.split("\r")) if seg.strip()), "")
    # NCCL first: its lines can contain "step=" in some wrappers but never mean a training step.
    for kind in ("nccl_transport", "nccl_warn", "checkpoint_saved", "resumed", "resume_attempt", "step"):
        for pattern in fmt.patterns.get(kind, ()):
            match = pattern.search(body)
            if match:
                return _event(kind, match, at, line)
    return None


def parse_lines(fmt: LogFormat | str, lines) -> list[TrainingEvent]:
    """Every event in an iterable of lines (or one text blob), in order."""
    if isinstance(fmt, str):
        fmt = preset(fmt)
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [event for event in (parse_line(fmt, line) for line in lines) if event is not None]


def _compile(name: str, kinds: Mapping[str, tuple[str, ...]]) -> LogFormat:
    merged = {**_NCCL, **kinds}
    return LogFormat(name=name, patterns={kind: tuple(re.compile(p) for p in pats) for kind, pats in merged.items()})


def _event(kind: str, match: re.Match[str], at: datetime | None, line: str) -> TrainingEvent:
    groups = {k: v for k, v in match.groupdict().items() if v is not None}
    step = int(groups["step"]) if "step" in groups else None
    step_time = _float(groups.get("step_time_s"))
    if step_time is None and "step_time_ms" in groups:
        step_time = float(groups["step_time_ms"]) / 1000.0
    if step_time is None and "it_per_s" in groups and float(groups["it_per_s"]) > 0:
        step_time = 1.0 / float(groups["it_per_s"])
    if step_time is None and "s_per_it" in groups:
        step_time = float(groups["s_per_it"])
    samples = _float(groups.get("samples_per_s"))
    if samples is None and "global_batch" in groups and step_time:
        samples = int(groups["global_batch"]) / step_time
    devices = tuple(re.sub(r"^\[\d+\]", "", d) for d in groups.get("devices", "").split(";")[0].split()
                    if not re.fullmatch(r"\[[A-Z]+\]", d)) if kind == "nccl_transport" else ()
    return TrainingEvent(
        kind=kind,  # type: ignore[arg-type]
        step=step,
        samples_per_s=samples,
        step_time_s=step_time,
        duration_s=_float(groups.get("duration_s")),
        path=groups.get("path"),
        transport=groups.get("transport"),
        devices=devices,
        text=groups.get("text", "").strip() or None if kind == "nccl_warn" else None,
        at=at,
        line=line,
    )


def _float(value: str | None) -> float | None:
    return float(value) if value is not None else None
