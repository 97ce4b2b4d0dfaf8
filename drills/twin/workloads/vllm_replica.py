"""One vLLM replica's own OpenAI API, as `kubectl port-forward pod/<replica> 8000` reaches it (the gateway
answers for the model's Service; this is the pod itself): a port program (container_ports.Program) the
gateway registers for the pods of its Deployments on their `--port`.

- The replica listens once its model is loaded (the container Ready), and still while it terminates
  (vLLM serves until it stops); before that, nothing listens.
- `GET /health` → 200, empty; `GET /metrics` → vLLM's Prometheus metrics (drills/twin/exporters/vllm.py);
  `GET /v1/models` → this replica's model; `POST /v1/completions` and
  `/v1/chat/completions` → the gateway's answer body, after the modelled latency with this replica's
  in-flight requests (shared with the gateway's routing: both load the same replica); an unknown
  `model` → vLLM's 404 error; any other path → FastAPI's 404 `{"detail":"Not Found"}`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from drills.twin.workloads.container_ports import Factory, HttpConnection, HttpReply, HttpRequest

__all__ = ["replica_program"]

_JSON = (("content-type", "application/json"),)


def replica_program(gateway: Any) -> Callable[[dict, int, Callable[[], float]], Factory | None]:
    def program(pod: dict, port: int, now: Callable[[], float]) -> Factory | None:
        meta = pod["metadata"]
        for model in gateway.models.values():
            spec = model.spec
            if (meta.get("namespace"), (meta.get("labels") or {}).get("app"), port) == (spec.namespace, spec.name,
                                                                                          spec.port):
                if not _listening(pod):
                    return None
                return lambda: HttpConnection(_App(gateway, model, meta["name"]), now, "uvicorn")
        return None
    return program


def _listening(pod: dict) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    running = [s for s in statuses if "running" in (s.get("state") or {})]
    return bool(running) and (all(s.get("ready") for s in running) or bool(pod["metadata"].get("deletionTimestamp")))


class _App:
    def __init__(self, gateway: Any, model: Any, replica: str):
        self.gateway, self.model, self.replica = gateway, model, replica

    async def __call__(self, req: HttpRequest) -> HttpReply:
        path = req.path.split("?", 1)[0]
        if (req.method, path) == ("GET", "/health"):
            return HttpReply(200, b"")
        if (req.method, path) == ("GET", "/metrics"):  # vLLM's server mounts prometheus_client's app there
            from drills.twin.exporters import TEXT_FORMAT

            body = self.gateway.metrics_of(self.model, self.replica).exposition(self.gateway.inflight.get(self.replica, 0))
            return HttpReply(200, body, (("content-type", TEXT_FORMAT),))
        if (req.method, path) == ("GET", "/v1/models"):
            spec = self.model.spec
            created = int(self.gateway.twin.clock.timestamp())
            return _json(200, {"object": "list", "data": [{
                "id": spec.model_name, "object": "model", "created": created, "owned_by": "vllm", "root": spec.model,
                "parent": None, "max_model_len": 4096}]})
        if req.method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return await self._complete(req, chat=path.endswith("/chat/completions"))
        return _json(404, {"detail": "Not Found"})

    async def _complete(self, req: HttpRequest, chat: bool) -> HttpReply:
        from drills.twin.workloads.inference_gateway import MIN_WALL_LATENCY_S, modelled_latency

        try:
            body = json.loads(req.body or b"null")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as err:
            return _error(400, f"invalid JSON body: {err}", "BadRequestError")
        spec = self.model.spec
        if body.get("model") not in (None, spec.model_name, spec.model):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        tokens = max(1, min(int(body.get("max_tokens") or 16), 4096))
        inflight = self.gateway.inflight
        inflight[self.replica] = inflight.get(self.replica, 0) + 1
        try:
            latency = modelled_latency(spec.base_latency + tokens / spec.tokens_per_second, inflight[self.replica],
                                       spec.max_concurrency)
            await asyncio.sleep(max(latency / self.gateway.twin.clock.scale, MIN_WALL_LATENCY_S))
        finally:
            inflight[self.replica] -= 1
        return _json(200, self.gateway.completion_body(self.model, body, tokens, chat, latency, self.replica))


def _json(status: int, body: dict) -> HttpReply:
    return HttpReply(status, json.dumps(body, separators=(",", ":")).encode(), _JSON)  # FastAPI's JSONResponse


def _error(status: int, message: str, kind: str) -> HttpReply:
    return _json(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})
