"""The nominal platform each drill rehearses on: the profile's steady-state hypothesis (`nominal:`).

A drill proves recovery only on a platform that was healthy before the fault: a job already at a fifth
of its throughput taken as "baseline" makes "back to 90 % of baseline" a pass on a broken platform. So
the profile declares, per drill id (drills/core/catalog.yaml), what nominal means — as the site says it
should be, never as found — and the guard reads it before the first fault and again after the revert
(drills/measure/steady.py reads, drills/verdicts/steady.py judges). Every figure here is a threshold
or a promise; the readings come from the cluster in this run.

    nominal:
      settle_s: 60s                       # cluster seconds after the revert before the re-check (1 s … 1 h)
      drills:
        gpu-node-loss:
          training_throughput: {value: 256, unit: samples/s, min_ratio: 0.8}   # or {history: 5}
          no_worker_restart_s: 30m        # no worker restart in the last 30 minutes (1 s … 24 h)
        inference-pod-kill: {inference_replicas: 2}   # every one Ready and in the Service's endpoints
        inference-rolling-restart: {inference_answers: true}  # probe completions answered, every one valid
        inference-noisy-neighbour:
          inference_latency: {value: 400ms, max_ratio: 2}  # their median latency ≤ 2 × 400 ms (or {history: 5})
        switch-uplink: {uplinks_up: true} # every uplink of the job's leaves admin and oper up
        gpu-node-loss: {gpus_in_use: true}  # every worker's GPUs held by compute processes and busy (§5.1)
        storage-saturation: {store_bandwidth_mb_s: 40, store_min_ratio: 0.8}

A drill the profile does not list gets the facets that need no site figure (no worker restart in the last
30 minutes; the job's GPUs in use; for the uplink drill, every uplink of the job's leaves up; for the serving
drills, probe completions answered validly); `gpu-node-loss: {}` opts out.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from drills.profile.base import Ratio, Strict, parse_duration

__all__ = ["NominalThroughput", "NominalLatency", "NominalState", "NominalConfig", "MIN_SETTLE_S", "MAX_SETTLE_S"]

log = logging.getLogger(__name__)

MIN_SETTLE_S, MAX_SETTLE_S = 1.0, 3600.0
MAX_RESTART_WINDOW_S = 86_400.0


def _bounded(low: float, high: float):
    return Annotated[float, BeforeValidator(parse_duration), Field(ge=low, le=high)]


class NominalThroughput(Strict):
    """The training job's nominal throughput: `value` (absolute, in `unit`), or `history: N` — the median
    of the baselines the last N passed runs in the reports folder recorded for this job. The job is nominal
    when its recent step lines (the last `window_s` cluster seconds) run at ≥ `min_ratio` × nominal."""

    value: float | None = Field(None, gt=0, le=1e12, allow_inf_nan=False)
    history: int | None = Field(None, ge=1, le=100)
    unit: Literal["samples/s", "steps/s"] = "samples/s"
    min_ratio: Ratio = 0.8  # (0, 1]: a job at 19 % of nominal is not nominal; 0.8 leaves room for noise
    window_s: _bounded(10.0, 3600.0) = 120.0  # cluster seconds of recent step lines the reading is the median of

    @model_validator(mode="after")
    def _one_source(self) -> "NominalThroughput":
        if (self.value is None) == (self.history is None):
            raise ValueError("give the nominal throughput either as `value` (e.g. 256) or as `history: N` "
                             "(the median of the last N runs' baselines), exactly one of them")
        return self


class NominalLatency(Strict):
    """The endpoint's nominal latency: `value` (a duration: how long one probe completion of the load's shape
    takes on the healthy platform), or `history: N` — the median of what the last N passed runs of the drill read
    before their fault. Nominal when the median latency of the valid probe completions is ≤ `max_ratio` × that: a
    serving platform already several times slower than usual makes "p99 within 2× the baseline" a pass on a broken
    platform (issue 30, class 1)."""

    value: _bounded(0.001, 3600.0) | None = None
    history: int | None = Field(None, ge=1, le=100)
    max_ratio: float = Field(2.0, ge=1.0, le=100.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_source(self) -> "NominalLatency":
        if (self.value is None) == (self.history is None):
            raise ValueError("give the nominal latency either as `value` (e.g. 400ms) or as `history: N` (the median "
                             "of the last N runs' readings), exactly one of them")
        return self


class NominalState(Strict):
    """What nominal means for one drill; a facet left unset is not part of that drill's hypothesis."""

    training_throughput: NominalThroughput | None = None
    no_worker_restart_s: _bounded(1.0, MAX_RESTART_WINDOW_S) | None = None  # no worker restart in the last M s
    inference_replicas: int | None = Field(None, ge=1, le=10_000)  # all of them Ready and in the endpoints
    # the endpoint answers a few probe completions, every one valid (2xx, no error, generated text, one model):
    # Ready replicas in the endpoints that answer with nothing are not a serving platform (issue 30, class 5)
    inference_answers: bool = False
    inference_latency: NominalLatency | None = None  # the probe completions' median latency (sends the probes)
    uplinks_up: bool = False  # every uplink of the training job's leaves admin and oper up
    # every Running worker's GPUs held by compute processes and busy (nvidia-smi in its container), and no torch
    # "CUDA initialization" warning in its log: a job that "runs" on the CPU is not nominal (the seed's §5.1)
    gpus_in_use: bool = False
    store_bandwidth_mb_s: float | None = Field(None, gt=0, le=1e9, allow_inf_nan=False)  # the probe's write MB/s
    store_min_ratio: Ratio = 0.8

    @property
    def facets(self) -> tuple[str, ...]:
        """The facets this drill's hypothesis reads, in reading order."""
        out = []
        if self.training_throughput is not None:
            out.append("training throughput")
        if self.no_worker_restart_s is not None:
            out.append("worker restarts")
        if self.inference_replicas is not None:
            out.append("inference replicas")
        if self.inference_answers:
            out.append("inference answers")
        if self.inference_latency is not None:
            out.append("inference latency")
        if self.gpus_in_use:
            out.append("GPUs in use")
        if self.uplinks_up:
            out.append("uplinks")
        if self.store_bandwidth_mb_s is not None:
            out.append("store bandwidth")
        return tuple(out)


class NominalConfig(Strict):
    """`nominal:` — per drill id, the steady state checked before the first fault and after the revert."""

    settle_s: _bounded(MIN_SETTLE_S, MAX_SETTLE_S) = 60.0
    drills: dict[str, NominalState] = {}

    @field_validator("drills")
    @classmethod
    def _known_drills(cls, drills: dict) -> dict:
        from drills.core.catalog import catalog

        known = sorted(catalog())
        unknown = sorted(set(drills) - set(known))
        if unknown:
            raise ValueError(f"unknown drill {', '.join(unknown)} (drills: {', '.join(known)})")
        return drills

    def of(self, drill: str) -> NominalState | None:
        """The drill's declared nominal state; undeclared, the facets that need no site figure (no worker
        restart in the last 30 minutes, the job's uplinks up) — a site opts out with an empty mapping."""
        if drill in self.drills:
            return self.drills[drill]
        return _DEFAULTS.get(drill)


# What nominal means when a profile declares nothing for a drill: only facets with no number to assume (a
# throughput, a replica count or a bandwidth is the site's to declare, never guessed here).
_DEFAULTS = {
    "gpu-node-loss": NominalState(no_worker_restart_s=1800.0, gpus_in_use=True),
    "switch-uplink": NominalState(no_worker_restart_s=1800.0, uplinks_up=True, gpus_in_use=True),
    "storage-saturation": NominalState(no_worker_restart_s=1800.0, gpus_in_use=True),
    **{d: NominalState(inference_answers=True)
       for d in ("inference-pod-kill", "inference-rolling-restart", "inference-noisy-neighbour")},
}

