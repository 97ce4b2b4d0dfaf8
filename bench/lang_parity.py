"""Same verdicts in Chinese: every construction of bench/verdicts.yaml, and every scenario on the healthy twin, run
in English and in zh-CN (`drills run --lang zh`, features/zh/), their records compared (long-running, not part
of `make test`; tests/e2e/test_lang_parity.py runs a few of them).

    .venv/bin/python bench/lang_parity.py [--only DEFECT ...] [--no-healthy] [--jobs 1] [--out reports/lang_parity.md]

Each row: `drills run --defect D -m DRILL -k K --scale S` in English, and the same scenarios in zh-CN — their
counterparts (drills/core/languages.py pairs the trees' tests), selected by name. The healthy twin: every scenario
in each language (fresh twins, lanes). Two records agree when their verdict, category, exit code, fault and each
check's verdict agree (`differences`); the reasons are the checks' own sentences and carry run-to-run figures, so
they are not compared word for word. A pair that differs is run again once, both languages (a 600× twin on a
loaded machine misses timing now and then, in either language); the table says so. Exits 1 when any pair still
differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.verdicts import Row, rows  # noqa: E402
from drills.core.languages import counterparts, keyword_for  # noqa: E402
from drills.core.selection import select  # noqa: E402

__all__ = ["signature", "differences", "zh_args", "pair_records"]

FEATURES = REPO / "features"


def signature(record: dict, exit_code: int | None = None) -> dict:
    """What must be the same in both languages: the typed outcome, the fault and every check's verdict."""
    details = record.get("details") or {}
    return {"verdict": record.get("verdict"), "category": record.get("category"), "exit": exit_code,
            "drill": record.get("drill"),
            "faults": sorted({(f.get("kind"), f.get("mode")) for f in details.get("faults") or []}, key=str),
            "checks": sorted((c["name"], c["verdict"]) for c in details.get("checks") or [])}


def differences(en: dict, zh: dict, en_exit: int | None = None, zh_exit: int | None = None) -> list[str]:
    """Where the zh-CN record's signature differs from the English one's (empty: the same)."""
    a, b = signature(en, en_exit), signature(zh, zh_exit)
    return [f"{key}: en {a[key]!r}, zh {b[key]!r}" for key in a if a[key] != b[key]]


def zh_args(markexpr: str | None, keyword: str | None) -> list[str]:
    """The `drills run` selection of the zh-CN counterparts of what `-m markexpr -k keyword` picks in English."""
    pairs = counterparts(FEATURES, "zh")
    names = [pairs[c.name] for c in select(FEATURES, markexpr, keyword or None)]
    if not names:
        raise SystemExit(f"-m {markexpr} -k {keyword}: selects nothing")
    return ["--lang", "zh", *(["-m", markexpr] if markexpr else []), "-k", keyword_for(names)]


def pair_records(en_records: list[dict], zh_records: list[dict]) -> list[tuple[dict | None, dict | None, str]]:
    """(English record, its zh-CN counterpart's record, English test name) for every English record."""
    pairs = counterparts(FEATURES, "zh")
    by_name = {r.get("nodeid", "").split("::", 1)[-1]: r for r in zh_records}
    out = []
    for rec in en_records:
        name = rec.get("nodeid", "").split("::", 1)[-1]
        out.append((rec, by_name.get(pairs.get(name, "?")), name))
    return out


def _run(args: list[str], tmp: str, run_id: str) -> tuple[int, list[dict], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "drills.cli", "run", *args, "--no-html", "--reports", tmp,
                           "--run-id", run_id], cwd=REPO, capture_output=True, text=True)
    path = Path(tmp) / run_id / "records.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    return done.returncode, recs, time.monotonic() - started


def _row_args(row: Row) -> tuple[list[str], list[str]]:
    common = ["--defect", row.defect, "--scale", str(row.scale)]
    return row.args(), [*common, *zh_args(row.drill, row.keyword)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="defects to run (default: every row)")
    parser.add_argument("--no-healthy", action="store_true", help="skip the healthy twin's scenarios")
    parser.add_argument("--healthy-m", default=None, help="only these healthy scenarios (-m, in English)")
    parser.add_argument("--healthy-k", default=None, help="only these healthy scenarios (-k, in English)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (2: the English and zh-CN run of a row)")
    parser.add_argument("--out", default=str(REPO / "reports" / "lang_parity.md"))
    opts = parser.parse_args()
    chosen = [r for r in rows() if not opts.only or r.defect in opts.only]
    lines = ["| construction | drill | scenario | en | zh | same |", "|---|---|---|---|---|---|"]
    pairs = differing = 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lang-parity-") as tmp, ThreadPoolExecutor(opts.jobs) as pool:
        healthy = ([*(["-m", opts.healthy_m] if opts.healthy_m else []), *(["-k", opts.healthy_k] if opts.healthy_k else [])],
                   zh_args(opts.healthy_m, opts.healthy_k) if opts.healthy_m or opts.healthy_k else ["--lang", "zh"])
        jobs = [] if opts.no_healthy else [("healthy twin", "", [*healthy[0], "--lanes", "3"], [*healthy[1], "--lanes", "3"])]
        jobs += [(f"`{r.defect}`", r.drill, *_row_args(r)) for r in chosen]
        for index, (construction, drill, en_args, zh_run_args) in enumerate(jobs):
            for attempt in range(2):
                en_f = pool.submit(_run, en_args, tmp, f"{index:02d}-{attempt}-en")
                zh_f = pool.submit(_run, zh_run_args, tmp, f"{index:02d}-{attempt}-zh")
                (en_exit, en_recs, en_s), (zh_exit, zh_recs, zh_s) = en_f.result(), zh_f.result()
                single = len(en_recs) == 1
                if en_recs and all(zh is not None and not differences(en, zh, en_exit if single else None,
                                                                       zh_exit if single else None)
                                   for en, zh, _ in pair_records(en_recs, zh_recs)):
                    break
            if not en_recs:
                lines.append(f"| {construction} | {drill} | — | no record (exit {en_exit}) | exit {zh_exit} | ✗ |")
                differing += 1
                print(lines[-1], flush=True)
                continue
            single = len(en_recs) == 1  # a row's exit code is its record's; a healthy run's is the run's
            for en, zh, name in pair_records(en_recs, zh_recs):
                pairs += 1
                wrong = ["no zh-CN record"] if zh is None else differences(
                    en, zh, en_exit if single else None, zh_exit if single else None)
                differing += bool(wrong)
                word = lambda r: "—" if r is None else f"{r['verdict'].upper()} ({r.get('category') or '—'})"  # noqa: E731
                mark = ("✓" if not wrong else "✗ " + "; ".join(wrong)) + (" (after a re-run)" if attempt else "")
                lines.append(f"| {construction} | {en.get('drill')} | {name} | {word(en)} | {word(zh)} | {mark} |")
                print(lines[-1] + f"  [{en_s:.0f}s/{zh_s:.0f}s]", flush=True)
    elapsed = time.monotonic() - began
    summary = (f"{pairs - differing} of {pairs} scenario runs got the same verdict in zh-CN as in English "
               f"({len(jobs)} constructions incl. the healthy twin; {elapsed / 60:.1f} min)")
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Same verdicts in zh-CN as in English\n\n" + "\n".join(lines) + f"\n\n{summary}\n", encoding="utf-8")
    print(f"\n{summary}; table: {out}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
