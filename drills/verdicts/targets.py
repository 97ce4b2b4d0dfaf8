"""One rule for targets: which number a drill judges against, and how long it waits for it.

The rule, the same for every numeric contract of every drill (recovery times, lost steps, error
budget, p99 factor, throughput ratio, checkpoint save ratio):

- **The feature's number is the contract.** "training recovers within 15 minutes" judges 15 minutes.
- **A site's profile overrides it only by setting the field explicitly** (`slo.training_recovery_s:
  10m`). A default of the profile model never outvotes the feature; it applies only when the scenario
  states no number for that contract.
- **The record and the report show both**: "target 10m (site profile; the feature says 15m)".
- **Waiting lasts the resolved target plus GRACE of it** (`Target.wait_s`), never a margin over the
  other source's number: a slow recovery is measured up to 20 % past its target (so the report says
  by how much it was late), then the drill stops waiting.

Pure: `resolve` reads an SloConfig-like object (a pydantic model: `model_fields_set` says what the
profile file set), never pytest or the cluster.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from drills.verdicts.timeline import Verdict, format_duration

__all__ = ["GRACE", "FEATURE", "PROFILE", "DEFAULT", "Target", "resolve", "annotate", "duration_s", "show"]

log = logging.getLogger(__name__)

GRACE = 0.2  # a wait lasts target × (1 + GRACE): long enough to say how late a slow recovery was

FEATURE = "feature"  # the scenario's number (the contract)
PROFILE = "profile"  # the site profile set the field explicitly: it overrides the scenario's number
DEFAULT = "default"  # the scenario states no number and the profile sets none: the profile model's default

_UNITS = {"second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600, "hours": 3600,
          "秒": 1, "秒钟": 1, "分钟": 60, "小时": 3600}  # the zh-CN features' "15 分钟" (features/zh/)


@dataclass(frozen=True)
class Target:
    """A resolved target: the value judged and waited for, where it came from, and both candidates."""

    name: str  # the profile field (SloConfig), e.g. "training_recovery_s"
    value: float
    source: str  # FEATURE | PROFILE | DEFAULT
    feature: float | None  # what the scenario says (None: it states no number)
    profile: float | None  # what the profile sets explicitly (None: it does not)
    unit: str = ""  # "s" (a duration), "ratio" (shown as %), "x" (a multiple of a baseline), "steps"

    @property
    def overridden(self) -> bool:
        """The site profile, not the scenario, decided this target."""
        return self.source == PROFILE

    @property
    def wait_s(self) -> float:
        """How long to wait for a time target: the resolved target plus GRACE of it."""
        return self.value * (1.0 + GRACE)

    def describe(self) -> str:
        """"15m (feature)", "10m (site profile; the feature says 15m)", "90 % (profile default; …)"."""
        shown = show(self.value, self.unit)
        if self.source == FEATURE:
            return f"{shown} (feature)"
        if self.source == PROFILE:
            says = f"the feature says {show(self.feature, self.unit)}" if self.feature is not None else \
                "the feature states no number"
            return f"{shown} (site profile; {says})"
        return f"{shown} (profile default; the feature states no number)"

    def to_record(self) -> dict[str, Any]:
        """What records.jsonl keeps (`details.target`, `details.targets[...]`); a time target adds its wait."""
        record = {"name": self.name, "value": self.value, "source": self.source, "feature": self.feature,
                  "profile": self.profile, "unit": self.unit}
        if self.unit == "s":
            record["wait_s"] = round(self.wait_s, 3)
        return record


def resolve(feature_value: float | None, slo: Any, field: str, unit: str = "") -> Target:
    """The one rule: the profile's value if the profile set `field` explicitly, else the feature's
    number, else (the scenario states none) the profile model's default."""
    explicit = field in getattr(slo, "model_fields_set", set()) and getattr(slo, field) is not None
    profile_value = float(getattr(slo, field)) if explicit else None
    feature = None if feature_value is None else float(feature_value)
    if profile_value is not None:
        return Target(field, profile_value, PROFILE, feature, profile_value, unit)
    if feature is not None:
        return Target(field, feature, FEATURE, feature, None, unit)
    default = getattr(slo, field)
    if default is None:
        raise ValueError(f"no target for {field}: the scenario states no number and the profile sets none "
                         f"(set slo.{field} in the profile, or state the number in the feature)")
    return Target(field, float(default), DEFAULT, None, None, unit)


def annotate(verdict: Verdict, target: Target) -> Verdict:
    """The verdict, saying where its target came from when the scenario's number is not what was judged."""
    if target.source == FEATURE:
        return replace(verdict, target_source=FEATURE)
    return replace(verdict, target_source=target.source, reason=f"{verdict.reason} [target {target.describe()}]")


def duration_s(text: str) -> float:
    """A scenario's duration: "15 minutes" → 900, "90 seconds" → 90, "1 hour" → 3600, "15 分钟" → 900."""
    units = "|".join(sorted(_UNITS, key=len, reverse=True))
    match = re.fullmatch(rf"\s*(\d+(?:\.\d+)?)\s*({units})\s*", text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (say e.g. \"15 minutes\")")
    return float(match.group(1)) * _UNITS[match.group(2)]


def show(value: float | None, unit: str) -> str:
    """A target as a reader writes it: 900 s → "15m", 0.9 ratio → "90 %", 2 x → "2×", 2000 steps."""
    if value is None:
        return "—"
    if unit == "s":
        return format_duration(value)
    if unit == "ratio":
        return f"{value * 100:g} %"
    number = f"{value:g}"
    if unit == "x":
        return f"{number}×"
    return f"{number} {unit}".strip()
