"""Adds what the drill records know to the Allure results of the same run, before the HTML is built.

Per scenario result (matched by the record's pytest node id — the `nodeid` label the recorder puts on it —
else by scenario name, then drill id): its `status` from the record through the one table
(drills.core.outcomes: `passed` only for the verdict pass, whatever pytest saw — a revert that failed in
teardown after every step passed is `failed`), with the reason as the status message; measured recovery,
target and verdict as parameters; the record JSON, its timeline chart and its state diff (what the faults could reach, before
the first fault and after the reverts settled: fixtures/guard.py) as attachments; the record's severity as the
Allure severity label; and, for a record with a category, a `category` label and the first line of
`statusDetails.trace` set to `drill-category: <id>` — the one line categories.json matches
(`category_trace_regex`), so the Allure category follows the record's typed category, never the
wording of the failure message. Idempotent: a second pass changes nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

from drills.core import outcomes
from drills.core.record import Category, Record
from drills.report.text import fmt_seconds, labels as words_in, say, slug
from drills.report.timeline_chart import timeline_png

__all__ = ["enrich_results", "category_trace_line", "category_trace_regex", "NODEID_LABEL", "state_diff_text"]

log = logging.getLogger(__name__)

_MARK = "drill record (JSON)"
_STATE_DIFF = "state diff (before the fault → after the revert)"
_TRACE_PREFIX = "drill-category: "
NODEID_LABEL = "nodeid"  # the Allure label with the scenario's pytest node id (fixtures/recorder.py)


def category_trace_line(category: Category) -> str:
    """The line enrich puts first in a categorised result's trace."""
    return f"{_TRACE_PREFIX}{category.value}"


def category_trace_regex(category: Category) -> str:
    """categories.json `traceRegex` for `category`: Allure matches it against the whole trace (DOTALL)."""
    return f"{category_trace_line(category)}(\\n.*)?"  # ids are [a-z_]: nothing to escape


def enrich_results(results_dir: Path, records: list[Record], lang: str = "en") -> int:
    """Enrich the `*-result.json` files in `results_dir` from `records`; returns how many were changed."""
    results_dir = Path(results_dir)
    files = sorted(results_dir.glob("*-result.json"))
    loaded = []
    for f in files:
        try:
            loaded.append((f, json.loads(f.read_text(encoding="utf-8"))))
        except (OSError, json.JSONDecodeError) as err:
            log.warning("skipping unreadable Allure result %s: %s", f.name, err)
    changed = 0
    for rec in records:
        match = _match(rec, loaded)
        if match is None:
            log.debug("no Allure result for %s / %s", rec.drill, rec.scenario)
            continue
        path, result = match
        if _enrich(result, rec, results_dir, lang):
            path.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
            changed += 1
    return changed


def _match(record: Record, loaded: list[tuple[Path, dict]]) -> tuple[Path, dict] | None:
    if record.nodeid:
        exact = [(p, r) for p, r in loaded if any(label.get("name") == NODEID_LABEL and label.get("value") == record.nodeid
                                                  for label in r.get("labels", []))]
        if exact:
            return exact[-1]
    same = [(p, r) for p, r in loaded if r.get("name") == record.scenario]
    if len(same) <= 1:
        return same[0] if same else None
    keys = {record.drill, record.drill.replace("-", "_")}

    def mentions(result: dict) -> bool:
        text = " ".join([str(result.get("fullName", ""))] +
                        [str(label.get("value", "")) for label in result.get("labels", [])])
        return any(k and k in text for k in keys)

    return next((m for m in same if mentions(m[1])), same[-1])


def _enrich(result: dict, record: Record, results_dir: Path, lang: str) -> bool:
    status_changed = _status_from_record(result, record)
    if any(a.get("name") == _MARK for a in result.get("attachments", [])):
        return status_changed
    params = result.setdefault("parameters", [])
    have = {p.get("name") for p in params}
    verdict = record.verdict.value if lang == "en" else words_in(lang).get(record.verdict.value, record.verdict.value)
    for name, value in ((say("allure_measured", lang), fmt_seconds(record.recovery_s)),
                        (say("allure_target", lang), fmt_seconds(record.target_s)),
                        (say("allure_verdict", lang), verdict)):
        if name not in have:
            # excluded: the values change from run to run and must not split the test's history.
            params.append({"name": name, "value": value, "excluded": True})
    labels = result.setdefault("labels", [])
    if record.severity and not any(label.get("name") == "severity" for label in labels):
        labels.append({"name": "severity", "value": record.severity})
    attachments = result.setdefault("attachments", [])
    stem = f"{slug(record.drill)}-{uuid.uuid4().hex[:12]}"
    record_file = results_dir / f"{stem}-attachment.json"
    record_file.write_text(json.dumps(record.to_json(), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    attachments.append({"name": _MARK, "source": record_file.name, "type": "application/json"})
    if record.injected is not None:
        chart = timeline_png(record, results_dir / f"{stem}-attachment.png", overlay=list(record.overlay) or None,
                             overlay_label=record.overlay_label, lang=lang)
        attachments.append({"name": say("allure_timeline", lang), "source": chart.name, "type": "image/png"})
    diff = (record.details or {}).get("state_diff")
    if diff:
        diff_file = results_dir / f"{stem}-state-attachment.txt"
        diff_file.write_text(state_diff_text(diff), encoding="utf-8")
        attachments.append({"name": _STATE_DIFF, "source": diff_file.name, "type": "text/plain"})
    if record.logs:
        text_file = results_dir / f"{stem}-logs-attachment.txt"
        text_file.write_text("\n".join(record.logs), encoding="utf-8")
        attachments.append({"name": say("allure_logs", lang), "source": text_file.name, "type": "text/plain"})
    if record.category is not None and not outcomes.of(record).counts_as_pass:
        if not any(label.get("name") == "category" for label in labels):
            labels.append({"name": "category", "value": record.category.value})
        details = result.setdefault("statusDetails", {})
        trace = str(details.get("trace") or "")
        if not trace.startswith(_TRACE_PREFIX):
            details["trace"] = category_trace_line(record.category) + ("\n" + trace if trace else "")
        if not details.get("message"):
            details["message"] = record.reason
    return True


def _status_from_record(result: dict, record: Record) -> bool:
    """The result's status (and, when the record did not pass, its message) from the record's row; True if
    that changed anything."""
    row = outcomes.of(record)
    before = (result.get("status"), (result.get("statusDetails") or {}).get("message"))
    result["status"] = row.allure.value
    if not row.counts_as_pass:
        details = result.setdefault("statusDetails", {})
        if before[0] != row.allure.value or not details.get("message"):  # pytest's words no longer fit the status
            details["message"] = record.reason
    return (result.get("status"), (result.get("statusDetails") or {}).get("message")) != before


def state_diff_text(diff: dict) -> str:
    """The state diff for a reviewer: what changed first (before → after, and where it was read), then every
    value read on both sides."""
    lines = [f"read before the first fault at {diff.get('before_at')}, after the reverts settled at {diff.get('after_at')}",
             ""]
    changed = diff.get("changed") or []
    lines.append(f"changed ({len(changed)}):" if changed else "changed: nothing")
    lines += [f"  {c['key']}: {json.dumps(c['before'])} → {json.dumps(c['after'])}  [{c.get('source')}]" for c in changed]
    settled = diff.get("settled") or []
    if settled:  # toward health only (drills/faults/statediff.py TOWARD_HEALTH): said, not judged
        lines += ["", f"settled during the drill, not judged ({len(settled)}):"]
        lines += [f"  {c['key']}: {json.dumps(c['before'])} → {json.dumps(c['after'])}  [{c.get('source')}]"
                  for c in settled]
    for side in ("before", "after"):
        lines += ["", f"{side}:"]
        lines += [f"  {key}: {json.dumps(v.get('value'))}  [{v.get('source')}]"
                  for key, v in (diff.get(side) or {}).items()]
    return "\n".join(lines) + "\n"
