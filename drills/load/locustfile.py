"""Locust users for an OpenAI-compatible inference endpoint, with fine-grained outcome buckets.

Loaded only by a locust subprocess (never import it into pytest: gevent's monkey-patching
breaks ssl once the kubernetes client is loaded). Each user POSTs `/v1/completions` (and,
with `--chat-weight`, `/v1/chat/completions`) with a small prompt; every outcome is folded
into `drills.load.buckets` buckets written as JSONL to `--bucket-file`. An answer that carries
`x-twin-latency-ms` (the twin's gateway: the latency its cluster model gave the request, in cluster
ms) is bucketed with that latency, so a drill judges the modelled cluster's latency and not this
machine's HTTP overhead magnified by the twin's dilated clock; a real endpoint sends no such header
and its measured latency is used.

A request succeeds only with a valid completion (`drills.load.outcome.classify_answer`: 2xx, no `error`
field, generated text); a failure is bucketed with its kind (status, error_200, invalid, timeout,
connection). `--timeout-s` is the client timeout in wall seconds (a hung request fails then, kind
`timeout`); `--replica-header` names the response header that says which replica answered (the twin's
gateway: `x-twin-replica`), so successes are counted per replica.

Run it by hand against any endpoint:

    DRILLS_LOAD_API_KEY=... python -m locust -f drills/load/locustfile.py --headless \
        -H https://llm.example.com -u 32 -r 8 -t 10m --model my-model \
        --bucket-file reports/load/buckets.jsonl

Options (also as env vars, DRILLS_LOAD_<NAME>): --model, --max-tokens, --prompt-words,
--chat-weight, --wait-min-s/--wait-max-s, --timeout-s, --replica-header, --bucket-file, --bucket-s, --bucket-flush-s,
--parent-pid (quit when that process is gone). The API key is read only from the
DRILLS_LOAD_API_KEY env var (sent as `Authorization: Bearer ...`), never from the command line.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
import uuid

if "locust.main" not in sys.modules:  # checked before gevent is imported: it patches on import
    raise ImportError("drills.load.locustfile is loaded only by a locust process (gevent's monkey-patching "
                      "breaks ssl here); start the load with drills.load.LoadRunner")

import gevent  # noqa: E402
from locust import FastHttpUser, events, task  # noqa: E402
from locust.runners import MasterRunner

try:
    from drills.load.buckets import BucketAccumulator  # noqa: E402
    from drills.load.watermark import watermark_line  # noqa: E402
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from drills.load.buckets import BucketAccumulator
    from drills.load.watermark import watermark_line
from drills.load.hung import REPROBE_MIN_S, REQUEST_ID_HEADER, SAFETY_NET_MIN_S, HangJudge  # noqa: E402
from drills.load.outcome import (  # noqa: E402
    DEFAULT_CLIENT_TIMEOUT_S, answer_model, classify_answer, classify_exception,
)

log = logging.getLogger("drills.load.locustfile")

TWIN_LATENCY_HEADER = "x-twin-latency-ms"  # drills.twin.workloads.inference_gateway.LATENCY_HEADER
IO_GRACE_S = 0.002  # a process that was not scheduled reads what already arrived before it asks the twin
SAFETY_NET_FACTOR = 40.0  # × the wall wait (at least SAFETY_NET_MIN_S): a twin that never answers what it owes
WORDS = "the quick brown fox jumps over the lazy dog while the cluster heals itself".split()


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    g = parser.add_argument_group("gpu-drills inference load")
    g.add_argument("--model", env_var="DRILLS_LOAD_MODEL", default="drill-model", help="model name sent in requests")
    g.add_argument("--max-tokens", env_var="DRILLS_LOAD_MAX_TOKENS", type=int, default=16)
    g.add_argument("--prompt-words", env_var="DRILLS_LOAD_PROMPT_WORDS", type=int, default=8)
    g.add_argument("--chat-weight", env_var="DRILLS_LOAD_CHAT_WEIGHT", type=float, default=0.0,
                   help="share of requests sent to /v1/chat/completions (0..1)")
    g.add_argument("--wait-min-s", env_var="DRILLS_LOAD_WAIT_MIN_S", type=float, default=0.0)
    g.add_argument("--wait-max-s", env_var="DRILLS_LOAD_WAIT_MAX_S", type=float, default=0.0)
    g.add_argument("--timeout-s", env_var="DRILLS_LOAD_TIMEOUT_S", type=float, default=DEFAULT_CLIENT_TIMEOUT_S,
                   help="client timeout in wall seconds: a request without an answer by then fails (kind timeout)")
    g.add_argument("--ask-twin-before-timeout", env_var="DRILLS_LOAD_ASK_TWIN", action="store_true", default=False,
                   help="the endpoint is the twin's gateway: when the wall wait is up, ask it (GET "
                        "/twin/v1/requests/{x-request-id}) whether the request is owed in cluster time before "
                        "counting it hung (drills/load/hung.py)")
    g.add_argument("--cluster-timeout-s", env_var="DRILLS_LOAD_CLUSTER_TIMEOUT_S", type=float,
                   default=DEFAULT_CLIENT_TIMEOUT_S, help="the client timeout in cluster seconds (with "
                   "--ask-twin-before-timeout)")
    g.add_argument("--replica-header", env_var="DRILLS_LOAD_REPLICA_HEADER", default="",
                   help="response header naming the replica that answered (successes are counted per replica)")
    g.add_argument("--latency-scale", env_var="DRILLS_LOAD_LATENCY_SCALE", type=float, default=1.0,
                   help="cluster seconds per wall second: a timed-out request is bucketed at timeout x this")
    g.add_argument("--bucket-file", env_var="DRILLS_LOAD_BUCKET_FILE", default="",
                   help="JSONL file for per-interval outcome buckets (empty: none)")
    g.add_argument("--bucket-s", env_var="DRILLS_LOAD_BUCKET_S", type=float, default=0.05,
                   help="bucket width in wall seconds")
    g.add_argument("--bucket-flush-s", env_var="DRILLS_LOAD_BUCKET_FLUSH_S", type=float, default=0.25)
    g.add_argument("--parent-pid", env_var="DRILLS_LOAD_PARENT_PID", type=int, default=0,
                   help="quit as soon as this process is gone (orphan safety net)")
    g.add_argument("--report-stdout", env_var="DRILLS_LOAD_REPORT_STDOUT", action="store_true", default=False,
                   help="master: print locust's summary (json, stats and failures CSV) as one JSON line on stdout "
                        "every second and at quit (a pod's results travel in its log)")


class _BucketSink:
    """Per-process bucket writer: closed buckets are appended and flushed every few hundred ms."""

    def __init__(self, path: str, width_s: float, flush_s: float) -> None:
        self.acc = BucketAccumulator(width_s)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed at quit)
        self.flush_s = flush_s

    def record(self, end_s: float, latency_ms: float, error: str | None, kind: str | None,
               replica: str | None, start_s: float | None = None) -> None:
        self.acc.add(end_s, latency_ms, error, kind, replica, start_s)

    def flush(self, everything: bool = False) -> None:
        """Closed buckets, then the watermark: every completion before it is written (even with no request)."""
        if self.file.closed:
            return
        now = time.time()
        closed = self.acc.take_all() if everything else self.acc.take_closed(now)
        upto = now if everything else self.acc.closed_until(now)
        self.file.write("".join(json.dumps(b.to_json(), separators=(",", ":")) + "\n" for b in closed)
                        + watermark_line(upto))
        self.file.flush()

    def loop(self) -> None:
        while True:
            gevent.sleep(self.flush_s)
            self.flush()

    def close(self) -> None:
        self.flush(everything=True)
        self.file.close()


_sink: _BucketSink | None = None
_reporter = None  # _SummaryReporter on a master with --report-stdout
_replica_header = ""
_latency_scale = 1.0  # cluster seconds per wall second (the twin's scale; 1 for a real endpoint)


class ClusterTimeout(TimeoutError):
    """Raised into a request the twin says is hung (a TimeoutError: locust counts it as a failed request of
    kind `timeout`, as it would a socket timeout)."""


class BadAnswer(Exception):
    """A failed request with its kind (drills.load.outcome), handed to locust by `resp.failure`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    global _sink
    opts = environment.parsed_options
    if opts is None:
        return
    if opts.parent_pid:
        gevent.spawn(_watch_parent, environment, opts.parent_pid)
    # Options are read here, from this process's own command line: a worker later receives the
    # master's custom arguments, which would point every worker at the master's bucket file.
    if opts.report_stdout and isinstance(environment.runner, MasterRunner):
        global _reporter
        _reporter = _SummaryReporter(environment)
        gevent.spawn(_reporter.loop)
    if opts.bucket_file and not isinstance(environment.runner, MasterRunner):
        _sink = _BucketSink(opts.bucket_file, opts.bucket_s, opts.bucket_flush_s)
        gevent.spawn(_sink.loop)
    OpenAIUser.model = opts.model
    OpenAIUser.max_tokens = opts.max_tokens
    OpenAIUser.prompt = " ".join(WORDS[i % len(WORDS)] for i in range(max(1, opts.prompt_words)))
    OpenAIUser.chat_weight = min(1.0, max(0.0, opts.chat_weight))
    OpenAIUser.wait_range = (opts.wait_min_s, max(opts.wait_min_s, opts.wait_max_s))
    OpenAIUser.network_timeout = OpenAIUser.connection_timeout = max(0.001, opts.timeout_s)
    if opts.ask_twin_before_timeout:
        OpenAIUser.wall_wait_s = OpenAIUser.network_timeout
        OpenAIUser.cluster_timeout_s = max(0.001, opts.cluster_timeout_s)
        # geventhttpclient's own timeout is then the safety net only: the twin decides what is hung
        OpenAIUser.network_timeout = max(SAFETY_NET_FACTOR * OpenAIUser.wall_wait_s, SAFETY_NET_MIN_S)
    global _replica_header, _latency_scale
    _replica_header = opts.replica_header or ""
    _latency_scale = max(opts.latency_scale, 1e-9)


@events.request.add_listener
def _on_request(response_time, exception=None, start_time=None, response=None, **_kw) -> None:
    if _sink is None:
        return
    start = start_time or time.time() - response_time / 1000.0
    end = start + response_time / 1000.0
    modelled = _modelled_ms(response)
    if exception is None:
        error = kind = None
    else:
        error = _message(exception)
        kind = getattr(exception, "kind", None) or classify_exception(exception)
    if kind == "timeout":  # no modelled latency: it waited the client timeout, in cluster ms on a twin
        modelled = response_time * _latency_scale
    _sink.record(end, response_time if modelled is None else modelled, error, kind,
                 _header(response, _replica_header) if exception is None and _replica_header else None, start)


def _header(response, name: str) -> str | None:
    try:
        value = response.headers.get(name) if response is not None and response.headers else None
    except AttributeError:
        return None
    return str(value)[:120] if value else None


def _modelled_ms(response) -> float | None:
    """The twin's modelled latency (cluster ms) from `x-twin-latency-ms`; None from any other endpoint."""
    try:
        value = response.headers.get(TWIN_LATENCY_HEADER) if response is not None and response.headers else None
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


@events.quitting.add_listener
def _on_quitting(**_kw) -> None:
    if _sink is not None:
        _sink.flush(everything=True)


@events.quit.add_listener
def _on_quit(**_kw) -> None:
    # After runner.quit(): requests in flight when quitting began have completed and been counted.
    if _sink is not None:
        _sink.close()
    if _reporter is not None:
        _reporter.print()


SUMMARY_KEY = "drills_locust"  # drills.load.podrunner reads these lines


class _SummaryReporter:
    """The master's summary on stdout: what `--json-file` and `--csv` would write, as one JSON line."""

    def __init__(self, environment) -> None:
        from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

        self.environment = environment
        self.csv = StatsCSV(environment, PERCENTILES_TO_REPORT)

    def print(self) -> None:
        import csv
        import io

        stats, failures = io.StringIO(), io.StringIO()
        self.csv.requests_csv(csv.writer(stats))
        self.csv.failures_csv(csv.writer(failures))
        # Not `stats.serialize_stats()`: that is locust's end-of-run call and resets every entry it serializes
        # (`get_stripped_report`), so printed every second it left only the last second's requests.
        entries = [e.serialize() for e in self.environment.runner.stats.entries.values()
                   if e.num_requests or e.num_failures]
        line = {SUMMARY_KEY: {"json": entries, "stats_csv": stats.getvalue(), "failures_csv": failures.getvalue()}}
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def loop(self) -> None:
        while True:
            gevent.sleep(1.0)
            self.print()


class OpenAIUser(FastHttpUser):
    """One client of the inference endpoint: a short completion, then (optionally) a pause."""

    model = "drill-model"
    max_tokens = 16
    prompt = "the quick brown fox"
    chat_weight = 0.0
    wait_range = (0.0, 0.0)
    network_timeout = DEFAULT_CLIENT_TIMEOUT_S
    connection_timeout = DEFAULT_CLIENT_TIMEOUT_S
    # the name this process's first valid answer carried (vLLM names its served model, which may differ from the
    # name requested): a later answer naming neither is another model's (drills.load.outcome)
    answered_as: tuple[str, ...] = ()
    wall_wait_s: float | None = None  # set (with --ask-twin-before-timeout): ask the twin after this wall wait
    cluster_timeout_s = DEFAULT_CLIENT_TIMEOUT_S
    _probe = None  # one geventhttpclient HTTPClient per process, for the twin's /twin/v1/requests/{id}

    def on_start(self) -> None:
        key = os.environ.get("DRILLS_LOAD_API_KEY")
        self.auth_headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._n = 0

    def wait_time(self) -> float:
        lo, hi = self.wait_range
        return random.uniform(lo, hi) if hi > lo else lo

    @task
    def complete(self) -> None:
        self._n += 1
        # Deterministic mix: every k-th request goes to chat, so the ratio holds in short windows.
        if self.chat_weight and (self._n * self.chat_weight) % 1.0 < self.chat_weight:
            path, body = "/v1/chat/completions", {
                "model": self.model, "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": self.prompt}]}
        else:
            path, body = "/v1/completions", {"model": self.model, "prompt": self.prompt,
                                             "max_tokens": self.max_tokens}
        if self.wall_wait_s is None:
            self._post(path, body, self.auth_headers)
        else:
            self._post_asking_twin(path, body)

    def _post_asking_twin(self, path: str, body: dict) -> None:
        """`_post` in a child greenlet; when the wall wait is up, the twin says whether it is hung (hung.py)."""
        rid = uuid.uuid4().hex
        child = gevent.spawn(self._post, path, body, {**self.auth_headers, REQUEST_ID_HEADER: rid})
        judge, wait = HangJudge(self.cluster_timeout_s), self.wall_wait_s
        try:
            while True:
                child.join(wait)
                if not child.ready():
                    child.join(IO_GRACE_S)
                if child.ready():
                    return
                left = judge.left(*self._ask_twin(rid))
                if left <= 0:
                    child.kill(ClusterTimeout(f"no answer within the {self.cluster_timeout_s:g} s client timeout "
                                              "(the twin's clock)"), block=True)
                    return
                wait = max(left / _latency_scale, REPROBE_MIN_S)
        finally:
            if not child.ready():
                child.kill(block=True)

    def _ask_twin(self, rid: str) -> tuple[int | None, dict | None]:
        if OpenAIUser._probe is None:
            from geventhttpclient import HTTPClient

            OpenAIUser._probe = HTTPClient.from_url(self.host, concurrency=64, network_timeout=SAFETY_NET_MIN_S,
                                                    connection_timeout=SAFETY_NET_MIN_S)
        try:
            resp = OpenAIUser._probe.get(f"/twin/v1/requests/{rid}")
            return resp.status_code, json.loads(resp.read() or b"null")
        except Exception as err:  # noqa: BLE001 — the twin did not answer: hung, as the wall timeout says
            log.debug("the twin did not say whether %s is owed: %s", rid, err)
            return None, None

    def _post(self, path: str, body: dict, headers: dict) -> None:
        with self.client.post(path, json=body, headers=headers, catch_response=True) as resp:
            error = getattr(resp, "error", None)  # also set for a non-2xx answer, which has a status and a body
            if error is not None and not resp.status_code:  # no answer at all: hung past the timeout, refused, reset
                kind = classify_exception(error)
                resp.failure(BadAnswer(kind, (str(error) if isinstance(error, ClusterTimeout) else
                                              f"no answer within the {self.network_timeout:g} s client timeout")
                                       if kind == "timeout" else _message(error)))
                return
            kind, reason = classify_answer(resp.status_code, resp.content, {self.model, *OpenAIUser.answered_as})
            if kind is not None:
                resp.failure(BadAnswer(kind, reason))
            else:
                if not OpenAIUser.answered_as:  # what the endpoint answers as (the load starts before any fault)
                    OpenAIUser.answered_as = tuple(filter(None, [answer_model(resp.content)]))
                resp.success()


def _watch_parent(environment, pid: int) -> None:
    while True:
        gevent.sleep(1.0)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.warning("parent process %d is gone: quitting", pid)
            if environment.runner is not None:
                environment.runner.quit()
            # main() joins the runner greenlet and then shuts down (quitting -> buckets flushed).
            return
        except PermissionError:
            pass


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, BadAnswer) or type(exc).__name__ == "CatchResponseError":
        return text[:100]
    return f"{type(exc).__name__}: {text}"[:100]
