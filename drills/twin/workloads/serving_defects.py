"""Serving defects where a replica answers and serves nothing: HTTP 200, a well-formed completion, no text.

Two ways a platform gets there (issue 30, class 5 on the rolling restart and the noisy neighbour):
- `empty_replacements`: the replicas a rollout brings (those joining the Endpoints once the Deployment was whole)
  run what the restart pulled — a moved tag whose tokenizer ends every sequence at once: `finish_reason: stop`,
  no token generated. vLLM's own metrics count each as a finished request.
- `shares_gpus`: the node's GPUs are time-sliced (the device plugin's `sharing.timeSlicing`: one GPU advertised as
  several), so a pod of another workload placed on a serving node shares the replica's physical GPU; the replica's
  engine, its KV-cache memory taken, aborts what it generates: `finish_reason: abort`, no text, while that pod runs.

`GpuNeighbours` is the second one's view of the cluster: the Running pods that request GPUs, by node, from the
gateway's pod informer (the namespaces of its models).
"""

from __future__ import annotations

import logging
import secrets

from drills.twin.controllers.nodeutil import GPU, is_terminal, parse_quantity

__all__ = ["GpuNeighbours", "empty_completion"]

log = logging.getLogger(__name__)


class GpuNeighbours:
    """Running GPU pods by node, with their `app` label: who shares a replica's node (and, time-sliced, its GPU)."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, str]] = {}  # pod → (node, app) for Running pods that request GPUs

    def on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        running = (pod.get("status") or {}).get("phase") == "Running" and not is_terminal(pod)
        if etype == "DELETED" or not node or not running or not _gpus(pod):
            self._pods.pop(name, None)
            return
        self._pods[name] = (node, (pod["metadata"].get("labels") or {}).get("app", ""))

    def beside(self, replica: str, app: str) -> str | None:
        """A Running GPU pod of another workload than `app` on `replica`'s node, or None."""
        here = self._pods.get(replica)
        if here is None:
            return None
        return next((p for p, (node, other) in sorted(self._pods.items()) if node == here[0] and other != app), None)


def empty_completion(model_name: str, chat: bool, finish_reason: str, prompt_tokens: int, created: int) -> dict:
    """A vLLM-shaped answer with no generated text: what a client gets from a replica that serves nothing."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "total_tokens": prompt_tokens}
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": finish_reason}
        return {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion", "created": created,
                "model": model_name, "choices": [choice], "usage": usage}
    choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
    return {"id": f"cmpl-{secrets.token_hex(12)}", "object": "text_completion", "created": created,
            "model": model_name, "choices": [choice], "usage": usage}


def _gpus(pod: dict) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        total += int(parse_quantity({**(res.get("limits") or {}), **(res.get("requests") or {})}.get(GPU)))
    return total
