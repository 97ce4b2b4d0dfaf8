"""The bodies of the twin gateway's OpenAI-compatible answers, shaped as vLLM's (pure: no I/O, no metrics)."""

from __future__ import annotations

import secrets

__all__ = ["completion", "fallback_completion", "prompt_of"]

_WORDS = "the cluster recovered quickly after the drill and every replica answered again".split()


def prompt_of(req: dict, chat: bool) -> str:
    if not chat:
        return str(req.get("prompt") or "")
    return " ".join(str(m.get("content", "")) for m in req.get("messages") or [] if isinstance(m, dict))


def completion(model: str, req: dict, tokens: int, chat: bool, created: int) -> dict:
    """A completion of `tokens` tokens from `model`, with its `usage`."""
    text = " ".join(_WORDS[i % len(_WORDS)] for i in range(tokens))
    usage = {"prompt_tokens": len(prompt_of(req, chat).split()), "completion_tokens": tokens}
    usage["total_tokens"] = usage["prompt_tokens"] + tokens
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": "length"}
        return {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion", "created": created,
                "model": model, "choices": [choice], "usage": usage}
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
    return {"id": f"cmpl-{secrets.token_hex(12)}", "object": "text_completion", "created": created,
            "model": model, "choices": [choice], "usage": usage}


def fallback_completion(name: str, req: dict, chat: bool) -> dict:
    """A completion from the fallback model (defect fallback-model): well-formed, with text, named `name`."""
    tokens = max(1, min(int(req.get("max_tokens") or 16), 4096))
    text = " ".join(_WORDS[(i + 3) % len(_WORDS)] for i in range(tokens))
    usage = {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens}
    if chat:
        return {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion", "model": name, "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}]}
    return {"id": f"cmpl-{secrets.token_hex(12)}", "object": "text_completion", "model": name, "usage": usage,
            "choices": [{"index": 0, "text": text, "finish_reason": "length"}]}
