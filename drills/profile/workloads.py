"""The target profile's workloads: the training job the drills watch (its logs, its checkpoint store and how to reach
it), the inference endpoint and the load's shape — strict pydantic models, re-exported by drills/profile/model.py."""

from __future__ import annotations

import logging
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from drills.core.grammar import DnsLabel, DnsSubdomain, HttpHeader, LocalPath, RemotePath, Selector, Text
from drills.profile.base import Seconds, Strict
from drills.profile.load import LoadGenerator

__all__ = ["CheckpointStoreAccess", "TrainingWorkload", "LoadShape", "InferenceWorkload", "Workloads"]

log = logging.getLogger(__name__)


class CheckpointStoreAccess(Strict):
    """How the drill reads the job's checkpoint store — the truth about its latest complete checkpoint
    (drills/measure/store_read.py). `pod`: a short-lived read-only pod mounting the job's own volume (journaled,
    removed) lists `dir`; `path`: this machine reads `path` (the same directory, mounted here); `none`: the store
    cannot be read — the resume is then judged on the job's log alone, and the report says so."""

    read: Literal["pod", "path", "none"] = "pod"
    dir: RemotePath | None = None  # the checkpoint directory as the job's containers see it; None: where its log saves
    path: LocalPath | None = None  # read: path — that directory as this machine sees it
    framework: Literal["auto", "megatron", "deepspeed", "hf-trainer", "lightning", "nemo", "mmengine", "dcp"] = "auto"
    # the reader pod's image (`find`, `cat`, `sleep`); None: the job's own image, on the node of a surviving worker —
    # already there, so reading pulls nothing and takes no image-pull slot a recovering pod waits for
    image: str | None = None
    timeout_s: Seconds = 120.0  # cluster seconds for the reader pod to be Running

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str | None) -> str | None:
        from drills.profile.images import check_image

        return None if value is None else check_image(value)

    @model_validator(mode="after")
    def _path_given(self) -> "CheckpointStoreAccess":
        if self.read == "path" and not self.path:
            raise ValueError("checkpoint_store.read: path needs checkpoint_store.path (the directory as mounted here)")
        return self


class TrainingWorkload(Strict):
    job: DnsSubdomain = "llm-finetune-8b"  # Volcano Job name
    namespace: DnsLabel = "ai-platform"
    # auto: every preset at once, the framework detected from the lines (drills.measure.logread)
    log_format: Literal["auto", "twin", "hf-trainer", "megatron", "deepspeed", "lightning"] = "auto"
    log_patterns: dict[str, str | list[str]] = {}  # kind → regex(es), layered over log_format
    container: DnsLabel | None = None  # whose logs to read; None: the pod's first container
    checkpoint_interval_steps: int = Field(2000, gt=0, le=100_000_000)
    # Error-like lines (a traceback, `ERROR`, `NCCL WARN`, `Xid`) no reader classifies make the stability window
    # inconclusive (drills.measure.job_health); each regex here declares such a line harmless for this site,
    # explicitly: the lines it covers are listed in the record and the report, never dropped silently.
    log_ignore: list[str] = []
    checkpoint_store: CheckpointStoreAccess = CheckpointStoreAccess()

    @field_validator("log_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: dict) -> dict:
        from drills.measure.logformats import custom_format

        if patterns:
            custom_format(patterns)  # ValueError names the kind and the problem
        return patterns

    @field_validator("log_ignore")
    @classmethod
    def _ignore_compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not pattern.strip():
                raise ValueError("log_ignore: an empty pattern would cover every line")
            try:
                compiled = re.compile(pattern)
            except re.error as err:
                raise ValueError(f"log_ignore pattern {pattern!r} does not compile: {err.msg}") from None
            if compiled.search(""):
                raise ValueError(f"log_ignore pattern {pattern!r} matches an empty line, so it would cover every line")
        return patterns

    def log_parser(self):
        """The LogFormat to read this job's logs with (preset plus any profile patterns)."""
        from drills.measure.logformats import custom_format, preset

        return custom_format(self.log_patterns, base=self.log_format) if self.log_patterns else preset(self.log_format)


class LoadShape(Strict):
    """The load users put on the endpoint during the inference drill (drills/load/locustfile.py)."""

    users: int | None = Field(None, gt=0, le=100_000)  # None: the scenario's "N users are sending completions"
    spawn_rate: float | None = Field(None, gt=0, le=100_000)  # users started per (wall) second; None: all of them at once
    prompt_words: int = Field(8, gt=0, le=100_000)  # prompt length, in words
    max_tokens: int = Field(16, gt=0, le=131_072)  # completion length asked for
    chat_weight: float = Field(0.0, ge=0, le=1)  # the share of requests sent to /v1/chat/completions
    wait_min_s: float = Field(0.0, ge=0, le=3600)  # each user's think time between requests (wall seconds), uniform
    wait_max_s: float = Field(0.0, ge=0, le=3600)  # in [wait_min_s, wait_max_s]; 0: back to back

    @model_validator(mode="after")
    def _wait_range(self) -> "LoadShape":
        if self.wait_max_s < self.wait_min_s:
            raise ValueError(f"wait_max_s {self.wait_max_s:g} is below wait_min_s {self.wait_min_s:g}")
        return self


class InferenceWorkload(Strict):
    deployment: DnsSubdomain = "llama-7b-infer"
    namespace: DnsLabel = "ai-platform"
    service: DnsLabel = "llama-7b-infer"
    endpoint: str = "from-twin"  # an http(s) URL, or "from-twin": the twin's gateway
    model: Text = "llama-7b"
    label_selector: Selector = "app=llama-7b-infer"
    request_timeout_s: Seconds = 30.0  # cluster seconds a client waits for a completion: longer is a hung request
    # The response header naming the replica that answered (pod name, or pod IP[:port]); it proves a
    # replacement served. None: the twin's gateway header when the endpoint is from-twin, else unknown.
    replica_header: HttpHeader | None = None
    load: LoadShape = LoadShape()
    load_generator: LoadGenerator = LoadGenerator()  # locust here or as pods (drills/profile/load.py)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        if value != "from-twin" and not re.match(r"^https?://[A-Za-z0-9.\[\]:-]+(?:/[^\s\x00-\x1f\x7f]*)?$", value):
            raise ValueError(f'must be an http(s) URL or "from-twin" (got {value!r})')
        return value


class Workloads(Strict):
    training: TrainingWorkload = TrainingWorkload()
    inference: InferenceWorkload = InferenceWorkload()
