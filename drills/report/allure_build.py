"""Builds the single-file Allure 2 HTML report of a run, carrying the history of the previous run.

Runs the local Allure CLI (npm `allure-commandline`, installed into ./node_modules by `make
bootstrap`; Java 17) with ALLURE_NO_ANALYTICS=true, so the page opens offline from disk and embeds no
analytics. A single-file report has no `history/` folder, so after each build the history is
extracted from the page into `report/history/` for the next run to carry on.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from drills.core.errors import DrillError
from drills.core.record import Category
from drills.report.enrich import category_trace_regex, enrich_results
from drills.report.records import load_run, previous_run
from drills.report.text import categories, environment_labels, labels

__all__ = ["build_report", "allure_bin", "write_environment", "write_executor", "write_categories",
           "extract_history", "ANALYTICS_MARKERS"]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
ANALYTICS_MARKERS = ("googletagmanager", "google-analytics", "gtag(")
_HINT = "run `make drill` (or `make bootstrap`), which installs it"
# A report is a few seconds of one JVM: its start-up and JIT dominate. The client compiler alone and the serial
# collector cut that by a third of the wall and 40 % of the CPU (a two-scenario report, 2 cores: 1.8 s → 1.3 s,
# 2.4 s → 1.4 s of CPU).
# A JAVA_OPTS of the user's own is used as it is.
JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"


def build_report(run_dir: Path, lang: str = "en", history_from: Path | None = None,
                 environment: dict | None = None, name: str | None = None) -> Path:
    """Generate `run_dir/report/index.html` from `run_dir/allure-results`; returns the HTML path.

    `history_from` is a previous run dir, its `report/` or a `history/` folder; by default the run
    before this one in the same reports folder. `environment` overrides the values derived from
    the records (target, profile, Kubernetes version, nodes, GPUs, ...).
    """
    run_dir = Path(run_dir).resolve()
    results = run_dir / "allure-results"
    if not results.is_dir():
        raise DrillError(f"no Allure results in {results}: run the drills first (`drills run`)")
    allure = allure_bin()
    run = load_run(run_dir)
    words = labels(lang)
    name = name or f"{words['report_name']} — {run.run_id}"
    enrich_results(results, run.records, lang=lang)
    given = environment or {}  # first: the Environment widget shows its first five rows
    facts = {**given, **{k: v for k, v in _environment_from(run).items() if k not in given}}
    write_environment(results, environment_labels(facts, lang))
    write_categories(results, lang)
    source = Path(history_from) if history_from else _previous_report(run_dir)
    order = _carry_history(source, results / "history")
    write_executor(results, run.run_id, name, build_order=order + 1)
    out = run_dir / "report"
    cmd = [str(allure), "generate", "--single-file", "--clean", "--name", name, "--lang", lang,
           "-o", str(out), str(results)]
    env = {"JAVA_OPTS": JAVA_OPTS, **os.environ, "ALLURE_NO_ANALYTICS": "true"}
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise DrillError(f"allure generate failed for {run_dir.name}: {err}") from err
    html = out / "index.html"
    if proc.returncode != 0 or not html.exists():
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise DrillError(f"allure generate failed for {run_dir.name} (exit {proc.returncode}): {last[0]}")
    text = html.read_text(encoding="utf-8")
    if any(marker in text for marker in ANALYTICS_MARKERS):
        raise DrillError(f"{html} embeds analytics although ALLURE_NO_ANALYTICS=true; refusing to publish it")
    extract_history(html, out / "history")
    log.info("Allure report %s built in %.1fs", html, time.monotonic() - started)
    return html


def allure_bin() -> Path:
    """The local Allure CLI, after checking that it and Java are there (one clear line if not)."""
    allure = Path(os.environ.get("GPU_DRILLS_ALLURE") or REPO_ROOT / "node_modules" / ".bin" / "allure")
    if not allure.exists():
        raise DrillError(f"Allure CLI not found at {allure}: {_HINT}")
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        raise DrillError(f"Java (17+) not found on PATH, needed by the Allure CLI: {_HINT}")
    return allure


def write_environment(results: Path, values: dict) -> Path:
    """`environment.properties` (Allure's Environment widget); keys with no value are left out."""
    lines = []
    for key, value in values.items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, (list, tuple, set)):
            value = ", ".join(map(str, value))
        lines.append(f"{_prop_escape(str(key), key=True)}={_prop_escape(str(value))}")
    path = Path(results) / "environment.properties"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_executor(results: Path, run_id: str, report_name: str, build_order: int = 1) -> Path:
    """`executor.json`: names the run in the trend widgets (buildName = run id)."""
    path = Path(results) / "executor.json"
    path.write_text(json.dumps({"name": "gpu-drills", "type": "gpu-drills", "buildName": run_id,
                                "buildOrder": build_order, "reportName": report_name}), encoding="utf-8")
    return path


def write_categories(results: Path, lang: str = "en") -> Path:
    """`categories.json`: one Allure category per drills.core.record.Category (names from
    categories.yaml in `lang`), matching only the `drill-category: <id>` trace line enrich writes."""
    cats = [{"name": (c.get("name_zh") if lang == "zh" else None) or c["name"],
             "matchedStatuses": c["statuses"], "traceRegex": category_trace_regex(Category(c["id"]))}
            for c in categories()]
    path = Path(results) / "categories.json"
    path.write_text(json.dumps(cats, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def extract_history(html: Path, dest: Path) -> list[Path]:
    """Write the `history/*.json` embedded in a single-file report into `dest`; returns the files."""
    text = Path(html).read_text(encoding="utf-8")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in re.findall(r"d\('history/([\w.-]+\.json)','([A-Za-z0-9+/=]*)'\)", text):
        path = dest / name
        path.write_bytes(base64.b64decode(data))
        written.append(path)
    return written


def _carry_history(source: Path | None, dest: Path) -> int:
    """Copy the previous report's history into the results; returns how many builds it covers."""
    if dest.exists():
        shutil.rmtree(dest)
    history = _history_dir(source) if source else None
    if history is None:
        log.info("no previous Allure history: the trend starts with this run")
        return 0
    shutil.copytree(history, dest)
    try:
        return len(json.loads((dest / "history-trend.json").read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError):
        return 0


def _history_dir(source: Path) -> Path | None:
    for candidate in (source, source / "history", source / "report" / "history"):
        if (candidate / "history-trend.json").exists():
            return candidate
    for html in (source / "index.html", source / "report" / "index.html"):
        if html.exists():
            out = html.parent / "history"
            return out if extract_history(html, out) else None
    return None


def _previous_report(run_dir: Path) -> Path | None:
    prev = previous_run(run_dir)
    if prev and (prev.path / "report").exists():
        return prev.path / "report"
    return None


def _environment_from(run) -> dict:
    """What the records themselves say about the run; the caller's dict fills in the cluster facts."""
    recs = run.records
    try:
        framework = version("gpu-drills")
    except PackageNotFoundError:
        framework = "unknown"
    return {
        "Target": ", ".join(sorted({r.target for r in recs if r.target})) or None,
        "Defects": sorted({d for r in recs for d in r.defects}) or "none",
        "Run id": run.run_id,
        "Drills": ", ".join(dict.fromkeys(r.drill for r in recs)) or None,
        "Framework": f"gpu-drills {framework}",
    }


def _prop_escape(text: str, key: bool = False) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    if key:
        text = text.replace(" ", "\\ ").replace("=", "\\=").replace(":", "\\:")
    # Java properties are read as ISO-8859-1 unless escaped; escape non-Latin-1 (e.g. Chinese).
    return "".join(c if ord(c) < 0x80 else f"\\u{ord(c):04x}" for c in text)
