"""The inference gateway: an OpenAI-compatible HTTP front (aiohttp on 127.0.0.1) for the twin's model
Deployments, routing each request to a Ready replica taken from its Service's Endpoints (watched
through the API, like kube-proxy), and failing with 503 when no replica is Ready.

- `POST /v1/completions`, `POST /v1/chat/completions` — vLLM-shaped answers (`choices`, `usage`);
  the `model` field picks the Deployment (served model name or model id; default: the first one).
- `GET /v1/models` — the served models; `GET /health` — 200 when every model has a Ready replica.
- `GET /twin/v1/requests` — requests received, by "METHOD path" (tests prove a dry run sends none);
  `GET /twin/v1/requests/{x-request-id}` — one completion in flight: when its answer is due (owed.py).
- Latency (twin seconds) = base_latency + max_tokens / tokens_per_second, times (1 + load) where load
  is the replica's in-flight requests n over its max_concurrency c (capped at 1: a full batch); beyond c
  the replica is overloaded and the latency grows with (n / c)²: queued sequences wait n / c batches, and
  vLLM preempts and recomputes sequences its KV cache cannot hold. The wall wait is that divided by the
  twin's scale (never 0). The replica that answered is in `x-twin-replica`; every answer carries the
  modelled latency in cluster milliseconds in `x-twin-latency-ms` (the load measures the cluster's
  latency from it, not this machine's HTTP overhead, which the dilated clock would magnify).
- A replica that leaves the Endpoints stays in the routing table for `endpoints_lag` twin seconds (slow
  endpoint propagation). Whether a routed request is answered is the replica's server process's to say
  (`replica_process.py`, read from its pod): nothing listens while the model loads or once SIGTERM came
  (502, connection refused), and the requests in flight when SIGTERM comes are aborted (502, reset before
  headers) — a pod Ready before its model is loaded, or deleted without a preStop drain, costs users requests.

- Defects: `errors_as_200` answers the 502/503 above with HTTP 200 and the error body plus a `choices`
  list holding one empty choice (a proxy masking errors); `fallback_model` answers them with HTTP 200 and a
  completion from that other model, named in its `model` (a router's fallback); `wedged_replacements` makes a replica that joins
  the Endpoints after the Deployment was whole accept requests and never answer (the handler waits until
  the client gives up; truth `wedged_replica`); `empty_replacements` and `shares_gpus` answer 200 with no text
  (drills/twin/workloads/serving_defects.py).

Ground truth: `gateway_outage_started` when the last routable replica goes, `gateway_serving` when one
is routable again, `first_answer_after_outage` at the first 200 after an outage.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from aiohttp import hdrs, web

from drills.twin.api.resources import by_kind
from drills.twin.controllers.client import TwinClient
from drills.twin.controllers.informer import InformerFactory
from drills.twin.exporters.vllm import ReplicaMetrics
from drills.twin.workloads.completions import completion, fallback_completion
from drills.twin.workloads.hub import hub_for
from drills.twin.workloads.owed import REQUEST_ID_HEADER, OwedAnswers
from drills.twin.workloads.replica_process import GONE, LOADING, ReplicaProcesses
from drills.twin.workloads.serving_defects import GpuNeighbours, empty_completion

__all__ = ["Gateway", "install_gateway", "MIN_WALL_LATENCY_S", "LATENCY_HEADER", "modelled_latency"]

log = logging.getLogger(__name__)

ENDPOINTS = by_kind("v1", "Endpoints")
PODS = by_kind("v1", "Pod")
MIN_WALL_LATENCY_S = 0.0005
FAIL_LATENCY_S = 0.002  # twin seconds a refused connection or a 503 takes
HANG_POLL_S = 0.01  # wall seconds between looks at a hung request's connection
LATENCY_HEADER = "x-twin-latency-ms"


@dataclass
class _Model:
    spec: Any
    subject: str
    replicas: list[str] = field(default_factory=list)  # Ready pod names from the Endpoints
    stale: dict[str, float] = field(default_factory=dict)  # gone from the Endpoints → routed until (twin ts)
    serving: bool = False
    ever_served: bool = False
    outage: bool = False
    answered_since_outage: bool = True
    whole_once: bool = False  # the Endpoints listed all desired replicas at some point
    wedged: set[str] = field(default_factory=set)  # defect wedged_replacements: accept, never answer
    empty: set[str] = field(default_factory=set)  # defect empty_replacements: answer 200 with no text


class Gateway:
    """One HTTP server for every inference Deployment of the profile."""

    def __init__(self, twin: Any):
        self.twin = twin
        self.hub = hub_for(twin)
        self.hub.gateway = self  # the exporters read its replicas' load
        profile = twin.profile
        deps = list(profile.workloads.inference.values()) if profile is not None else []
        self.models = {d.model_name: _Model(d, f"{d.namespace}/{d.name}") for d in deps}
        self.by_service = {(d.namespace, d.service_name): d.model_name for d in deps}
        self.inflight: dict[str, int] = {}
        self.replica_metrics: dict[str, ReplicaMetrics] = {}  # pod → its vLLM /metrics (drills/twin/exporters/vllm.py)
        self._rr = itertools.count()
        self.requests: collections.Counter[str] = collections.Counter()  # "METHOD path" → requests received
        self.owed = OwedAnswers()  # completions in flight, by x-request-id (owed.py)
        self.processes = ReplicaProcesses(twin.clock, getattr(profile, "timings", None))
        self.neighbours = GpuNeighbours()  # defect shares_gpus (serving_defects.py)
        self._runner: web.AppRunner | None = None
        self._client: TwinClient | None = None
        self._informers: InformerFactory | None = None
        self.url = ""

    async def start(self, twin: Any) -> dict | None:
        if not self.models:
            return None
        self._client = TwinClient(twin.url, user_agent="twin-inference-gateway", app=twin.server.app)
        self._informers = InformerFactory(self._client)
        for ns in sorted({m.spec.namespace for m in self.models.values()}):
            self._informers.informer(ENDPOINTS, ns).add_handler(self._on_endpoints)
            self._informers.informer(PODS, ns).add_handler(self.processes.on_pod)
            self._informers.informer(PODS, ns).add_handler(self.neighbours.on_pod)
        self._informers.start()
        await self._informers.wait_synced()
        app = web.Application(middlewares=[self._count])
        app.on_response_prepare.append(self._dated)
        app.add_routes([
            web.get("/twin/v1/requests", self._requests),
            web.get("/twin/v1/requests/{rid}", self._in_flight),
            web.post("/v1/completions", self._completions),
            web.post("/v1/chat/completions", self._chat),
            web.get("/v1/models", self._list_models),
            web.get("/health", self._health),
        ])
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        port = next((m.spec.gateway_port for m in self.models.values() if m.spec.gateway_port), 0)
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        log.info("inference gateway on %s for %s", self.url, ", ".join(self.models))
        return {"gateway": self.url, "gateway_models": list(self.models)}

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._informers is not None:
            await self._informers.stop()
        if self._client is not None:
            await self._client.close()

    # -- endpoints -------------------------------------------------------------------------------
    @web.middleware
    async def _count(self, request: web.Request, handler) -> web.StreamResponse:
        if request.path.startswith("/twin/"):
            return await handler(request)
        self.requests[f"{request.method} {request.path}"] += 1
        rid = request.headers.get(REQUEST_ID_HEADER, "")
        if request.method != "POST" or not self.owed.arrive(rid, self.twin.clock.timestamp()):
            return await handler(request)
        request["rid"] = rid
        try:
            return await handler(request)
        finally:
            self.owed.done(rid)

    def _due_in(self, request: web.Request, cluster_s: float) -> None:
        """The answer to `request` is due `cluster_s` cluster seconds from now."""
        self.owed.due_in(request.get("rid", ""), self.twin.clock.timestamp(), cluster_s)

    async def _in_flight(self, request: web.Request) -> web.Response:
        now = self.twin.clock.timestamp()
        found = self.owed.probe(request.match_info["rid"], now)
        return web.json_response(found if found is not None else {"error": "not in flight", "now": now},
                                 status=200 if found is not None else 404)

    async def _dated(self, request: web.Request, response: web.StreamResponse) -> None:
        """`Date` in cluster time: the gateway's clock is the cluster's (aiohttp would send the wall clock)."""
        response.headers[hdrs.DATE] = formatdate(self.twin.clock.timestamp(), usegmt=True)

    async def _requests(self, request: web.Request) -> web.Response:
        return web.json_response(dict(self.requests))

    def _on_endpoints(self, etype: str, ep: dict, old: dict | None) -> None:
        meta = ep["metadata"]
        name = self.by_service.get((meta.get("namespace", ""), meta["name"]))
        if name is None:
            return
        model = self.models[name]
        ready = [] if etype == "DELETED" else [
            (a.get("targetRef") or {}).get("name") or a.get("ip", "")
            for subset in ep.get("subsets") or [] for a in subset.get("addresses") or []]
        lag, now = model.spec.endpoints_lag, self.twin.clock.timestamp()
        for gone in set(model.replicas) - set(ready):
            self.processes.unrouted(gone)
        if lag:
            for gone in set(model.replicas) - set(ready):
                model.stale[gone] = now + lag
        for back in ready:
            model.stale.pop(back, None)
        joined = set(ready) - set(model.replicas)
        if model.spec.wedged_replacements and model.whole_once:
            for name in sorted(joined - model.wedged):
                model.wedged.add(name)
                self.hub.truth.record("inference", model.subject, "wedged_replica", at=now, replica=name)
        if model.spec.empty_replacements and model.whole_once:
            model.empty |= joined
        model.replicas = sorted(set(ready))
        model.whole_once = model.whole_once or len(model.replicas) >= model.spec.replicas
        self._serving_changed(model)

    def _serving_changed(self, model: _Model) -> None:
        truth, now = self.hub.truth, self.twin.clock.timestamp()
        serving = bool(model.replicas)
        if serving == model.serving:
            truth.update("inference", model.subject, routable_replicas=len(model.replicas))
            return
        model.serving = serving
        if serving:
            truth.record("inference", model.subject, "gateway_serving", at=now, replicas=len(model.replicas),
                         after_outage=model.outage)
            model.ever_served = True
            model.outage = False
        elif model.ever_served:
            model.outage = True
            model.answered_since_outage = False
            truth.record("inference", model.subject, "gateway_outage_started", at=now)
        truth.update("inference", model.subject, routable_replicas=len(model.replicas), gateway_serving=serving,
                     gateway=self.url)

    # -- HTTP ------------------------------------------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.Response:
        return await self._answer(request, chat=False)

    async def _chat(self, request: web.Request) -> web.Response:
        return await self._answer(request, chat=True)

    async def _answer(self, request: web.Request, chat: bool) -> web.Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as err:
            return _error(400, f"invalid JSON body: {err}", "BadRequestError")
        model = self._model(body.get("model"))
        if model is None:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        routable = self._routable(model)
        if not routable:
            return await self._fail(model, 503, "no ready replica", "ServiceUnavailableError", body, chat, request)
        replica = self._pick(routable)
        process = self.processes.state(replica)
        if process in (GONE, LOADING) or (process is None and replica in model.stale):  # nothing listens there
            return await self._fail(model, 502, f"upstream connect error: connection refused ({replica})",
                                    "BadGatewayError", body, chat, request)
        if replica in model.wedged:
            return await self._hang(request, replica)
        beside = self.neighbours.beside(replica, model.spec.name) if model.spec.shares_gpus else None
        if replica in model.empty or beside:  # answers, serves nothing (serving_defects.py)
            return await self._empty(model, body, chat, replica, "abort" if beside else "stop", request)
        after_outage = not model.answered_since_outage  # routed once a replica is back: counts as the first answer
        spec = model.spec
        tokens = max(1, min(int(body.get("max_tokens") or 16), 4096))
        self.inflight[replica] = self.inflight.get(replica, 0) + 1
        try:
            latency = modelled_latency(spec.base_latency + tokens / spec.tokens_per_second, self.inflight[replica],
                                       spec.max_concurrency)
            self._due_in(request, latency)
            aborted = await self._serve(replica, max(latency / self.twin.clock.scale, MIN_WALL_LATENCY_S))
        finally:
            self.inflight[replica] -= 1
        if aborted:  # SIGTERM reached the server while it generated: vLLM aborts what is in flight
            return await self._fail(model, 502, f"upstream reset before headers: connection termination ({replica})",
                                    "BadGatewayError", body, chat, request)
        if after_outage and not model.answered_since_outage:
            model.answered_since_outage = True
            self.hub.truth.record("inference", model.subject, "first_answer_after_outage", replica=replica)
        return web.json_response(self.completion_body(model, body, tokens, chat, latency, replica),
                                 headers={"x-twin-replica": replica, LATENCY_HEADER: _ms(latency)})

    async def _serve(self, replica: str, wall_s: float) -> bool:
        """Generate for `wall_s` wall seconds; True when the replica's process got SIGTERM meanwhile."""
        terminated = self.processes.terminated(replica)
        if terminated is None:
            await asyncio.sleep(wall_s)
            return False
        try:
            await asyncio.wait_for(terminated.wait(), timeout=wall_s)
        except asyncio.TimeoutError:
            return False
        return True

    def metrics_of(self, model: _Model, replica: str) -> ReplicaMetrics:
        """The replica process's own vLLM metrics (created with the first request or scrape, like its process)."""
        found = self.replica_metrics.get(replica)
        if found is None:
            found = self.replica_metrics[replica] = ReplicaMetrics(model.spec.model_name, model.spec.max_concurrency)
        return found

    def _model(self, name: Any) -> _Model | None:
        if not name:
            return next(iter(self.models.values()))
        if name in self.models:
            return self.models[name]
        return next((m for m in self.models.values() if m.spec.model == name), None)

    def _routable(self, model: _Model) -> list[str]:
        """Ready replicas plus those still routed after leaving the Endpoints (until their lag ran out)."""
        now = self.twin.clock.timestamp()
        for name in [n for n, until in model.stale.items() if until <= now]:
            del model.stale[name]
        return sorted({*model.replicas, *model.stale})

    def _pick(self, replicas: list[str]) -> str:
        """The least loaded replica; ties in round-robin order (a dead one, failing fast, draws traffic
        like it does behind a least-request balancer)."""
        start = next(self._rr) % len(replicas)
        order = replicas[start:] + replicas[:start]
        return min(order, key=lambda r: self.inflight.get(r, 0))

    async def _hang(self, request: web.Request, replica: str) -> web.Response:
        """A wedged replica: the request is accepted and never answered; it stays in flight (what a
        least-request balancer sees) until the client closes the connection."""
        self.inflight[replica] = self.inflight.get(replica, 0) + 1
        try:
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(HANG_POLL_S)
        finally:
            self.inflight[replica] -= 1
        return web.Response(status=499)  # nobody is listening any more

    async def _empty(self, model: _Model, body: dict, chat: bool, replica: str, finish_reason: str,
                     request: web.Request) -> web.Response:
        latency = model.spec.base_latency
        self._due_in(request, latency)
        await asyncio.sleep(max(latency / self.twin.clock.scale, MIN_WALL_LATENCY_S))
        prompt = len(str(body.get("prompt") or "").split())
        self.metrics_of(model, replica).served(latency, prompt, 0, first_token_s=latency,  # vLLM: a finished
                                               finished_reason=finish_reason)  # request, no token
        return web.json_response(empty_completion(model.spec.model_name, chat, finish_reason, prompt,
                                                  int(self.twin.clock.timestamp())),
                                 headers={"x-twin-replica": replica, LATENCY_HEADER: _ms(latency)})

    async def _fail(self, model: _Model, status: int, message: str, kind: str, body: dict | None = None,
                    chat: bool = False, request: web.Request | None = None) -> web.Response:
        if request is not None:
            self._due_in(request, FAIL_LATENCY_S)
        await asyncio.sleep(max(FAIL_LATENCY_S / self.twin.clock.scale, MIN_WALL_LATENCY_S))
        if model.spec.fallback_model:  # defect fallback-model: another model answers, 200 with its text
            self.hub.truth.record("inference", model.subject, "fallback_answer", status=status,
                                  at=self.twin.clock.timestamp())
            return web.json_response(fallback_completion(model.spec.fallback_model, body or {}, chat),
                                     headers={LATENCY_HEADER: _ms(FAIL_LATENCY_S)})
        if model.spec.errors_as_200:
            response = web.json_response({"object": "error", "error": {"message": message, "type": kind,
                                                                       "code": status},
                                          "choices": [{"index": 0, "text": "", "finish_reason": "error"}]})
            response.headers[LATENCY_HEADER] = _ms(FAIL_LATENCY_S)
            return response
        response = _error(status, message, kind)
        response.headers[LATENCY_HEADER] = _ms(FAIL_LATENCY_S)
        return response

    def completion_body(self, model: _Model, req: dict, tokens: int, chat: bool, latency: float, replica: str) -> dict:
        """The answer `replica` served (its vLLM metrics observe it)."""
        body = completion(model.spec.model_name, req, tokens, chat, int(self.twin.clock.timestamp()))
        self.metrics_of(model, replica).served(latency, body["usage"]["prompt_tokens"], tokens,
                                               first_token_s=min(latency, model.spec.base_latency))
        return body

    async def _list_models(self, request: web.Request) -> web.Response:
        created = int(self.twin.clock.timestamp())
        data = [{"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": m.spec.model,
                 "parent": None, "max_model_len": 4096} for name, m in self.models.items()]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, request: web.Request) -> web.Response:
        ready = {name: len(m.replicas) for name, m in self.models.items()}
        ok = all(ready.values())
        return web.json_response({"status": "ok" if ok else "unavailable", "ready_replicas": ready},
                                 status=200 if ok else 503)


def modelled_latency(service_s: float, inflight: int, max_concurrency: int) -> float:
    """Twin seconds one request takes on a replica with `inflight` requests (itself included): a fuller
    batch decodes slower (up to 2x at max_concurrency); beyond it the overload factor (n / c)² applies."""
    ratio = inflight / max_concurrency
    return service_s * (1 + min(ratio, 1.0)) * max(1.0, ratio) ** 2


def install_gateway(twin: Any) -> Gateway:
    from drills.twin.workloads.container_ports import PORT_PROGRAMS
    from drills.twin.workloads.vllm_replica import replica_program

    gateway = Gateway(twin)
    twin.add_component("inference-gateway", gateway.start, gateway.stop)
    twin.server.app.setdefault(PORT_PROGRAMS, []).append(replica_program(gateway))  # port-forward to a replica
    return gateway


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"object": "error", "error": {"message": message, "type": kind, "code": status}},
                             status=status)
