"""Is the monitoring watching? What makes "no alert fired" a claim about the platform rather than about a blind stack.

An alert that stayed quiet proves something only if its rule could have fired: Prometheus evaluates it (loaded,
healthy) and every series it reads exists there now (its exporters are scraped and export those names). A rule on
a metric nobody exports — a wrong name, a target that is down or never discovered — is quiet whatever happens, and
a drill that reads its silence as "the platform did not page" is fooled. `unwatched` answers, per alert, why it
is not watching (None: it is), from Prometheus's own API (read-only GETs: `/api/v1/rules`, `/api/v1/query`).

The series a rule reads are the metric names in its PromQL (`rule_metrics`: selectors, not functions, keywords,
label names in `by (…)`/`on (…)`, label matchers, strings or durations). Each must have at least one series in
Prometheus's lookback (`--query.lookback-delta`: the window a rule's evaluation reads a sample from), through the
query API (`count(last_over_time(name[…]))`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Iterable, Mapping

__all__ = ["unwatched", "rule_metrics", "read_rules", "observed_between", "SEEN", "BLIND", "STALLED", "UNREAD"]

log = logging.getLogger(__name__)

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
             "inf", "nan", "atan2", "start", "end"}
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([^"]+)"')


def rule_metrics(query: str) -> list[str]:
    """The metric names a PromQL expression selects, in order of first use."""
    named = _NAME_MATCHER.findall(query)
    text = _STRINGS.sub(" ", query)
    text = _GROUPING.sub(" ", _RANGES.sub(" ", _BRACES.sub(" ", text)))
    found = [m.group(1) for m in _IDENT.finditer(text) if not m.group(2) and m.group(1).lower() not in _KEYWORDS]
    return list(dict.fromkeys([*named, *found]))


def read_rules(prometheus_url: str, timeout_s: float = 5.0) -> dict[str, dict] | None:
    """Alerting rules by name as Prometheus evaluates them (`query`, `health`, `lastError`); None when unreadable."""
    body = _get(prometheus_url, "/api/v1/rules?type=alert", timeout_s)
    if body is None:
        return None
    return {r.get("name", "?"): r for g in (body.get("data") or {}).get("groups") or [] for r in g.get("rules") or []
            if r.get("type") == "alerting"}


def unwatched(prometheus_url: str, alerts: Iterable[str], lookback_s: float,
              timeout_s: float = 5.0, since_unix: float | None = None, step_s: float | None = None,
              scale: float = 1.0) -> dict[str, str | None]:
    """alert → why its silence proves nothing (None: its rule is evaluated and every series it reads exists in the
    last `lookback_s` of the stack's own clock: its lookback-delta, wall seconds for a dilated twin stack), so a
    series that stopped being scraped longer ago than a rule would still read it does not count. Given `since_unix`
    (the fault, on the stack's clock) and `step_s` (a scrape interval there), every series must also have been there
    through the whole drill: a name with no series for GAP_STEPS steps or more in a row since the fault (an exporter that
    went away and came back) left its rule blind for that long (red team, wave 8); `scale` converts the gap to
    cluster time for the sentence."""
    alerts = list(dict.fromkeys(alerts))
    rules = read_rules(prometheus_url, timeout_s)
    if rules is None:
        return {a: f"Prometheus {prometheus_url} did not list its rules" for a in alerts}
    out: dict[str, str | None] = {}
    present: dict[str, bool | None] = {}
    gaps: dict[str, tuple[float, float] | None] = {}
    window = f"{max(1, round(lookback_s * 1000))}ms"
    for alert in alerts:
        rule = rules.get(alert)
        if rule is None:
            out[alert] = f"Prometheus has no alerting rule named {alert}"
            continue
        if rule.get("health") not in (None, "ok", "unknown"):
            out[alert] = f"its rule does not evaluate ({rule.get('lastError') or rule.get('health')})"
            continue
        missing = []
        for metric in rule_metrics(str(rule.get("query") or "")):
            if metric not in present:
                present[metric] = _has_series(prometheus_url, metric, window, timeout_s)
            if present[metric] is None:
                out[alert] = f"Prometheus {prometheus_url} did not answer a query for {metric}"
                break
            if not present[metric]:
                missing.append(metric)
        else:
            out[alert] = (f"its rule reads {', '.join(missing)}, of which Prometheus has no series: nothing it "
                          f"scrapes exports {'it' if len(missing) == 1 else 'them'}") if missing else None
            if out[alert] is None and since_unix is not None and step_s:
                for metric in rule_metrics(str(rule.get("query") or "")):
                    if metric not in gaps:  # at least GAP_WALL_S of the stack's own clock: a loaded machine
                        gaps[metric] = _longest_gap(prometheus_url, metric, since_unix, step_s, timeout_s,  # stalls
                                                    min_steps=max(GAP_STEPS, math.ceil(GAP_WALL_S / step_s)))
                    if gaps[metric]:
                        start, length = gaps[metric]
                        out[alert] = (f"its rule reads {metric}, of which Prometheus had no series for "
                                      f"{length * scale:.0f} s (cluster time) during the drill, from "
                                      f"{time.strftime('%H:%M:%S', time.gmtime(start))} (wall): it could not fire then")
                        break
    return out


def _longest_gap(prometheus_url: str, metric: str, start_unix: float, step_s: float, timeout_s: float,
                 end_unix: float | None = None, min_steps: int | None = None,
                 went: bool = False) -> tuple[float, float] | None:
    """(start, length) of the longest run of `min_steps` (GAP_STEPS) or more `step_s` steps from `start_unix` to
    `end_unix` (now) at which Prometheus had no series of `metric` (a name, or a selector `{…}`: its instant selector,
    what a rule evaluated then saw), in unix seconds; None: none, or unread. `went`: only a run after a step that had
    the series counts (data that went away, not data not yet scraped when the window opened)."""
    min_steps = GAP_STEPS if min_steps is None else min_steps
    end = time.time() if end_unix is None else end_unix
    if end - start_unix < min_steps * step_s:
        return None
    selector = metric if metric.startswith("{") else f'{{__name__="{metric}"}}'
    body = _get(prometheus_url, "/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": f"count({selector})", "start": f"{start_unix:.3f}", "end": f"{end:.3f}",
         "step": f"{step_s:.3f}"}), timeout_s)
    if body is None or body.get("status") != "success":
        return None  # unread: the end-of-drill reading above stands
    result = (body.get("data") or {}).get("result") or []
    seen = sorted(float(t) for t, _ in (result[0].get("values") or [])) if result else []
    expected = [start_unix + i * step_s for i in range(int((end - start_unix) / step_s) + 1)]
    longest, run_start, run, had = None, None, 0, False
    present = iter(seen)
    nxt = next(present, None)
    for t in expected:
        while nxt is not None and nxt < t - step_s / 2:
            nxt = next(present, None)
        here = nxt is not None and abs(nxt - t) <= step_s / 2
        if here:
            run, run_start, had = 0, None, True
            continue
        if went and not had:
            continue  # not yet there when the window opened: not data that went away
        run += 1
        run_start = t if run_start is None else run_start
        if run >= min_steps and (longest is None or run * step_s > longest[1]):
            longest = (run_start, run * step_s)
    return longest


SEEN, BLIND, STALLED, UNREAD = "seen", "blind", "stalled", "unread"
# a rule blind this many scrapes in a row (a minute at a 15 s cadence) since the fault was not watching the drill; a
# scrape or two that timed out on a loaded target is not an exporter gone (the scrape timeout is one interval)
GAP_STEPS = 4
# ... and at least this long on the stack's own clock: a dilated twin stack scrapes every 0.25 s of wall time, and a
# machine loaded past its cores stalls the twin's answers for a second or two (a gap of 105 cluster s at 60x in CI)
GAP_WALL_S = 3.0
WENT_STEPS = 8  # scrapes before an alert went that are read for its data going first
ALIVE_SCRAPES = 3  # scrapes of one target in a window that show Prometheus was scraping through it


def observed_between(prometheus_url: str, query: str, about: Mapping[str, str], start_unix: float, end_unix: float,
                     timeout_s: float = 5.0, step_s: float | None = None) -> str:
    """Whether Prometheus got a sample about the object `about` names (drills/detect/objects.py `identity`) of a
    series the rule `query` reads, after `start_unix` and up to `end_unix` (its own clock, unix seconds) — the
    evidence that an alert went away because its condition ended, not because its data did (an exporter that
    stopped answering, or whose target is gone, makes every alert on it resolve). Each metric is narrowed by the
    identity labels it carries (metrics that carry none are read by name only when no metric carries one).

    SEEN: a sample came. BLIND: none came though Prometheus was scraping through the window (some target scraped
    ALIVE_SCRAPES times): the exporter answered without it, failed, or is gone. STALLED: Prometheus itself scraped
    too little to tell (a starved process) — ask again later. UNREAD: Prometheus did not answer.
    Given `step_s` (a scrape interval on Prometheus's clock), the moment the alert went is read too: every selector
    about the object absent for two scrapes in a row in the WENT_STEPS scrapes before it (and one after) is BLIND
    whatever came later — the data went first, the alert with it; samples after it can be the exporter's return once
    the fault was reverted."""
    window = f"{max(1, round((end_unix - start_unix) * 1000))}ms"
    narrowed: list[str] = []
    plain: list[str] = []
    for metric in rule_metrics(query):
        names = _label_names(prometheus_url, metric, timeout_s)
        if names is None:
            return UNREAD
        matchers = {k: v for k, v in about.items() if k in names}
        (narrowed if matchers else plain).append(_selector(metric, matchers))
    if step_s and all(_longest_gap(prometheus_url, selector, start_unix - WENT_STEPS * step_s, step_s, timeout_s,
                                   end_unix=start_unix + step_s, min_steps=2, went=True)
                        for selector in narrowed or plain):
        return BLIND
    for selector in narrowed or plain:
        found = _instant(prometheus_url, f"count(last_over_time({selector}[{window}]))", end_unix, timeout_s)
        if found is None:
            return UNREAD
        if found:
            return SEEN
    alive = _instant(prometheus_url, f"max(count_over_time(up[{window}])) >= {ALIVE_SCRAPES}", end_unix, timeout_s)
    if alive is None:
        return UNREAD
    return BLIND if alive else STALLED


def _instant(prometheus_url: str, query: str, at_unix: float, timeout_s: float) -> bool | None:
    """Whether an instant query at `at_unix` has a result (None: Prometheus did not answer)."""
    body = _get(prometheus_url, "/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at_unix:.3f}"}),
                timeout_s)
    if body is None or body.get("status") != "success":
        return None
    return bool((body.get("data") or {}).get("result"))


def _selector(metric: str, matchers: Mapping[str, str]) -> str:
    pairs = [("__name__", metric), *sorted(matchers.items())]
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _escape(value: str) -> str:
    """A PromQL double-quoted string's content (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_names(prometheus_url: str, metric: str, timeout_s: float) -> set[str] | None:
    body = _get(prometheus_url, "/api/v1/labels?" + urllib.parse.urlencode({"match[]": _selector(metric, {})}),
                timeout_s)
    if body is None or body.get("status") != "success":
        return None
    return set(body.get("data") or [])


def _has_series(prometheus_url: str, metric: str, window: str, timeout_s: float) -> bool | None:
    query = f'count(last_over_time({{__name__="{metric}"}}[{window}]))'
    body = _get(prometheus_url, "/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout_s)
    if body is None or body.get("status") != "success":
        return None
    return bool((body.get("data") or {}).get("result"))


def _get(prometheus_url: str, path: str, timeout_s: float) -> dict | None:
    try:
        with urllib.request.urlopen(prometheus_url.rstrip("/") + path, timeout=timeout_s) as answer:
            body = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as err:
        log.warning("Prometheus %s: %s failed (%s)", prometheus_url, path.split("?")[0], err)
        return None
    return body if isinstance(body, dict) else None
