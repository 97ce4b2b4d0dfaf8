"""vLLM's own `/metrics` on each inference replica (the OpenAI server's port, `GET /metrics`): the metrics vLLM
defines with prometheus_client, per replica process, labelled `model_name` (the served model name).

Source: vllm-project/vllm vllm/engine/metrics.py@00c33e81 (`class Metrics`, the v0.5–v0.6 engine the twin's
`vllm/vllm-openai:v0.6.3` image runs): the same names, help texts, label names and histogram buckets, and
`prometheus_client.disable_created_metrics()` as vLLM calls it. `vllm:request_generation_tokens` (tokens each
finished request generated) has `build_1_2_5_buckets(max_model_len)`'s buckets for the twin's max_model_len 4096
(1, 2, 5 … 2000): a request that generated nothing (an empty answer) lands in le="1.0" and counts in
`vllm:request_success_total` under the finish reason its client got. Values follow the twin's requests: every
completion a replica serves (through the gateway or a port-forward) is observed in twin seconds; the running
gauge is the replica's in-flight requests at scrape time; a replaced pod starts from zero like a new process.
"""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["ReplicaMetrics"]

prometheus_client.disable_created_metrics()  # as vllm/engine/metrics.py does at import

_L = ["model_name"]
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
E2E_BUCKETS = [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
MAX_MODEL_LEN = 4096  # what the twin's /v1/models reports


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's bucket rule for token-count histograms (vllm/engine/metrics.py): 1, 2, 5, 10, 20, 50 … up to
    `max_value`."""
    buckets, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10 ** exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


class ReplicaMetrics:
    """One replica process's vLLM metrics (its own registry: Prometheus scrapes each pod separately)."""

    def __init__(self, model_name: str, max_concurrency: int):
        self.model_name, self.max_concurrency = model_name, max(1, max_concurrency)
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.running = Gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", _L, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", _L, registry=r)
        self.swapped = Gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", _L, registry=r)
        self.gpu_cache = Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", _L,
                               registry=r)
        self.cpu_cache = Gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", _L,
                               registry=r)
        self.preemptions = Counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", _L,
                                   registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", _L, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens_total", "Number of generation tokens processed.", _L,
                                         registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _L,
                              buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                              _L, buckets=TPOT_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                             _L, buckets=E2E_BUCKETS, registry=r)
        self.request_generation = Histogram("vllm:request_generation_tokens",
                                            "Number of generation tokens processed.", _L,
                                            buckets=build_1_2_5_buckets(MAX_MODEL_LEN), registry=r)
        self.success = Counter("vllm:request_success_total", "Count of successfully processed requests.",
                               [*_L, "finished_reason"], registry=r)
        for metric in (self.running, self.waiting, self.swapped, self.gpu_cache, self.cpu_cache, self.preemptions,
                       self.prompt_tokens, self.generation_tokens, self.ttft, self.tpot, self.e2e,
                       self.request_generation):
            metric.labels(model_name)  # vLLM's logger sets every series at its first stats interval

    def served(self, latency_s: float, prompt_tokens: int, generated: int, first_token_s: float,
               finished_reason: str = "length") -> None:
        """One completed request: its latency (twin seconds) and token counts."""
        m = self.model_name
        self.prompt_tokens.labels(m).inc(prompt_tokens)
        self.generation_tokens.labels(m).inc(generated)
        self.ttft.labels(m).observe(first_token_s)
        if generated > 1:
            self.tpot.labels(m).observe(max(0.0, latency_s - first_token_s) / (generated - 1))
        self.e2e.labels(m).observe(latency_s)
        self.request_generation.labels(m).observe(generated)
        self.success.labels(m, finished_reason).inc()

    def exposition(self, inflight: int) -> bytes:
        """The text format at this moment (`inflight`: the replica's requests now)."""
        m = self.model_name
        running = min(inflight, self.max_concurrency)
        self.running.labels(m).set(running)
        self.waiting.labels(m).set(max(0, inflight - self.max_concurrency))
        self.gpu_cache.labels(m).set(round(running / self.max_concurrency, 4))
        return generate_latest(self.registry)
