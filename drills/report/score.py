"""The resilience score: one number per run that a reviewer can track week over week.

    score = 100 × Σ wᵢ·cᵢ / Σ wᵢ

    wᵢ  severity weight of drill i: blocker 5, critical 3, normal 1, minor 0.5, trivial 0.25
    cᵢ  0 unless the drill counts as a pass (drills.core.outcomes: only the verdict pass does);
        1 if it passed and has no measured recovery or no target;
        0.75 + 0.25 × clamp((target − recovery) / target, 0, 1) if it passed with both.

So a run where every drill passes scores 75–100: exactly 75 when every recovery just met its
target, 100 when recovery was instant; each failure removes its full weight. The formula is printed
in every summary (FORMULA).
"""

from __future__ import annotations

import logging

from drills.core import outcomes
from drills.core.record import Record

__all__ = ["resilience_score", "record_credit", "SEVERITY_WEIGHTS", "FORMULA"]

log = logging.getLogger(__name__)

SEVERITY_WEIGHTS = {"blocker": 5.0, "critical": 3.0, "normal": 1.0, "minor": 0.5, "trivial": 0.25}

FORMULA = ("score = 100 × Σ wᵢ·cᵢ / Σ wᵢ; wᵢ = severity weight (blocker 5, critical 3, normal 1, "
           "minor 0.5, trivial 0.25); cᵢ = 0 if failed or inconclusive, else 0.75 + 0.25 × clamp((target − recovery) "
           "/ target, 0, 1) (1 when there is no target or no measurement)")


def resilience_score(records: list[Record]) -> float | None:
    """Severity-weighted pass rate scaled by recovery margin, 0–100; None for a run with no records."""
    if not records:
        return None
    weights = [SEVERITY_WEIGHTS.get(r.severity.lower(), 1.0) for r in records]
    total = sum(weights)
    earned = sum(w * record_credit(r) for w, r in zip(weights, records))
    return round(100.0 * earned / total, 1) if total else None


def record_credit(record: Record) -> float:
    """cᵢ of the formula for one record (an inconclusive drill earns nothing, like a failed one)."""
    if not outcomes.of(record).counts_as_pass:
        return 0.0
    recovery, target = record.recovery_s, record.target_s
    if recovery is None or not target:
        return 1.0
    margin = min(1.0, max(0.0, (target - recovery) / target))
    return 0.75 + 0.25 * margin
