"""What counts as a successful completion, and why a request failed — pure, free of locust.

A response is a success only if it is a valid completion (DESIGN §5): status 2xx, no `error` field, and
generated text (`choices[0].text` or `choices[0].message.content`, non-empty). Everything else fails with
a *kind* the load records per bucket, so a judge counts e.g. "200 with an error payload" or "hung past the
client timeout" from a field, never from the wording of a message:

- `status`      a non-2xx answer (503 no ready replica, 502 …)
- `error_200`   a 2xx answer whose body carries an `error` (a proxy masking an error as success)
- `invalid`     a 2xx answer without generated text (not JSON, no choices, empty text)
- `wrong_model` a 2xx completion from another model: its `model` names neither the model requested nor the one
                the endpoint answered as at first (a router's fallback model serving the users: text, not the model)
- `timeout`     no answer within the client timeout (a hung request)
- `connection`  the connection failed (refused, reset, closed)

The client timeout is a cluster-time contract (30 s by default); locust waits in wall time, so on a twin
that dilates time `client_timeout_wall_s` divides by the scale, floored so this machine's own HTTP
overhead is never mistaken for a hang.
"""

from __future__ import annotations

import json
import logging
from typing import Collection

__all__ = ["STATUS", "ERROR_200", "INVALID", "WRONG_MODEL", "TIMEOUT", "CONNECTION", "KINDS", "MASKED",
           "classify_answer", "classify_exception", "answer_model", "client_timeout_wall_s", "DEFAULT_CLIENT_TIMEOUT_S",
           "MIN_WALL_TIMEOUT_S"]

log = logging.getLogger(__name__)

STATUS, ERROR_200, INVALID, TIMEOUT, CONNECTION = "status", "error_200", "invalid", "timeout", "connection"
WRONG_MODEL = "wrong_model"
KINDS = (STATUS, ERROR_200, INVALID, WRONG_MODEL, TIMEOUT, CONNECTION)
MASKED = (ERROR_200, INVALID, WRONG_MODEL, TIMEOUT)  # failures a status-code dashboard does not see as errors
DEFAULT_CLIENT_TIMEOUT_S = 30.0  # cluster seconds a client waits for a completion
MIN_WALL_TIMEOUT_S = 0.25  # never wait less wall time than this (a busy machine's HTTP hiccup is not a hang)


def classify_answer(status: int, body: bytes | str | None, models: Collection[str] = ()) -> tuple[str | None, str]:
    """(None, "") for a valid completion, else (kind, a short reason) for an HTTP answer. `models`: the names a
    valid answer's `model` may carry (the one requested, the one the endpoint answered as at first); empty: any."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else (body or "")
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = None
    if not 200 <= status < 300:
        return STATUS, f"{status} {_error_message(doc) or text.strip().replace(chr(10), ' ')[:80]}".strip()
    if not isinstance(doc, dict):
        return INVALID, f"{status} not a JSON completion"
    if doc.get("error"):
        return ERROR_200, f"{status} with an error payload: {_error_message(doc) or 'error'}"
    if not _generated_text(doc):
        return INVALID, f"{status} without generated text"
    named = doc.get("model")
    if models and isinstance(named, str) and named not in models:
        return WRONG_MODEL, f"{status} from another model: {named[:60]}, not {' / '.join(sorted(models))[:100]}"
    return None, ""


def answer_model(body: bytes | str | None) -> str | None:
    """The model a completion names (`model`), None when the body names none."""
    try:
        doc = json.loads(body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else (body or ""))
    except ValueError:
        return None
    named = doc.get("model") if isinstance(doc, dict) else None
    return named if isinstance(named, str) and named else None


def classify_exception(exc: BaseException) -> str:
    """`timeout` for a request that got no answer in time, else `connection`. HTTP clients wrap the cause
    (geventhttpclient's RetriesExceeded keeps it in `original`), so the chain is followed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or any(t.__name__ == "Timeout" for t in type(current).__mro__):
            return TIMEOUT
        nxt = getattr(current, "original", None)
        current = nxt if isinstance(nxt, BaseException) else current.__cause__ or current.__context__
    return CONNECTION


def client_timeout_wall_s(cluster_s: float, scale: float, floor_s: float = MIN_WALL_TIMEOUT_S) -> float:
    """Wall seconds locust waits for `cluster_s` cluster seconds on a clock `scale`× faster (floored)."""
    return max(cluster_s / max(scale, 1e-9), floor_s)


def _generated_text(doc: dict) -> str:
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    first = choices[0]
    message = first.get("message")
    text = first.get("text")
    if text is None and isinstance(message, dict):
        text = message.get("content")
    return text if isinstance(text, str) and text.strip() else ""


def _error_message(doc) -> str:
    if not isinstance(doc, dict):
        return ""
    err = doc.get("error")
    if isinstance(err, dict):
        err = err.get("message") or err.get("type")
    return str(err)[:80] if err else ""
