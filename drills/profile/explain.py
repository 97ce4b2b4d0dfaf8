"""Turn a pydantic ValidationError into the one line a user reads: file, field path, the fix.

`profile prod.yaml: slo.training_recovery_s: must be a duration in seconds, like 900, "900s" or
"15m" (got "fifteen")`. Unknown keys get a did-you-mean and the allowed names; values of unknown keys
and of secret-ish fields are never echoed (a pasted password must not reach a log).
"""

from __future__ import annotations

import difflib
import json
import logging
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["explain_validation_error"]

log = logging.getLogger(__name__)

_HIDE_INPUT = ("password", "secret", "token", "key")


def explain_validation_error(what: str, err: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line for the first problem of `err`, with a count of the others."""
    problems = err.errors(include_url=False)
    first = problems[0]
    loc = [part for part in first["loc"]]
    path = ".".join(str(p) for p in loc) or "(top level)"
    message = _explain(first, loc, model)
    more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
    return f"{what}: {path}: {message}{more}"


def _explain(problem: dict, loc: list, model: type[BaseModel] | None) -> str:
    kind = problem["type"]
    ctx = problem.get("ctx") or {}
    got = _got(problem, loc)
    if kind == "missing":
        return "required; add it to the profile"
    if kind == "extra_forbidden":
        allowed = _allowed_fields(model, loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        did_you_mean = f"; did you mean {hint[0]!r}?" if hint else ""
        listing = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        return f"unknown field{did_you_mean}{listing}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}{got}"
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return f"must be {bounds[kind]} {limit}{got}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be a whole number{got}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number{got}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false{got}"
    if kind == "string_type":
        return f"must be text{got}"
    if kind in ("list_type", "tuple_type"):
        return f"must be a list{got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping of key: value{got}"
    if kind == "value_error":
        return str(ctx.get("error") or problem["msg"]).removeprefix("Value error, ")
    msg = problem["msg"]
    return (msg[:1].lower() + msg[1:]) + got


def _got(problem: dict, loc: list) -> str:
    if problem["type"] in ("missing", "extra_forbidden"):
        return ""
    if any(marker in str(part).lower() for part in loc for marker in _HIDE_INPUT):
        return ""
    value = problem.get("input")
    if isinstance(value, (dict, list)):
        return ""
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return f" (got {text[:60]})"


def _allowed_fields(model: type[BaseModel] | None, loc: list) -> list[str]:
    """Field names of the model found by walking `loc` from `model` (empty when it cannot be found)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current, index=isinstance(part, int))
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = field.annotation
    current = _unwrap(current, index=False)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any, index: bool) -> Any:
    """Optional[X] → X; list[X] → X when indexing into it."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else annotation
        origin = typing.get_origin(annotation)
    if index and origin in (list, tuple):
        return typing.get_args(annotation)[0]
    return annotation
