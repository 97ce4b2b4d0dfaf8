"""The compliance summary of a run: `summary.md`, a small self-contained `summary.html` and `trend.png`.

It lists every drill of the run (target, measured recovery or headline check, verdict, reason), the last N runs side
by side from the records history, the resilience score (formula in drills.report.score, printed in
the summary) and a trend chart of recovery times; failed drills link to their postmortem notes.
"""

from __future__ import annotations

import base64
import html
import logging
from datetime import datetime, timezone
from pathlib import Path

from drills.core import outcomes
from drills.core.outcomes import AllureStatus
from drills.core.record import Record
from drills.report.figures import headline_figures
from drills.report.postmortem import note_name
from drills.report.records import Run, run_history
from drills.report.score import FORMULA, resilience_score
from drills.report.text import labels
from drills.report.trend_chart import trend_png

__all__ = ["write_summary", "summary_sections"]

log = logging.getLogger(__name__)

_CSS = """body{font-family:"DejaVu Sans","WenQuanYi Micro Hei",sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top;font-size:14px}th{background:#f3f3f3}.pass{color:#2e7d32;font-weight:bold}
.fail{color:#c62828;font-weight:bold}.broken{color:#ef6c00;font-weight:bold}.score{font-size:28px;font-weight:bold}code{background:#f5f5f5}
img{max-width:100%}"""


def write_summary(run_dir: Path, lang: str = "en", last: int = 5, rendered: bool = True) -> dict[str, Path]:
    """Write summary.md into `run_dir`, and with `rendered` summary.html and its trend.png; returns their paths by
    kind. Without `rendered` (`--no-html`) the charts are left to `drills report`, which draws them from the same
    records."""
    run_dir = Path(run_dir).resolve()
    runs = run_history(run_dir, last=last)
    sections = summary_sections(runs, lang)
    md = run_dir / "summary.md"
    md.write_text(_markdown(sections), encoding="utf-8")
    if not rendered:
        log.info("wrote %s", md)
        return {"md": md}
    trend = trend_png([r for r in runs if not r.dry_run], run_dir / "trend.png", lang=lang)
    page = run_dir / "summary.html"
    page.write_text(_html(sections, trend, lang), encoding="utf-8")
    log.info("wrote %s and %s", md, page)
    return {"md": md, "html": page, "trend": trend}


def summary_sections(runs: list[Run], lang: str = "en") -> list[dict]:
    """The summary as data: title, facts, tables, image and links; the last run is this run."""
    w = labels(lang)
    this = runs[-1]
    score = None if this.dry_run else resilience_score(this.records)
    targets = sorted({r.target for r in this.records if r.target})
    not_passed = [r for r in this.records if not outcomes.of(r).counts_as_pass]
    sections: list[dict] = [
        {"title": f"{w['summary_title']} — {this.run_id}", "level": 1},
        {"facts": [(w["run"], this.run_id), (w["target_cluster"], ", ".join(targets) or "—"),
                   (w["generated"], datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))]},
        {"title": w["score"], "level": 2, "score": "—" if score is None else f"{score:.1f} / 100",
         "text": w["dry_run_not_scored"] if this.dry_run else f"{w['score_formula']}: {FORMULA}"},
        {"title": w["drills"], "level": 2, "table": _drill_table(this.records, w)},
        *_random_section(this.records, w),
        {"title": w["last_runs"], "level": 2, "table": _runs_table([r for r in runs if not r.dry_run] or runs, w)},
        {"title": w["trend"], "level": 2, "image": "trend.png"},
        {"title": w["postmortems"], "level": 2, "links": [
            (f"{r.drill} — {r.scenario}", f"postmortem/{note_name(r)}") for r in not_passed] or None,
         "text": None if not_passed else w["no_failures"]},
    ]
    return sections


def _drill_table(records: list[Record], w: dict) -> dict:
    header = [w["drill"], w["scenario"], w["severity"], w["target"], w["measured_figure"], w["verdict"], w["reason"]]
    rows = []
    for r in records:
        reason = r.reason
        if r.category is not None and not outcomes.of(r).counts_as_pass:
            reason = f"{reason} [{r.category.value}]"
        if ((r.details.get("steady_state") or {}).get("before") or {}).get("checked") is False:
            reason = f"{reason} ({w['steady_not_checked']})"  # an opt-out is said where the verdict is read
        target, measured = headline_figures(r)
        rows.append([r.drill, r.scenario, r.severity, target, measured, _verdict(r, w), reason])
    return {"header": header, "rows": rows}


def _random_section(records: list[Record], w: dict) -> list[dict]:
    """The targets drawn at random (`drills run --random`/`--replay`), with the seed: what to pass to repeat them."""
    picked = [(r, r.details["random"]) for r in records if (r.details.get("random") or {}).get("choices")]
    if not picked:
        return []
    seeds = sorted({str(rnd.get("seed")) for _, rnd in picked})
    replayed = sorted({rnd["replayed_from"] for _, rnd in picked if rnd.get("replayed_from")})
    text = f"{w['random_seed']}: {', '.join(seeds)}" + (f"; {w['replayed_from']} {', '.join(replayed)}"
                                                         if replayed else "")
    rows = [[r.drill, r.scenario, "; ".join(f"{k}: {', '.join(v)}" for k, v in rnd["choices"].items())]
            for r, rnd in picked]
    return [{"title": w["random_targets"], "level": 2, "text": text,
             "table": {"header": [w["drill"], w["scenario"], w["random_choices"]], "rows": rows}}]


def _runs_table(runs: list[Run], w: dict) -> dict:
    keys: list[tuple[str, str]] = []
    cells: dict[tuple[str, str], dict[int, Record]] = {}
    for i, run in enumerate(runs):
        for r in run.records:
            key = (r.drill, r.scenario)
            if key not in cells:
                keys.append(key)
                cells[key] = {}
            cells[key][i] = r
    header = [w["drill"], w["scenario"], *(run.run_id for run in runs)]
    rows = [[d, s, *(_cell(cells[(d, s)].get(i), w) for i in range(len(runs)))] for d, s in keys]
    scores = [resilience_score(run.records) for run in runs]
    rows.append([f"**{w['score']}**", "", *("—" if s is None else f"{s:.1f}" for s in scores)])
    return {"header": header, "rows": rows}


def _cell(record: Record | None, w: dict) -> str:
    if record is None:
        return "—"
    word = _verdict(record, w)
    return _Word(f"{word} {headline_figures(record)[1]}", word.css)


def _verdict(record: Record, w: dict) -> "_Word":
    row = outcomes.of(record)
    return _Word(w[row.word], _CSS_CLASS[row.allure])


_CSS_CLASS = {AllureStatus.PASSED: "pass", AllureStatus.FAILED: "fail", AllureStatus.BROKEN: "broken",
              AllureStatus.SKIPPED: "broken"}  # summary.html colours a verdict by its Allure status


class _Word(str):
    """A verdict word (drills.core.outcomes: the record's row) that knows its summary.html class."""

    css: str

    def __new__(cls, text: str, css: str) -> "_Word":
        word = super().__new__(cls, text)
        word.css = css
        return word


def _markdown(sections: list[dict]) -> str:
    out: list[str] = []
    for s in sections:
        if s.get("title"):
            out += ["#" * s["level"] + " " + s["title"], ""]
        for key, value in s.get("facts", []):
            out.append(f"- **{key}**: {value}")
        if s.get("facts"):
            out.append("")
        if s.get("score"):
            out += [f"**{s['score']}**", ""]
        if s.get("table"):
            t = s["table"]
            out.append("| " + " | ".join(_md_cell(h) for h in t["header"]) + " |")
            out.append("|" + "---|" * len(t["header"]))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t["rows"]]
            out.append("")
        if s.get("image"):
            out += [f"![{s.get('title', '')}]({s['image']})", ""]
        for text, href in s.get("links") or []:
            out.append(f"- [{text}]({href})")
        if s.get("links"):
            out.append("")
        if s.get("text"):
            out += [s["text"], ""]
    return "\n".join(out).rstrip() + "\n"


def _html(sections: list[dict], trend: Path, lang: str) -> str:
    """Self-contained: inline CSS, the trend chart as a data: URI, no scripts, no external links."""
    body: list[str] = []
    for s in sections:
        if s.get("title"):
            body.append(f"<h{s['level']}>{html.escape(s['title'])}</h{s['level']}>")
        if s.get("facts"):
            body.append("<ul>" + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>"
                                         for k, v in s["facts"]) + "</ul>")
        if s.get("score"):
            body.append(f'<p class="score">{html.escape(s["score"])}</p>')
        if s.get("table"):
            t = s["table"]
            head = "".join(f"<th>{html.escape(str(h))}</th>" for h in t["header"])
            rows = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in t["rows"])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        if s.get("image") and trend.exists():
            data = base64.b64encode(trend.read_bytes()).decode()
            body.append(f'<img alt="{html.escape(s.get("title", ""))}" src="data:image/png;base64,{data}">')
        if s.get("links"):
            body.append("<ul>" + "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>'
                                         for t, h in s["links"]) + "</ul>")
        if s.get("text"):
            body.append(f"<p>{html.escape(s['text'])}</p>")
    title = html.escape(sections[0].get("title", "summary"))
    return (f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _html_cell(value) -> str:
    text = str(value)
    bold = text.startswith("**") and text.endswith("**")
    text = html.escape(text.strip("*") if bold else text)
    cls = f' class="{value.css}"' if isinstance(value, _Word) else ""
    return f"<td{cls}>{'<b>' + text + '</b>' if bold else text}</td>"


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")
