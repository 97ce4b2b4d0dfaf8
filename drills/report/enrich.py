"""Adds what the drill records know to the Allure results of the same run, before the HTML is built.

Per scenario result (matched by scenario name, then drill id): measured recovery, target and verdict
as parameters; the record JSON and its timeline chart as attachments; the record's severity as the
Allure severity label; and, for a failure, "[category: <id>]" appended to the message so the
categories in categories.yaml place it even when the step's sentence does not name the category.
Idempotent: a second pass changes nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

from drills.report.text import category_of, fmt_seconds, slug
from drills.report.timeline_chart import timeline_png

__all__ = ["enrich_results"]

log = logging.getLogger(__name__)

_MARK = "drill record (JSON)"


def enrich_results(results_dir: Path, records: list[dict], lang: str = "en") -> int:
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
            log.debug("no Allure result for %s / %s", rec.get("drill"), rec.get("scenario"))
            continue
        path, result = match
        if _enrich(result, rec, results_dir, lang):
            path.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
            changed += 1
    return changed


def _match(record: dict, loaded: list[tuple[Path, dict]]) -> tuple[Path, dict] | None:
    name = str(record.get("scenario") or "")
    same = [(p, r) for p, r in loaded if r.get("name") == name]
    if len(same) <= 1:
        return same[0] if same else None
    drill = str(record.get("drill") or "")
    keys = {drill, drill.replace("-", "_")}

    def mentions(result: dict) -> bool:
        text = " ".join([str(result.get("fullName", ""))] +
                        [str(label.get("value", "")) for label in result.get("labels", [])])
        return any(k and k in text for k in keys)

    return next((m for m in same if mentions(m[1])), same[-1])


def _enrich(result: dict, record: dict, results_dir: Path, lang: str) -> bool:
    if any(a.get("name") == _MARK for a in result.get("attachments", [])):
        return False
    params = result.setdefault("parameters", [])
    have = {p.get("name") for p in params}
    for name, value in (("measured recovery", fmt_seconds(record.get("recovery_s"))),
                        ("target", fmt_seconds(record.get("target_s"))),
                        ("verdict", str(record.get("verdict")))):
        if name not in have:
            # excluded: the values change from run to run and must not split the test's history.
            params.append({"name": name, "value": value, "excluded": True})
    labels = result.setdefault("labels", [])
    if record.get("severity") and not any(label.get("name") == "severity" for label in labels):
        labels.append({"name": "severity", "value": str(record["severity"])})
    attachments = result.setdefault("attachments", [])
    stem = f"{slug(record.get('drill', 'drill'))}-{uuid.uuid4().hex[:12]}"
    record_file = results_dir / f"{stem}-attachment.json"
    record_file.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    attachments.append({"name": _MARK, "source": record_file.name, "type": "application/json"})
    if (record.get("phases") or {}).get("injected"):
        details = record.get("details") or {}
        overlay = [(float(t), float(v)) for t, v in details.get("overlay") or []]
        chart = timeline_png(record, results_dir / f"{stem}-attachment.png", overlay=overlay or None,
                             overlay_label=str(details.get("overlay_label") or "throughput"), lang=lang)
        attachments.append({"name": "timeline", "source": chart.name, "type": "image/png"})
    logs = (record.get("details") or {}).get("logs")
    if logs:
        text_file = results_dir / f"{stem}-logs-attachment.txt"
        text_file.write_text(logs if isinstance(logs, str) else "\n".join(map(str, logs)), encoding="utf-8")
        attachments.append({"name": "logs excerpt", "source": text_file.name, "type": "text/plain"})
    category = category_of(record)
    if record.get("verdict") != "pass" and category and result.get("status") in ("failed", "broken"):
        details = result.setdefault("statusDetails", {})
        message = str(details.get("message") or record.get("reason") or "")
        if f"[category: {category}]" not in message:
            details["message"] = f"{message.rstrip()}\n[category: {category}]"
    return True
