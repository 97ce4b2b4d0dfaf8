"""The drill catalog (drills/core/catalog.yaml) as data: labels, the SLO that bounds each drill, categories,
the headline check.

A feature marks itself as drill X by carrying X's tag (`@gpu_node_loss`); the recorder, the progress
display and the runner look the drill up here. Later drills add an entry, not code.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
from dataclasses import dataclass, field
from typing import Iterable

from drills.core import datafiles
from drills.core.errors import InvalidProfile
from drills.core.record import Category

__all__ = ["DrillInfo", "catalog", "drill_for_tags", "UNKNOWN"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DrillInfo:
    id: str
    tag: str
    epic: str
    feature: str
    severity: str = "normal"
    slo: str | None = None  # the SloConfig field of its recovery target (resolved by drills/verdicts/targets.py)
    categories: dict[str, str] = field(default_factory=dict)  # check name → report category
    headline: str | None = None  # the check a reviewer reads first when the drill has no recovery target
    names_zh: tuple[str, str] | None = None  # (epic, feature) in Chinese

    def names(self, lang: str = "en") -> tuple[str, str]:
        """(epic, feature) as the report of a run in `lang` labels them (English when not translated)."""
        return tuple(self.names_zh) if lang == "zh" and self.names_zh else (self.epic, self.feature)

    def category(self, check: str) -> Category | None:
        """The report category of this drill's check `check` failing (None: not catalogued)."""
        named = self.categories.get(check)
        return None if named is None else Category(named)


UNKNOWN = DrillInfo(id="drill", tag="", epic="Drills", feature="Drill")


@functools.lru_cache(maxsize=1)
def catalog() -> dict[str, DrillInfo]:
    text = (importlib.resources.files("drills.core") / "catalog.yaml").read_text(encoding="utf-8")
    drills = {key: DrillInfo(id=key, **value) for key, value in (datafiles.load_text(text) or {}).items()}
    known = {c.value for c in Category}
    for info in drills.values():  # a typo here would surface only when that check fails: refuse it now
        wrong = sorted(set(info.categories.values()) - known)
        if wrong:
            raise InvalidProfile(f"catalog.yaml: {info.id}: unknown categor{'y' if len(wrong) == 1 else 'ies'} "
                                 f"{', '.join(wrong)} (known: {', '.join(sorted(known))})")
    return drills


def drill_for_tags(tags: Iterable[str]) -> DrillInfo:
    """The drill whose tag is among `tags` (feature and scenario tags), else UNKNOWN."""
    tags = set(tags)
    return next((d for d in catalog().values() if d.tag in tags), UNKNOWN)
