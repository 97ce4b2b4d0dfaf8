"""Judging detection: did the platform's own monitoring raise the alert in time, stop raising it after the
recovery, and stay quiet enough that an on-call would not mute it (the seed: hundreds of alerts a day and the
on-call mutes them)? Pure functions from measured times and counts to `Verdict`s (drills/verdicts/timeline).

Check names are the catalog's keys (drills/core/catalog.yaml): `detection` → not_detected, `alert storm` →
alert_storm, `alert resolution` → not_restored, `quiet monitoring` → paged (a planned operation woke the on-call).
Quiet is a claim only when the stack was watching (drills/detect/watching.py): otherwise inconclusive, naming why.
A detection that never came is not `never_reached` (that would read as an SLO breach): it is its own category, so a report says "the monitoring is blind", not "recovery slow".
When the twin's clock was too fast for Prometheus to scrape and evaluate at the site's cadence (`slowed`), a
late or missing alert cannot be blamed on the platform: that verdict is inconclusive and says why.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Mapping, Sequence

from drills.verdicts.timeline import Verdict, format_duration, within

__all__ = ["judge_detection", "judge_resolution", "judge_storm", "judge_quiet", "DETECTION", "RESOLUTION", "STORM",
           "QUIET"]

log = logging.getLogger(__name__)

DETECTION, RESOLUTION, STORM, QUIET = "detection", "alert resolution", "alert storm", "quiet monitoring"


def judge_detection(alert: str, injected: datetime | None, raised: datetime | None, budget_s: float, *,
                    slowed: bool = False, resolution_s: float = 0.0, rules: Sequence[str] | None = None,
                    already: Sequence[str] = (), elsewhere: Sequence[str] = ()) -> Verdict:
    """Pass iff `alert` was raised (firing, notifying) at most `budget_s` cluster seconds after the injection, by an
    instance that was not firing before it. `rules`: the alerting rules the Prometheus evaluates, when read (a
    missing one is named in the sentence). `already`: instances of it firing before the fault (their labels): with
    no new instance, whether the monitoring detects this fault cannot be told — inconclusive, not a miss and never a
    detection (issue 30, class 1 for detection). `elsewhere`: instances about another object (node, port, Deployment) than the
    faulted ones (their labels), named when none was about it — never its detection (class 3)."""
    budget = format_duration(budget_s)
    if injected is None:
        return Verdict(DETECTION, False, None, budget_s, "s", f"{alert}: no fault was injected, nothing to detect",
                       inconclusive=True)
    measured = None if raised is None else max(0.0, (raised - injected).total_seconds())
    if within(measured, budget_s):
        return Verdict(DETECTION, True, measured, budget_s, "s",
                       f"the monitoring raised {alert} {format_duration(measured)} after the fault, within {budget}")
    if measured is None and already:
        return Verdict(DETECTION, False, None, budget_s, "s",
                       f"{alert} was already firing before the fault ({'; '.join(already)}) and no new instance "
                       f"came within {budget}: whether the monitoring detects this fault cannot be told",
                       inconclusive=True, unobserved=True)
    said = (f"no alert {alert} within {budget}" if measured is None else
            f"the monitoring raised {alert} only {format_duration(measured)} after the fault, over {budget}")
    if measured is None and rules is not None and alert not in rules:
        said += f" (its Prometheus has no alerting rule named {alert})"
    if measured is None and elsewhere:
        said += f" about the faulted object; it fired about another ({'; '.join(elsewhere)})"
    if slowed:
        return Verdict(DETECTION, False, measured, budget_s, "s",
                       f"{said}, but the twin's clock ran too fast for Prometheus to scrape and evaluate at the "
                       f"site's cadence (one scrape + evaluation = {format_duration(resolution_s)} of cluster time): "
                       f"not judged; run the twin slower", inconclusive=True)
    return Verdict(DETECTION, False, measured, budget_s, "s",
                   f"{said}: the platform's on-call would not have known")


def judge_resolution(alert: str, since: datetime | None, resolved: datetime | None, budget_s: float,
                     since_what: str = "the recovery", *, blind: Sequence[str] = (),
                     unread: Sequence[str] = (), seen: Sequence[str] = ()) -> Verdict:
    """Pass iff every firing instance of `alert` was gone at most `budget_s` after `since` (the recovery), and each
    went because its condition ended: Prometheus kept getting samples about its object after it went. `blind`: the
    instances that went with their data (an exporter that stopped answering resolves every alert on it, the fault
    still in place: the on-call is told it is over) — a FAIL naming them; `unread`: instances whose data could not
    be read back (Prometheus did not answer) — the resolution is not evidence, inconclusive (issue 30, class 2 for
    detection)."""
    budget = format_duration(budget_s)
    if since is None:
        return Verdict(RESOLUTION, False, None, budget_s, "s",
                       f"{alert}: {since_what} was not reached, so its resolution cannot be judged", inconclusive=True)
    measured = None if resolved is None else max(0.0, (resolved - since).total_seconds())
    if within(measured, budget_s) and blind:
        return Verdict(RESOLUTION, False, measured, budget_s, "s",
                       f"{alert} went away, but with its data: Prometheus got no sample about "
                       f"{'; '.join(blind)} after it went — the monitoring stopped seeing the fault, it did not see "
                       f"it end (the on-call was told it was over)")
    if within(measured, budget_s) and unread:
        return Verdict(RESOLUTION, False, measured, budget_s, "s",
                       f"{alert} went away, but whether Prometheus still saw its object after it went is unknown "
                       f"({'; '.join(unread)}): a resolution is evidence only with its data", inconclusive=True,
                       unobserved=True)
    if within(measured, budget_s):
        read = f"; Prometheus still read {'; '.join(seen)} after it went" if seen else ""
        return Verdict(RESOLUTION, True, measured, budget_s, "s",
                       f"{alert} resolved {format_duration(measured)} after {since_what}, within {budget}{read}")
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


def judge_quiet(alerts: Sequence[str], injected: datetime | None, fired: Mapping[str, datetime | None],
                unwatched: Mapping[str, str | None], already: Sequence[str] = (), unread: str | None = None) -> Verdict:
    """Pass iff none of `alerts` fired (notifying) since the injection, and each could have: its rule evaluated
    over series that exist (`unwatched[a]` None). A fired one fails (the on-call was paged); one already firing
    before the fault (`already`), an Alertmanager not read through the drill (`unread`: why) or a rule that was not
    watching make the silence inconclusive — a blind stack is quiet whatever the platform does."""
    names = ", ".join(alerts)
    if injected is None:
        return Verdict(QUIET, False, None, 0, "alerts", f"{names}: no fault was injected, nothing to stay quiet about",
                       inconclusive=True)
    paged = sorted(((a, t) for a in alerts if (t := fired.get(a)) is not None), key=lambda at: at[1])
    if paged:
        said = "; ".join(f"{a} {format_duration(max(0.0, (t - injected).total_seconds()))} after it" for a, t in paged)
        return Verdict(QUIET, False, float(len(paged)), 0, "alerts",
                       f"the monitoring paged during the drill: {said} — the on-call was woken for it")
    if already:
        return Verdict(QUIET, False, None, 0, "alerts",
                       f"{', '.join(already)} was already firing before the fault: its silence during the drill "
                       f"cannot be told apart", inconclusive=True, unobserved=True)
    if unread is not None:
        return Verdict(QUIET, False, None, 0, "alerts", f"whether {names} fired is unknown: {unread}",
                       inconclusive=True, unobserved=True)
    blind = [f"{a}: {why}" for a in alerts if (why := unwatched.get(a, "not checked")) is not None]
    if blind:
        return Verdict(QUIET, False, None, 0, "alerts",
                       f"quiet proves nothing, the monitoring was not watching — {'; '.join(blind)}",
                       inconclusive=True, unobserved=True)
    return Verdict(QUIET, True, 0.0, 0, "alerts",
                   f"none of {names} fired through the drill, and each was watching (its rule evaluated, every "
                   f"series it reads scraped, through the drill)")
