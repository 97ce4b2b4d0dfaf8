"""The profile's building blocks: strict sections and durations with units (`900`, "900s", "15m", "1h30m")."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Strict", "Seconds", "Ratio", "parse_duration", "MAX_SECONDS"]

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?!s))?\s*(?:(\d+(?:\.\d+)?)s)?\s*(?:(\d+(?:\.\d+)?)ms)?\s*$")


def parse_duration(value: Any) -> float:
    """Seconds from 900, "900", "900s", "15m", "1h30m" or "500ms"; ValueError says what is accepted."""
    if isinstance(value, bool):
        raise ValueError(f'must be a duration in seconds, like 900, "900s" or "15m" (got {value!r})')
    if isinstance(value, (int, float)):
        return _finite(float(value), value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _finite(float(text), value)
        except ValueError:
            pass
        match = _DURATION.match(text)
        if match and any(match.groups()):
            h, m, s, ms = (float(g) if g else 0.0 for g in match.groups())
            return h * 3600 + m * 60 + s + ms / 1000
    raise ValueError(f'must be a duration in seconds, like 900, "900s" or "15m" (got {value!r})')


def _finite(seconds: float, given: Any) -> float:
    if not math.isfinite(seconds):
        raise ValueError(f'must be a finite duration in seconds, like 900, "900s" or "15m" (got {given!r})')
    return seconds


MAX_SECONDS = 7 * 86_400  # a week: any longer duration in a drill profile is a typo
Seconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0, le=MAX_SECONDS)]
Ratio = Annotated[float, Field(gt=0, le=1)]


class Strict(BaseModel):
    """A profile section: an unknown key is an error (a typo must not be silently ignored); frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # .inf/.nan are never a setting
