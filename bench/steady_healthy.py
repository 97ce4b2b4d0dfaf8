"""False refusals of the steady-state hypothesis (issue 30): `drills run` N times on the healthy twin, with the
built-in profile's `nominal:` on, and count every record that is not a PASS — a refusal before the fault
(precondition_not_met) or a not_restored after the revert on a healthy platform is a false one. Prints, per
facet, the spread of the readings against their nominal so the margins are visible (long-running: not a test).

    .venv/bin/python bench/steady_healthy.py [--runs 20] [-m "training or network or inference or storage"]
        [-k "cordon_drain or kill_one or (carrying and not sonic and not nxos) or Saturate"] [--out reports/steady.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKERS = "training or network or inference or storage"
KEYWORD = "cordon_drain or kill_one or (carrying and not sonic and not nxos) or Saturate"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("-m", dest="markers", default=MARKERS)
    parser.add_argument("-k", dest="keyword", default=KEYWORD)
    parser.add_argument("--out", default=str(REPO / "reports" / "steady-healthy.md"))
    opts = parser.parse_args()
    verdicts: dict[str, int] = defaultdict(int)
    refusals: list[str] = []
    readings: dict[tuple[str, str], list[float]] = defaultdict(list)
    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="steady-healthy-") as tmp:
        for n in range(1, opts.runs + 1):
            run_id = f"healthy-{n:02d}"
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "drills.cli", "run", "-m", opts.markers, "-k", opts.keyword,
                                   "--no-html", "--reports", tmp, "--run-id", run_id], cwd=REPO, capture_output=True,
                                  text=True)
            walls.append(time.monotonic() - started)
            path = Path(tmp) / run_id / "records.jsonl"
            recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
            if not recs:
                refusals.append(f"{run_id}: no record (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            for rec in recs:
                verdicts[f"{rec['verdict']} ({rec.get('category')})"] += 1
                if rec["verdict"] != "pass":
                    refusals.append(f"{run_id} {rec['drill']}: {rec['verdict']} {rec.get('category')}: {rec['reason']}")
                for when, hyp in (rec["details"].get("steady_state") or {}).items():
                    for r in hyp["readings"]:
                        if isinstance(r.get("value"), (int, float)):
                            readings[(when, r["facet"].split(" ")[0] + " " + r["facet"].split(" ")[-1])].append(r["value"])
            print(f"run {n}/{opts.runs}: exit {done.returncode}, {len(recs)} record(s), "
                  f"{sum(r['verdict'] == 'pass' for r in recs)} pass, {walls[-1]:.0f} s", flush=True)
    false_refusals = sum(1 for r in refusals if "precondition_not_met" in r or "not_restored" in r)
    lines = ["# Steady-state hypothesis on the healthy twin", "",
             f"{opts.runs} runs of `drills run -m \"{opts.markers}\" -k \"{opts.keyword}\"`; "
             f"wall per run median {statistics.median(walls):.0f} s.", "",
             "| verdict (category) | records |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(verdicts.items())]
    lines += ["", f"False refusals (precondition_not_met or not_restored on the healthy twin): **{false_refusals}**", "",
              "| check | facet | min | median | max | n |", "|---|---|---|---|---|---|"]
    for (when, facet), values in sorted(readings.items()):
        lines.append(f"| {when} | {facet} | {min(values):g} | {statistics.median(values):g} | {max(values):g} | "
                     f"{len(values)} |")
    if refusals:
        lines += ["", "Records that did not pass:", ""] + [f"- {r}" for r in refusals]
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 1 if refusals else 0


if __name__ == "__main__":
    sys.exit(main())
