"""Building blocks of the twin's profile schema: strict models, durations, named mappings, taints."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Duration", "Fraction", "Strict", "Named", "Taint", "Toleration", "parse_duration"]

log = logging.getLogger(__name__)

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any) -> Any:
    """`90`, `90s`, `1m30s`, `250ms` → seconds (float); anything else is left to pydantic to reject."""
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f"is not a duration like 50s, 5m or 1h30m (got {value!r})")
        return sum(float(n) * _UNITS[u] for n, u in parts)
    return value


Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


def _name_from_key(value: Any) -> Any:
    """A mapping `{name: {...}}` gives each entry its name (an empty entry `name:` is `{}`)."""
    if not isinstance(value, dict):
        return value
    out = {}
    for key, entry in value.items():
        entry = {} if entry is None else entry
        if isinstance(entry, dict):
            if entry.get("name", key) != key:
                raise ValueError(f"entry {key!r} names itself {entry['name']!r}; drop `name` or make them equal")
            entry = {**entry, "name": str(key)}
        out[str(key)] = entry
    return out


class Strict(BaseModel):
    """Base of every profile model: unknown fields are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def Named(model: type) -> Any:  # noqa: N802 - reads like a type in annotations
    """`dict[str, model]` keyed by name, each entry's `name` filled from its key."""
    return Annotated[dict[str, model], BeforeValidator(_name_from_key)]


class Taint(Strict):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def to_k8s(self) -> dict:
        out = {"key": self.key, "value": self.value, "effect": self.effect}
        return {k: v for k, v in out.items() if v is not None}


class Toleration(Strict):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    def to_k8s(self) -> dict:
        out = {"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect,
               "tolerationSeconds": self.toleration_seconds}
        return {k: v for k, v in out.items() if v is not None}


    @classmethod
    def for_taint(cls, taint: "Taint") -> "Toleration":
        return cls(key=taint.key, operator="Exists", effect=taint.effect)
