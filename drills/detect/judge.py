"""Judging detection: did the platform's own monitoring raise the alert in time, stop raising it after the
recovery, and stay quiet enough that an on-call would not mute it (the seed: hundreds of alerts a day and the
on-call mutes them)? Pure functions from measured times and counts to `Verdict`s (drills/verdicts/timeline).

Check names are the catalog's keys (drills/core/catalog.yaml): `detection` → not_detected, `alert storm` →
alert_storm, `alert resolution` → not_restored. A detection that never came is not `never_reached` (that would
read as an SLO breach): it is its own category, so a report says "the monitoring is blind", not "recovery slow".
When the twin's clock was too fast for Prometheus to scrape and evaluate at the site's cadence (`slowed`), a
late or missing alert cannot be blamed on the platform: that verdict is inconclusive and says why.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Sequence

from drills.verdicts.timeline import Verdict, format_duration, within

__all__ = ["judge_detection", "judge_resolution", "judge_storm", "DETECTION", "RESOLUTION", "STORM"]

log = logging.getLogger(__name__)

DETECTION, RESOLUTION, STORM = "detection", "alert resolution", "alert storm"


def judge_detection(alert: str, injected: datetime | None, raised: datetime | None, budget_s: float, *,
                    slowed: bool = False, resolution_s: float = 0.0, rules: Sequence[str] | None = None) -> Verdict:
    """Pass iff `alert` was raised (firing, notifying) at most `budget_s` cluster seconds after the injection.
    `rules`: the alerting rules the Prometheus evaluates, when read (a missing one is named in the sentence)."""
    budget = format_duration(budget_s)
    if injected is None:
        return Verdict(DETECTION, False, None, budget_s, "s", f"{alert}: no fault was injected, nothing to detect",
                       inconclusive=True)
    measured = None if raised is None else max(0.0, (raised - injected).total_seconds())
    if within(measured, budget_s):
        return Verdict(DETECTION, True, measured, budget_s, "s",
                       f"the monitoring raised {alert} {format_duration(measured)} after the fault, within {budget}")
    said = (f"no alert {alert} within {budget}" if measured is None else
            f"the monitoring raised {alert} only {format_duration(measured)} after the fault, over {budget}")
    if measured is None and rules is not None and alert not in rules:
        said += f" (its Prometheus has no alerting rule named {alert})"
    if slowed:
        return Verdict(DETECTION, False, measured, budget_s, "s",
                       f"{said}, but the twin's clock ran too fast for Prometheus to scrape and evaluate at the "
                       f"site's cadence (one scrape + evaluation = {format_duration(resolution_s)} of cluster time): "
                       f"not judged; run the twin slower", inconclusive=True)
    return Verdict(DETECTION, False, measured, budget_s, "s",
                   f"{said}: the platform's on-call would not have known")


def judge_resolution(alert: str, since: datetime | None, resolved: datetime | None, budget_s: float,
                     since_what: str = "the recovery") -> Verdict:
    """Pass iff every firing instance of `alert` was gone at most `budget_s` after `since` (the recovery)."""
    budget = format_duration(budget_s)
    if since is None:
        return Verdict(RESOLUTION, False, None, budget_s, "s",
                       f"{alert}: {since_what} was not reached, so its resolution cannot be judged", inconclusive=True)
    measured = None if resolved is None else max(0.0, (resolved - since).total_seconds())
    if within(measured, budget_s):
        return Verdict(RESOLUTION, True, measured, budget_s, "s",
                       f"{alert} resolved {format_duration(measured)} after {since_what}, within {budget}")
    said = "still firing" if measured is None else f"resolved only {format_duration(measured)}"
    return Verdict(RESOLUTION, False, measured, budget_s, "s",
                   f"{alert} {said} {budget} after {since_what}: the on-call is still paged for a platform that "
                   f"recovered")


def judge_storm(distinct: Sequence[str], budget: int) -> Verdict:
    """Pass iff the fault raised at most `budget` distinct alerts (each a label set: one page each)."""
    names = sorted(set(distinct))
    count = len(distinct)
    shown = ", ".join(names[:8]) + ("…" if len(names) > 8 else "")
    if count <= budget:
        return Verdict(STORM, True, float(count), float(budget), "alerts",
                       f"{count} distinct alert(s) for one fault ({shown or 'none'}), within the budget of {budget}")
    return Verdict(STORM, False, float(count), float(budget), "alerts",
                   f"alert storm: {count} distinct alerts for one fault ({shown}), over the budget of {budget}: an "
                   f"on-call buried like this mutes them")
