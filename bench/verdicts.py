"""The false-pass table: every defect run against the drill it must break, on a fresh twin each
(`make verdicts`; long-running, not part of `make test`).

    .venv/bin/python bench/verdicts.py [--only DEFECT ...] [--out reports/verdicts.md]

Reads bench/verdicts.yaml (the rows the e2e tests read too), runs `drills run --defect D -m DRILL -k K
--scale S` for each row, one after another, and prints a table construction → expected → actual →
reason; writes it as Markdown to `--out`. Exits 1 when any row's verdict, category, exit code or reason
differs from what the table expects. Constructions that need more than a defect are listed with the test
that builds them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "bench" / "verdicts.yaml"
# The rows are judged as the e2e tests judge them: without detection (the built-in profile's managed monitoring
# would start Prometheus at rows' 300-600x, where it cannot keep the site's cadence). Detection's own constructions
# are the `tests_only` rows of tests/e2e/test_detect_stack.py and test_detect_drills.py.
ROW_ENV = {**os.environ, "DRILLS_MONITORING": "off"}

__all__ = ["TABLE", "Row", "rows", "built_by_tests", "mismatches", "site_profile"]


@dataclass(frozen=True)
class Row:
    """One construction: a defect and the drill it must break, and what the record must say."""

    defect: str
    drill: str
    keyword: str
    scale: int
    exit: int
    verdict: str
    reason: str
    category: str | None = None
    check: str | None = None  # the check that must carry the verdict (its name in details.checks)
    before: str | None = None  # the verdict it got before the check that catches it existed (documentation)
    test: str | None = None  # the e2e test that builds this construction when it is not the row's own run
    # the site's own nominal for a drill, over the built-in profile's (`nominal.drills`: drill id → facets): a
    # site whose completions are long declares its nominal latency long — a profile edit, as a reviewer makes one
    nominal: dict | None = None

    def args(self, workdir: Path | None = None) -> list[str]:
        """The `drills run` arguments; a row with its own `nominal` writes its profile into `workdir`."""
        keyword = ["-k", self.keyword] if self.keyword else []
        profile = []
        if self.nominal:
            if workdir is None:
                raise ValueError(f"row {self.defect}: its profile edit needs a folder to write the profile in")
            profile = ["--profile", str(site_profile(self.nominal, Path(workdir) / f"{self.defect}-profile.yaml"))]
        return ["--defect", self.defect, "-m", self.drill, *keyword, "--scale", str(self.scale), *profile]


def site_profile(nominal: dict, path: Path) -> Path:
    """The built-in twin profile with `nominal` (drill id → facets) over its `nominal.drills`, written to `path`."""
    import yaml

    data = yaml.safe_load((REPO / "drills" / "profile" / "twin.yaml").read_text(encoding="utf-8"))
    drills = data.setdefault("nominal", {}).setdefault("drills", {})
    for drill, facets in nominal.items():
        drills[drill] = {**(drills.get(drill) or {}), **facets}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def rows(drill: str | None = None) -> list[Row]:
    """The table's rows (those of one drill when `drill` is given)."""
    data = load_yaml(TABLE.read_text(encoding="utf-8"))
    return [Row(**r) for r in data["defects"] if drill is None or r["drill"] == drill]


def built_by_tests() -> list[dict]:
    return load_yaml(TABLE.read_text(encoding="utf-8"))["tests_only"]


def mismatches(row: Row, exit_code: int, record: dict | None) -> list[str]:
    """What differs between the record a run wrote and the row's expectation (empty: as expected)."""
    if record is None:
        return ["no record written"]
    out = []
    if exit_code != row.exit:
        out.append(f"exit {exit_code}, expected {row.exit}")
    if record.get("verdict") != row.verdict:
        out.append(f"verdict {record.get('verdict')}, expected {row.verdict}")
    if row.category and record.get("category") != row.category:
        out.append(f"category {record.get('category')}, expected {row.category}")
    if not any(said in (record.get("reason") or "") for said in row.reason.split(" || ")):
        out.append(f"reason does not say {row.reason!r}")
    if row.check:
        checks = {c["name"]: c for c in (record.get("details") or {}).get("checks") or []}
        got = checks.get(row.check, {}).get("verdict")
        if got not in ("fail", "inconclusive"):
            out.append(f"check {row.check!r} is {got or 'missing'}, expected to fail")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="defects to run (default: every row)")
    parser.add_argument("--out", default=str(REPO / "reports" / "verdicts.md"))
    opts = parser.parse_args()
    chosen = [r for r in rows() if not opts.only or r.defect in opts.only]
    lines = ["| construction | drill | expected | actual | reason |", "|---|---|---|---|---|"]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="verdicts-") as tmp:
        for index, row in enumerate(chosen):
            run_id = f"{index:02d}-{row.defect}-{row.drill}"  # one defect may break several drills (several rows)
            done = subprocess.run([sys.executable, "-m", "drills.cli", "run", *row.args(Path(tmp)), "--no-html",
                                   "--reports", tmp, "--run-id", run_id], cwd=REPO, capture_output=True, text=True,
                                  env=ROW_ENV)
            path = Path(tmp) / run_id / "records.jsonl"
            recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
            record = recs[0] if len(recs) == 1 else None
            wrong = mismatches(row, done.returncode, record)
            failed += bool(wrong)
            expected = f"{row.verdict.upper()} ({row.category or 'any'}), exit {row.exit}"
            actual = "—" if record is None else f"{record['verdict'].upper()} ({record.get('category')}), exit {done.returncode}"
            mark = "✓" if not wrong else "✗ " + "; ".join(wrong)
            reason = (record or {}).get("reason") or (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            line = f"| `{row.defect}` | {row.drill} | {expected} | {mark} {actual} | {_cell(reason)} |"
            lines.append(line)
            print(line, flush=True)
    lines += ["", "Built by tests only (more than a defect):", "", "| construction | expected | test |", "|---|---|---|"]
    lines += [f"| {t['construction']} | {t['verdict'].upper()} | `{t['test']}` |" for t in built_by_tests()]
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Verdicts of broken platforms\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"\n{len(chosen) - failed} of {len(chosen)} constructions got the expected verdict; table: {out}")
    return 1 if failed else 0


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
