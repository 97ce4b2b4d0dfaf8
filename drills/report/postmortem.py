"""Postmortem notes (翻车笔记): one markdown note per failed drill, written for whoever has to fix it.

A note states the symptom, the timeline (phases on cluster time), the failing check and its reason,
the likely cause and what to do next. Causes are data (causes.yaml): rules matched on the record's
category, drill, reason and the slowest phase of its timeline.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import re
from pathlib import Path

import yaml

from drills.report.records import phase_offsets
from drills.report.text import categories, category_of, fmt_seconds, labels, slug

__all__ = ["write_postmortems", "postmortem_markdown", "failing_checks", "likely_cause", "slowest_gap", "note_name"]

log = logging.getLogger(__name__)

# Shown elsewhere in the note (checks, logs) or only useful as a chart (overlay).
_NOT_IN_DETAILS = ("checks", "logs", "overlay", "overlay_label")
_LOG_LINES = 80  # the recorder already keeps an excerpt; this only bounds a long one


def write_postmortems(records: list[dict], run_dir: Path, lang: str = "en") -> list[Path]:
    """Write `run_dir/postmortem/<drill>-<scenario-slug>.md` for every failed record; return the paths."""
    out = Path(run_dir) / "postmortem"
    paths = []
    for rec in records:
        if rec.get("verdict") == "pass":
            continue
        path = out / note_name(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(postmortem_markdown(rec, lang), encoding="utf-8")
        paths.append(path)
    log.info("wrote %d postmortem note(s) under %s", len(paths), out)
    return paths


def note_name(record: dict) -> str:
    """`<drill>-<scenario-slug>.md`, the same name the summary links to."""
    return f"{slug(record.get('drill', 'drill'))}-{slug(record.get('scenario') or 'scenario')}.md"


def postmortem_markdown(record: dict, lang: str = "en") -> str:
    """The note for one failed record, as markdown."""
    w = labels(lang)
    category = category_of(record)
    cause, steps = likely_cause(record, lang)
    offsets = phase_offsets(record)
    phases = record.get("phases") or {}
    lines = [f"# {w['postmortem_title']}: {record.get('drill')} — {record.get('scenario', '')}", ""]
    lines += [f"- {w['run']}: `{record.get('run_id', '?')}`",
              f"- {w['target_cluster']}: `{record.get('target', '?')}`",
              f"- {w['severity']}: {record.get('severity', 'normal')}",
              f"- {w['category']}: {_category_name(category, lang)}", ""]
    lines += [f"## {w['symptom']}", "", _symptom(record, w), ""]
    lines += [f"## {w['timeline']}", ""]
    if phases:
        lines += [f"| {w['phase']} | {w['cluster_time']} | {w['since_injected']} |", "|---|---|---|"]
        for name in [*offsets, *(p for p in phases if p not in offsets)]:
            since = fmt_seconds(offsets[name]) if name in offsets else "—"
            lines.append(f"| {name} | {phases.get(name) or '—'} | {since} |")
        gap = slowest_gap(record)
        if gap:
            lines += ["", f"{w['target']}: {fmt_seconds(record.get('target_s'))}; "
                      f"{w['longest_gap']}: → `{gap[0]}` ({fmt_seconds(gap[1])})."]
    else:
        lines.append("—")
    lines += ["", f"## {w['failing_check']}", ""]
    lines += [_check_line(check, w, str(record.get("reason") or "")) for check in failing_checks(record)]
    lines += ["", f"> {record.get('reason') or '—'}", ""]
    details = record.get("details") or {}
    shown = {k: v for k, v in details.items() if k not in _NOT_IN_DETAILS}
    if shown:
        lines += [f"### {w['details']}", "", "```json",
                  json.dumps(shown, indent=2, ensure_ascii=False, default=str), "```", ""]
    logs = details.get("logs")
    if logs:
        logs = logs.splitlines() if isinstance(logs, str) else [str(line) for line in logs]
        lines += [f"### {w['logs_excerpt']}", "", "```", *logs[-_LOG_LINES:], "```", ""]
    lines += [f"## {w['likely_cause']}", "", cause, "", f"## {w['next_steps']}", ""]
    lines += [f"{i}. {step}" for i, step in enumerate(steps, 1)]
    for defect in record.get("defects") or []:
        lines.append(f"\n_twin defect active in this run: `{defect}`_")
    return "\n".join(lines).rstrip() + "\n"


def failing_checks(record: dict) -> list[dict]:
    """The checks of a record that did not pass (`details.checks`, as the drills record them)."""
    checks = (record.get("details") or {}).get("checks") or []
    return [c for c in checks if isinstance(c, dict) and c.get("verdict") not in ("pass", None)]


def likely_cause(record: dict, lang: str = "en") -> tuple[str, list[str]]:
    """(cause, next steps) from the first rule in causes.yaml that matches the record."""
    facts = {"category": category_of(record) or "", "drill": str(record.get("drill") or ""),
             "slowest_gap": (slowest_gap(record) or ("", 0))[0],
             "reason": str(record.get("reason") or "")}
    for rule in _rules():
        if all(_holds(key, want, facts) for key, want in (rule.get("when") or {}).items()):
            suffix = "_zh" if lang == "zh" else ""
            cause = rule.get(f"cause{suffix}") or rule["cause"]
            steps = rule.get(f"next{suffix}") or rule.get("next") or []
            return " ".join(str(cause).split()), [str(s) for s in steps]
    return "", []


def slowest_gap(record: dict) -> tuple[str, float] | None:
    """The phase that ends the longest gap between consecutive phases, and that gap in seconds."""
    offsets = sorted(phase_offsets(record).items(), key=lambda kv: kv[1])
    gaps = [(b[0], b[1] - a[1]) for a, b in zip(offsets, offsets[1:])]
    return max(gaps, key=lambda g: g[1]) if gaps else None


def _holds(key: str, want: str, facts: dict) -> bool:
    have = facts.get(key, "")
    if key == "drill":
        return fnmatch.fnmatch(have, str(want))
    if key == "reason":
        return re.search(str(want), have, re.IGNORECASE) is not None
    return have == str(want)


def _symptom(record: dict, w: dict) -> str:
    measured, target = record.get("recovery_s"), record.get("target_s")
    parts = [f"**{w['fail']}**"]
    if measured is not None or target is not None:
        parts.append(f"{w['measured']} {fmt_seconds(measured)} / {w['target']} {fmt_seconds(target)}")
    parts.append(str(record.get("reason") or ""))
    return " — ".join(p for p in parts if p)


def _check_line(check: dict, w: dict, reason: str) -> str:
    unit = f" {check['unit']}" if check.get("unit") else ""
    figures = []
    if check.get("measured") is not None:
        figures.append(f"{w['measured_value']} {check['measured']:g}{unit}")
    if check.get("target") is not None:
        figures.append(f"{w['limit']} {check['target']:g}{unit}")
    line = f"- **{check.get('name', '?')}** ({check.get('verdict', '?')})"
    said = check.get("reason") if check.get("reason") and check.get("reason") != reason else ""
    return line + (f": {', '.join(figures)}" if figures else "") + (f" — {said}" if said else "")


def _category_name(category: str | None, lang: str) -> str:
    for cat in categories():
        if cat["id"] == category:
            return f"{cat.get('name_zh') if lang == 'zh' else cat['name']} (`{category}`)"
    return f"`{category}`" if category else "—"


@functools.cache
def _rules() -> tuple:
    data = yaml.safe_load((Path(__file__).parent / "causes.yaml").read_text(encoding="utf-8"))
    return tuple(data["rules"])
