"""Postmortem notes (翻车笔记): one markdown note per failed or inconclusive drill, for whoever has to fix it.

A note states the symptom, the timeline (phases on cluster time), the failing check and its reason,
the likely cause and what to do next. Causes are data (causes.yaml): rules matched on the record's
structured facts — category, drill, the slowest phase of its timeline, the slowest startup phase of
a replacement pod — never on the words of its reason.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
from pathlib import Path

from drills.core import datafiles
from drills.core.clock import Clock
from drills.core import outcomes
from drills.core.record import Check, Outcome, Record
from drills.report.text import category_name, fmt_seconds, labels, slug

__all__ = ["write_postmortems", "postmortem_markdown", "likely_cause", "slowest_gap", "note_name"]

log = logging.getLogger(__name__)

# Shown elsewhere in the note (checks, logs) or only useful as a chart (overlay).
_NOT_IN_DETAILS = ("checks", "logs", "overlay", "overlay_label")
_LOG_LINES = 80  # the recorder already keeps an excerpt; this only bounds a long one


def write_postmortems(records: list[Record], run_dir: Path, lang: str = "en") -> list[Path]:
    """Write `run_dir/postmortem/<drill>-<scenario-slug>.md` for every record that did not pass; return the paths."""
    out = Path(run_dir) / "postmortem"
    paths = []
    for rec in records:
        if outcomes.of(rec).counts_as_pass:
            continue
        path = out / note_name(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(postmortem_markdown(rec, lang), encoding="utf-8")
        paths.append(path)
    log.info("wrote %d postmortem note(s) under %s", len(paths), out)
    return paths


def note_name(record: Record) -> str:
    """`<drill>-<scenario-slug>.md`, the same name the summary links to."""
    return f"{slug(record.drill or 'drill')}-{slug(record.scenario or 'scenario')}.md"


def postmortem_markdown(record: Record, lang: str = "en") -> str:
    """The note for one record that did not pass, as markdown."""
    w = labels(lang)
    cause, steps = likely_cause(record, lang)
    offsets = record.offsets
    lines = [f"# {w['postmortem_title']}: {record.drill} — {record.scenario}", ""]
    lines += [f"- {w['run']}: `{record.run_id or '?'}`",
              f"- {w['target_cluster']}: `{record.target or '?'}`",
              f"- {w['severity']}: {record.severity}",
              f"- {w['category']}: {category_name(record.category, lang)}", ""]
    lines += [f"## {w['symptom']}", "", _symptom(record, w), ""]
    lines += [f"## {w['timeline']}", ""]
    if record.phases:
        lines += [f"| {w['phase']} | {w['cluster_time']} | {w['since_injected']} |", "|---|---|---|"]
        for name, at in record.phases.items():
            since = fmt_seconds(offsets[name]) if name in offsets else "—"
            lines.append(f"| {name} | {Clock.iso(at)} | {since} |")
        gap = slowest_gap(record)
        if gap:
            lines += ["", f"{w['target']}: {fmt_seconds(record.target_s)}; "
                      f"{w['longest_gap']}: → `{gap[0]}` ({fmt_seconds(gap[1])})."]
    else:
        lines.append("—")
    lines += ["", f"## {w['failing_check']}", ""]
    lines += [_check_line(check, w, record.reason) for check in record.failing_checks]
    lines += ["", f"> {record.reason or '—'}", ""]
    shown = {k: v for k, v in record.details.items() if k not in _NOT_IN_DETAILS}
    if shown:
        lines += [f"### {w['details']}", "", "```json",
                  json.dumps(shown, indent=2, ensure_ascii=False, default=str), "```", ""]
    if record.logs:
        lines += [f"### {w['logs_excerpt']}", "", "```", *record.logs[-_LOG_LINES:], "```", ""]
    lines += [f"## {w['likely_cause']}", "", cause, "", f"## {w['next_steps']}", ""]
    lines += [f"{i}. {step}" for i, step in enumerate(steps, 1)]
    for defect in record.defects:
        lines.append(f"\n_twin defect active in this run: `{defect}`_")
    return "\n".join(lines).rstrip() + "\n"


def likely_cause(record: Record, lang: str = "en") -> tuple[str, list[str]]:
    """(cause, next steps) from the first rule in causes.yaml that matches the record."""
    facts = {"category": "" if record.category is None else record.category.value, "drill": record.drill,
             "slowest_gap": (slowest_gap(record) or ("", 0))[0], "slowest_startup": _slowest_startup(record),
             "failed_check": _failed_check(record)}
    for rule in _rules():
        if all(_holds(key, want, facts) for key, want in (rule.get("when") or {}).items()):
            suffix = "_zh" if lang == "zh" else ""
            cause = rule.get(f"cause{suffix}") or rule["cause"]
            steps = rule.get(f"next{suffix}") or rule.get("next") or []
            return " ".join(str(cause).split()), [str(s) for s in steps]
    return "", []


def slowest_gap(record: Record) -> tuple[str, float] | None:
    """The phase that ends the longest gap between consecutive phases, and that gap in seconds."""
    offsets = sorted(record.offsets.items(), key=lambda kv: kv[1])
    gaps = [(b[0], b[1] - a[1]) for a, b in zip(offsets, offsets[1:])]
    return max(gaps, key=lambda g: g[1]) if gaps else None


def _holds(key: str, want: str, facts: dict) -> bool:
    if key not in facts:
        raise ValueError(f"causes.yaml: unknown fact {key!r} in a rule (facts: {', '.join(facts)})")
    if key == "drill":
        return fnmatch.fnmatch(facts[key], str(want))
    return facts[key] == str(want)


def _failed_check(record: Record) -> str:
    """The name of the first check that failed (a typed name from catalog.yaml, never a reason's words)."""
    failed = [c for c in record.checks if c.verdict is Outcome.FAIL]
    return failed[0].name if failed else ""


def _slowest_startup(record: Record) -> str:
    """The startup phase (drills.measure.serving_startup.STARTUP_PHASES) that took longest in a replacement pod."""
    slowest = record.details.get("slowest_phase")
    return str(slowest.get("phase") or "") if isinstance(slowest, dict) else ""


def _symptom(record: Record, w: dict) -> str:
    parts = [f"**{w[outcomes.of(record).word]}**"]
    if record.recovery_s is not None or record.target_s is not None:
        parts.append(f"{w['measured']} {fmt_seconds(record.recovery_s)} / {w['target']} {fmt_seconds(record.target_s)}")
    parts.append(record.reason)
    return " — ".join(p for p in parts if p)


def _check_line(check: Check, w: dict, reason: str) -> str:
    unit = f" {check.unit}" if check.unit else ""
    figures = []
    if check.measured is not None:
        figures.append(f"{w['measured_value']} {check.measured:g}{unit}")
    if check.target is not None:
        figures.append(f"{w['limit']} {check.target:g}{unit}")
    line = f"- **{check.name}** ({check.verdict.value})"
    said = check.reason if check.reason and check.reason != reason else ""
    return line + (f": {', '.join(figures)}" if figures else "") + (f" — {said}" if said else "")


@functools.cache
def _rules() -> tuple:
    data = datafiles.load_file(Path(__file__).parent / "causes.yaml")
    return tuple(data["rules"])
