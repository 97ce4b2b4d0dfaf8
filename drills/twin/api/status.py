"""meta/v1 Status answers: every API failure the twin returns is one of these, like the real server.

Handlers raise `ApiError`; the server middleware renders it as a Status body with the same code, encoded
as the real server's Go encoder writes it (`encode`): fields in the struct's order, compact, `<>&` escaped,
a trailing newline — clients compare these bodies byte for byte (the python client's create_from_yaml
error text embeds them).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ApiError",
    "encode",
    "status_body",
    "success",
    "not_found",
    "already_exists",
    "conflict",
    "invalid",
    "bad_request",
    "method_not_allowed",
    "unsupported_media_type",
    "too_many_requests",
    "gone",
]


class ApiError(Exception):
    """An API failure with its HTTP code, Status reason and human message (what the client prints)."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 metadata: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.metadata = metadata  # ListMeta of the Status (an expired list's inconsistent continue token)

    def body(self) -> dict:
        body = status_body(self.code, self.reason, self.message, self.details)
        if self.metadata:
            body["metadata"] = dict(self.metadata)
        return body


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """The Status object kubectl and the python client parse into their error messages."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code  # after details: metav1.Status's field order
    return body


def encode(body: dict) -> bytes:
    """`body` as Go's encoding/json Encoder writes it (the keys in the order given)."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n").encode()


def success(code: int = 200, details: dict | None = None) -> dict:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        body["details"] = details
    return body


def _details(name: str, group: str, kind: str, **extra) -> dict:
    d = {"name": name, "group": group, "kind": kind} if group else {"name": name, "kind": kind}
    d.update(extra)
    return d


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{what} "{name}" not found', _details(name, group, plural))


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    return ApiError(409, "AlreadyExists", f'{what} "{name}" already exists', _details(name, group, plural))


def conflict(plural: str, name: str, group: str = "", why: str = "") -> ApiError:
    what = f"{plural}.{group}" if group else plural
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}',
                    _details(name, group, plural))


def invalid(kind: str, name: str, causes: list[tuple[str, ...]], group: str = "") -> ApiError:
    """422 with `Kind "name" is invalid: field: message` like the real validation errors (several causes in
    brackets, as an aggregate prints them). A cause is (field, message) or (field, message, reason)."""
    texts = [f"{c[0]}: {c[1]}" for c in causes]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    what = f"{kind}.{group}" if group else kind
    details = _details(name, group, kind, causes=[
        {"reason": c[2] if len(c) > 2 else "FieldValueInvalid", "message": c[1], "field": c[0]} for c in causes])
    return ApiError(422, "Invalid", f'{what} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - accepted '
                    f'media types include: application/json-patch+json, application/merge-patch+json, '
                    f'application/apply-patch+yaml, application/strategic-merge-patch+json (got "{content_type}")')


def too_many_requests(message: str, causes: list[dict] | None = None) -> ApiError:
    return ApiError(429, "TooManyRequests", message, {"causes": causes} if causes else None)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
