"""The serving facets of the steady state (drills/measure/steady.py): probe completions sent to the endpoint the
load uses, classified as the load classifies its answers (`inference answers`), and their median latency against
the site's nominal (`inference latency`). Read-only but for the few completions sent."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from drills.measure.steady import PROBE_ANSWERS, SteadyContext, history_facet
from drills.verdicts.steady import Reading, latency_reading, unobserved

__all__ = ["Probe", "probe_endpoint", "latency"]


@dataclass
class Probe:
    """PROBE_ANSWERS completions sent to the endpoint: what failed (kind and reason → count), how long each valid one
    took (cluster seconds) and where they went. `url` None: no endpoint to send them to (`source` says why)."""

    url: str | None
    source: str
    sent: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)


def probe_endpoint(ctx: SteadyContext) -> Probe:
    """PROBE_ANSWERS completions of the load's shape sent one after the other, each classified as the load classifies
    its answers; the model of the first valid answer is the one the others must carry (a fallback is not it). A valid
    answer's latency is the twin gateway's modelled one (`x-twin-latency-ms`, cluster time, as the load reads it),
    else the wall time it took (a real endpoint: scale 1)."""
    import requests

    from drills.load.hung import dilated, post_asking_twin
    from drills.load.outcome import answer_model, classify_answer, classify_exception, client_timeout_wall_s
    from drills.twin.workloads.inference_gateway import LATENCY_HEADER

    w = ctx.profile.workloads.inference
    url = (ctx.twin_info or {}).get("gateway") if w.endpoint == "from-twin" else w.endpoint
    if not url:
        return Probe(None, "workloads.inference.endpoint is from-twin but the target is no twin")
    probe = Probe(url, f"POST {url.rstrip('/')}/v1/completions × {PROBE_ANSWERS}", sent=PROBE_ANSWERS)
    scale = ctx.cluster.clock.scale
    timeout = client_timeout_wall_s(w.request_timeout_s, scale)
    body = {"model": w.model, "prompt": "steady-state probe", "max_tokens": w.load.max_tokens}
    models: set[str] = {w.model}
    for _ in range(PROBE_ANSWERS):
        started = time.monotonic()
        if dilated(ctx.cluster.clock):  # a twin's clock: the twin says, in cluster time, what is hung (load/hung.py)
            resp = post_asking_twin(url.rstrip("/") + "/v1/completions", body, url, timeout, w.request_timeout_s, scale)
        else:
            try:
                resp = requests.post(url.rstrip("/") + "/v1/completions", json=body, timeout=timeout)
            except requests.RequestException as err:
                resp = err
        took = (time.monotonic() - started) * scale
        if isinstance(resp, BaseException):
            why = classify_exception(resp)
        else:
            kind, why = classify_answer(resp.status_code, resp.content, models if len(models) > 1 else ())
            if kind is None:
                named = answer_model(resp.content)
                if named and len(models) == 1:  # the model the endpoint answers as: the others must carry it too
                    models.add(named)
                modelled = resp.headers.get(LATENCY_HEADER)
                try:
                    probe.latencies_s.append(float(modelled) / 1000 if modelled is not None else took)
                except ValueError:
                    probe.latencies_s.append(took)
                continue
        probe.failures[why] = probe.failures.get(why, 0) + 1
    return probe


def latency(ctx: SteadyContext, drill: str, spec, probe: Probe) -> Reading:
    if spec.value is not None:
        nominal, nominal_source = spec.value, "the profile's nominal"
    else:
        nominal, nominal_source = history_facet(ctx.reports_dir, drill, "inference latency", spec.history)
    if probe.url is None:
        return unobserved("inference latency", "probe completions' median latency", probe.source)
    return latency_reading(probe.latencies_s, probe.source, nominal, nominal_source, spec.max_ratio)
