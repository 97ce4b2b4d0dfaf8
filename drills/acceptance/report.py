"""What an acceptance run leaves in `reports/<run-id>/`: `records.jsonl` (one `Record` per node × check,
drill `pre-expansion-acceptance`), `acceptance.json` (every result, the gate's outcome), `summary.md` and
`summary.html` (the per-node go/no-go table, then each check with measured values against thresholds)
and `nccl-pairs.png` (the heat map of node-pair all-reduce bus bandwidth)."""

from __future__ import annotations

import html
import json
import logging
from datetime import datetime, timezone
from pathlib import Path

from drills.core import outcomes
from drills.core.record import Category, Outcome, Record

__all__ = ["DRILL", "SUITE", "TOOLS", "write_report", "records", "summary_markdown", "heatmap_png", "allure_results"]

log = logging.getLogger(__name__)

DRILL = "pre-expansion-acceptance"
SUITE = "Pre-expansion acceptance"  # the Allure suite: one test per node × check
_NOT_MEASURED = ("not_run", "tool_error", "partial", "unread_error")  # the measurement itself is in doubt
_IDENTITIES = ("gpu_uuids", "nic_guids", "port_rate_gbps")
TOOLS = {"gpu": "nvidia-smi", "dcgm": "dcgmi diag", "burn": "gpu-burn", "nccl-node": "all_reduce_perf",
         "nccl-pair": "all_reduce_perf", "rdma": "ibstat + ib_write_bw", "storage": "fio", "switch-port": "switch CLI"}


def records(run_id: str, profile_name: str, result) -> list[Record]:
    now = datetime.now(timezone.utc)
    out = []
    for r in [*result.results, *result.pairs]:
        where = f"{r.node} ↔ {r.peer}" if r.peer else r.node
        out.append(Record(
            drill=DRILL, run_id=run_id, scenario=f"{r.check} on {where}",
            verdict=Outcome.PASS if r.go else Outcome.FAIL, reason=r.reason,
            category=None if r.go else (Category.CHECK_FAILED if r.failure in _NOT_MEASURED else Category.SLO_BREACH),
            details={"node": r.node, "check": r.check, "peer": r.peer, "measured": r.measured,
                     "thresholds": r.thresholds, "failure": r.failure, "expected": _expected(result, r),
                     "evidence": r.evidence, "waived": _waived(result, r),
                     "decides": r in result.results},
            target=profile_name, wall_started=now))
    return out


def write_report(run_dir: Path, run_id: str, profile, result, html_report: bool = False) -> None:
    recs = records(run_id, profile.name, result)
    allure_results(run_dir / "allure-results", recs, getattr(result, "raw", None), getattr(result, "runbook", None))
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r.to_json(), ensure_ascii=False, default=str) + "\n"
                                                   for r in recs), encoding="utf-8")
    data = {"run_id": run_id, "nodes": list(result.plan.nodes), "reference": result.plan.reference,
            "results": [r.to_dict() for r in result.results], "pairs": [r.to_dict() for r in result.pairs],
            "aggregate": result.aggregate, "gate": result.gate, "interrupted": result.interrupted,
            "expectations": {n: e.to_dict() for n, e in result.plan.expect.items()},
            "reference_problem": result.plan.reference_problem,
            "waivers": [w.model_dump() for _, w in result.waived()]}
    (run_dir / "acceptance.json").write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    png = None
    try:
        png = heatmap_png(result, run_dir / "nccl-pairs.png")
    except Exception as err:  # noqa: BLE001 — a missing picture must not hide the verdicts
        log.warning("heat map not drawn: %s", err)
    md = summary_markdown(run_id, result, png)
    (run_dir / "summary.md").write_text(md, encoding="utf-8")
    (run_dir / "summary.html").write_text(_html(md, png), encoding="utf-8")
    if html_report:
        from drills.core.errors import DrillError
        from drills.report.allure_build import build_report

        try:
            build_report(run_dir, environment={"Target profile": profile.name, "Nodes": ", ".join(result.plan.nodes)},
                         name=f"{SUITE} — {run_id}")
        except DrillError as err:  # the verdicts stand without the HTML
            log.warning("Allure report not built: %s", err)


def allure_results(folder: Path, recs: list[Record], raw: dict | None = None,
                   runbook: dict | None = None) -> list[Path]:
    """One Allure 2 result per node × check (and per measured pair): suite `Pre-expansion acceptance`,
    sub-suite the node, parameters the measured values, their thresholds, each expectation with its source
    and the evidence's identity (pod, spec.nodeName); the tool's raw output attached; the reason as message;
    as steps, the Gherkin steps of the runbook row that judged it (features/acceptance) with their outcome."""
    import hashlib
    import uuid

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for rec in recs:
        d = rec.details
        status = outcomes.of(rec).allure.value  # the one table: not measured (check_failed) is broken, no-go failed
        params = [{"name": f"measured: {k}", "value": _v(v)} for k, v in (d.get("measured") or {}).items()]
        params += [{"name": f"threshold: {k}", "value": _v(v)} for k, v in (d.get("thresholds") or {}).items()
                   if v is not None]
        params += [{"name": f"expected: {k}", "value": f"{_v(e['value'])} ({e['origin']}: {e['source']})"}
                   for k, e in (d.get("expected") or {}).items()]
        params += [{"name": f"evidence: {k}", "value": _v(v)} for k, v in (d.get("evidence") or {}).items() if v is not None]
        if d.get("waived"):
            w = d["waived"]
            params.append({"name": "waived", "value": f"by {w['by']}: {w['reason']}"})
        if d.get("peer"):
            params.insert(0, {"name": "peer", "value": d["peer"]})
        attachments = []
        text = (raw or {}).get((d.get("node"), d.get("check"), d.get("peer")))
        if text is not None:
            name = f"{uuid.uuid4()}-attachment.txt"
            (folder / name).write_text(text, encoding="utf-8")
            attachments.append({"name": f"{TOOLS.get(str(d.get('check')), 'tool')} output ({d.get('node')})",
                                "source": name, "type": "text/plain"})
        ms = int((rec.wall_started or datetime.now(timezone.utc)).timestamp() * 1000)
        steps = [] if d.get("decides") is False else (runbook or {}).get((d.get("node"), d.get("check")), [])
        body = {"uuid": str(uuid.uuid4()), "historyId": hashlib.md5(f"{DRILL}/{rec.scenario}".encode()).hexdigest(),
                "name": rec.scenario, "fullName": f"acceptance.{d.get('node')}.{d.get('check')}.{d.get('peer') or ''}",
                "status": status, "stage": "finished", "start": ms, "stop": ms,
                "statusDetails": {"message": rec.reason, **({"trace": f"drill-category: {rec.category.value}"}
                                                             if rec.category else {})},
                "labels": [{"name": "suite", "value": SUITE}, {"name": "subSuite", "value": str(d.get("node"))},
                           {"name": "feature", "value": SUITE}, {"name": "story", "value": str(d.get("check"))},
                           {"name": "tag", "value": "acceptance"}, {"name": "framework", "value": "gpu-drills"}],
                "parameters": params, "attachments": attachments,
                "steps": [{"name": s["name"], "status": s["status"], "stage": "finished", "start": ms, "stop": ms}
                          for s in steps]}
        path = folder / f"{body['uuid']}-result.json"
        path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        out.append(path)
    return out


def _v(value) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def summary_markdown(run_id: str, result, png: Path | None) -> str:
    verdicts = result.node_verdicts()
    checks = list(dict.fromkeys(r.check for r in result.results))
    lines = [f"# Pre-expansion acceptance — run {run_id}", ""]
    if result.interrupted:
        lines += [f"**Interrupted ({result.interrupted})**: the Jobs were deleted and the gate taints of this run removed.", ""]
    lines += ["| node | verdict | " + " | ".join(checks) + " |", "|---|---|" + "---|" * len(checks)]
    by = {(r.node, r.check): r for r in result.results}
    for node in result.plan.nodes:
        cells = []
        for check in checks:
            r = by.get((node, check))
            cells.append("—" if r is None else "go" if r.go else "waived" if _waived(result, r)
                         else "**not run**" if r.failure == "not_run" else f"**no-go** ({r.failure})")
        verdict = "GO" if not verdicts.get(node) else "**NO-GO**"
        lines.append(f"| {node} | {verdict} | " + " | ".join(cells) + " |")
    lines.append("")
    if result.gate:
        lines += [f"Gate: untainted {', '.join(result.gate.get('untainted', [])) or 'none'}; kept tainted "
                  f"(gpu-drills.io/unaccepted) {', '.join(result.gate.get('kept', [])) or 'none'}.", ""]
    if result.aggregate is not None:
        a = result.aggregate
        lines += [f"Shared store, all new nodes together: read {a['read_mb_s']:.0f} MB/s (target ≥ {a['min_mb_s']:.0f}): "
                  f"{'go' if a['go'] else '**no-go**'}.", ""]
    lines += _signoff(result) + _expectations(result)
    lines += ["## Checks", "", "| node | check | verdict | measured | thresholds | reason |", "|---|---|---|---|---|---|"]
    for r in [*result.results, *result.pairs]:
        where = f"{r.node} ↔ {r.peer}" if r.peer else r.node
        lines.append(f"| {where} | {r.check} | {'go' if r.go else 'no-go'} | {_kv(r.measured)} | {_kv(r.thresholds)} | "
                     f"{r.reason.replace('|', '/')} |")
    if png is not None:
        lines += ["", f"![NCCL all-reduce bus bandwidth per node pair]({png.name})"]
    return "\n".join(lines) + "\n"


def _signoff(result) -> list[str]:
    """What the sign-off rests on besides GOs: the checks that did not run, and every waiver with its author."""
    not_run = [r for r in result.results if r.failure == "not_run"]
    waived = result.waived() if hasattr(result, "waived") else []
    out = ["## Sign-off", ""]
    pol = getattr(result, "policy", None)
    if pol is not None:
        from drills.profile.acceptance import CHECKS

        need = [f"{c}" + (f" (level ≥ {r.min_level})" if r.min_level else "")
                + (f" (≥ {r.min_seconds} s)" if r.min_seconds else "") for c, r in pol.required.items()]
        dropped = [c for c in CHECKS if c not in pol.required]
        out += [f"Required checks: {', '.join(need) or 'none'}."
                + (f" Not required by this profile (acceptance.required): {', '.join(dropped)}." if dropped else ""), ""]
    if result.plan.reference_problem:
        out += [f"Pair tests: the reference {result.plan.reference} cannot prove a path — {result.plan.reference_problem}.", ""]
    out += ["Checks not run (each a no-go unless waived):" if not_run else "Checks not run: none.", ""]
    out += [f"- {r.node}: {r.check} — {r.reason}" for r in not_run] + ([""] if not_run else [])
    unverified = [r for r in result.results if r.evidence.get("port_identity")]
    if unverified:  # the site's LLDP opt-out: like a waiver, never silent
        out += [f"Port identity not verified by the fabric — {unverified[0].evidence['port_identity']}:", ""]
        out += [f"- {r.node}: {r.check} — {r.reason}" for r in unverified] + [""]
    if waived:
        out += ["| node | check | waived by | reason | the check's own result |", "|---|---|---|---|---|"]
        out += [f"| {w.node} | {w.check} | {w.by} | {w.reason.replace('|', '/')} | "
                f"{'no result' if r is None else 'go' if r.go else f'no-go ({r.failure})'} |" for r, w in waived]
    else:
        out.append("Waivers: none.")
    return out + [""]


def _expectations(result) -> list[str]:
    """Each node's expectation: the catalogue entry and what chose it; profile overrides named as such."""
    out = ["## Expectations", "", "| node | expected product | chosen by | profile overrides |", "|---|---|---|---|"]
    for node in result.plan.nodes:
        e = result.plan.expect.get(node)
        if e is None:
            continue
        over = ", ".join(f"{k}={f.value} ({f.source})" for k, f in e.figures.items() if f.origin == "profile")
        out.append(f"| {node} | {e.server or e.gpu or 'none catalogued'} | {', '.join(e.selected_by) or '—'} | "
                   f"{over or 'none'} |")
    return out + [""]


def _expected(result, r) -> dict:
    """The figures `r` was judged against, with their origin and source (catalogue or profile)."""
    out = dict(r.expected)
    e = result.plan.expect.get(r.node) if result.plan is not None else None
    names = {"gpu": ("gpus", "smi_names"), "burn": ("thermal.max_operating_c",), "rdma": ("nics.count", "nics.rate_gbps"),
             "nccl-node": ("nvlink_gbs",), "nccl-pair": ("nics.aggregate_gbps", "nics.count", "nics.rate_gbps")}
    for name in names.get(r.check, ()):
        f = e.get(name) if e is not None else None
        if f is not None:
            out.setdefault(name, {"value": f.value, "origin": f.origin, "source": f.source})
    return out


def _waived(result, r) -> dict | None:
    pol = getattr(result, "policy", None)
    if pol is None or r.go:
        return None
    w = next((w for w in pol.waivers if w.node == r.node and w.check == r.check), None)
    return None if w is None else w.model_dump()


def heatmap_png(result, path: Path) -> Path | None:
    """Node × node all_reduce_perf bus bandwidth (GB/s): each new node with the reference node and its ring
    neighbour. Empty cells were not measured."""
    cells = [r for r in [*result.results, *result.pairs] if r.check == "nccl-pair" and r.peer]
    if not cells:
        return None
    import math

    from drills.report.timeline_chart import new_figure, save_figure

    names = list(dict.fromkeys([*result.plan.nodes, *(r.peer for r in cells)]))
    idx = {n: i for i, n in enumerate(names)}
    grid = [[math.nan] * len(names) for _ in names]
    for r in cells:
        bw = r.measured.get("busbw_gbs")
        if bw is not None:
            grid[idx[r.node]][idx[r.peer]] = grid[idx[r.peer]][idx[r.node]] = bw
    size = max(4.0, 0.5 * len(names) + 2.5)
    fig, ax = new_figure((size + 1.2, size))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=max((c for row in grid for c in row if c == c), default=1))
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:
                ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=7)
    ax.set_title("all_reduce_perf bus bandwidth per node pair (GB/s)", fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return save_figure(fig, path)


def _kv(d: dict) -> str:
    parts = []
    for k, v in d.items():
        if v is None or isinstance(v, (dict, list)) and not v or k in _IDENTITIES:
            continue  # identities are evidence (acceptance.json, Allure), not figures to read in a table
        if isinstance(v, float):
            v = f"{v:.1f}"
        parts.append(f"{k}={v}")
    return ", ".join(parts).replace("|", "/")[:300]


def _html(md: str, png: Path | None) -> str:
    rows = []
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append("<tr>" + "".join(f"<td>{html.escape(c).replace('**', '')}</td>" for c in cells) + "</tr>")
        elif line.startswith("#"):
            rows.append(f"</table><h2>{html.escape(line.lstrip('# '))}</h2><table border=1 cellspacing=0 cellpadding=4>")
        elif line.strip() and not line.startswith("|---") and not line.startswith("!["):
            rows.append(f"</table><p>{html.escape(line).replace('**', '')}</p><table border=1 cellspacing=0 cellpadding=4>")
    img = f'<img src="{png.name}" alt="NCCL pair heat map">' if png is not None else ""
    return ("<!doctype html><meta charset=utf-8><title>Pre-expansion acceptance</title><body style='font-family:sans-serif'>"
            "<table>" + "\n".join(rows) + "</table>" + img + "</body>")
