"""A record's headline figures — (target, measured) as short text — for the final table and the summary.

A drill with a recovery target shows its recovery time against that target. A drill without one
(storage saturation) shows a check instead: the first check that failed, else the drill's headline
check from drills/core/catalog.yaml, else its first measured check. A check judged against a multiple of
a baseline shows that multiple (`1.3× save` against `≤ 2×`); any other shows value and unit against
the limit, with ≤ or ≥ read from how the value was judged. A target the site profile set instead of
the feature's number says so: `10m (site profile)` (the one rule, drills/verdicts/targets.py; the
record's reason names both numbers). The resilience score is not affected.
"""

from __future__ import annotations

import logging

from drills.core.catalog import catalog
from drills.core.record import Check, Record
from drills.report.text import fmt_seconds
from drills.verdicts.targets import PROFILE

__all__ = ["headline_figures", "headline_check", "check_figures", "overridden", "short_scenario", "scenario_cell"]

log = logging.getLogger(__name__)


def headline_figures(record: Record) -> tuple[str, str]:
    """(target, measured) for one record; '—' where there is nothing to show."""
    if record.target_s:
        return fmt_seconds(record.target_s) + overridden(record), fmt_seconds(record.recovery_s)
    check = headline_check(record)
    if check is None:
        return "—", fmt_seconds(record.recovery_s)
    return check_figures(check)


def headline_check(record: Record) -> Check | None:
    """The check that speaks for a record without a recovery target (see the module docstring)."""
    checks = [c for c in record.checks if c.measured is not None]
    if not checks:
        return None
    failed = [c for c in checks if not c.passed]
    if failed:
        return failed[0]
    info = catalog().get(record.drill)
    named = [c for c in checks if info is not None and c.name == info.headline]
    return (named or checks)[0]


def check_figures(check: Check) -> tuple[str, str]:
    """(limit, measured) of one recorded check, e.g. ('≤ 2×', '1.3× save') or ('≥ 20 MB/s', '837 MB/s')."""
    measured, target, base = check.measured, check.target, check.baseline
    sign = _sign(measured, target, check.passed)
    if base:
        noun = check.name.split()[-1:] or [""]
        shown = f"{_num(measured / base)}× {noun[0]}".rstrip()
        limit = "—" if target is None else f"{sign}{_num(target / base)}×{overridden(check)}"
        return limit, shown
    unit = f" {check.unit}" if check.unit else ""
    limit = "—" if target is None else f"{sign}{_num(target)}{unit}{overridden(check)}"
    return limit, f"{_num(measured)}{unit}"


def overridden(record_or_check) -> str:
    """" (site profile)" when the site profile, not the feature, set this record's recovery target (its
    `details.target`) or this check's target (its `target_source`); else ""."""
    source = getattr(record_or_check, "target_source", None)
    if source is None and hasattr(record_or_check, "details"):
        source = (record_or_check.details.get("target") or {}).get("source")
    return " (site profile)" if source == PROFILE else ""


def scenario_cell(name: str, example: dict | None, siblings: list[str], width: int) -> str:
    """A scenario's name for a table cell of `width` characters that tells it from its siblings: an Outline's
    row that does not fit keeps its first word and its Example's values ("Drop … nxos, exec"), which are what
    differ between the rows of one Outline; a plain Scenario is shortened as `short_scenario` does."""
    if len(name) <= width or not example:
        return short_scenario(name, siblings, width)
    values = ", ".join(str(v) for v in example.values())
    first = name.split()[0]
    for text in (f"{first} … {values}", values):
        if len(text) <= width:
            return text
    return values[:max(1, width - 1)] + "…"


def short_scenario(name: str, siblings: list[str], width: int) -> str:
    """`name` in at most about `width` characters, keeping what tells it from its siblings (the Outline's
    example values): words it shares with its closest sibling go first, from the end of the shared start
    (its first word stays) and then from the end of the shared tail, each gap shown as '…'."""
    if len(name) <= width:
        return name
    words = name.split()
    head_n = tail_n = 0
    for other in (s.split() for s in siblings if s != name):
        head_n = max(head_n, _common(words, other))
        tail_n = max(tail_n, min(_common(words[::-1], other[::-1]), len(words) - head_n))
    head, middle, tail = words[:head_n], words[head_n:len(words) - tail_n], words[len(words) - tail_n:]
    cut_head = cut_tail = False

    def text() -> str:
        parts = [*head, *(["…"] if cut_head else []), *middle, *tail, *(["…"] if cut_tail else [])]
        return " ".join(parts)

    while len(text()) > width and len(head) > 1:
        head.pop()
        cut_head = True
    while len(text()) > width and tail:
        tail.pop()
        cut_tail = True
    return text()


def _common(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _sign(measured: float, target: float | None, passed: bool) -> str:
    """'≤ ' for a ceiling, '≥ ' for a floor: a pass below its limit (or a fail above it) had a ceiling."""
    if target is None or measured == target:
        return ""
    return "≤ " if (measured < target) == passed else "≥ "


def _num(value: float) -> str:
    """Three significant figures, no trailing zeros; whole numbers from 100 up (837, 0.0196, 1.3, 2)."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{round(value, 1):g}"
    return f"{value:.3g}"
