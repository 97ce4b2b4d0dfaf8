"""Wall time of `drills run` on the twin (a benchmark, not a timed test).

    .venv/bin/python bench/suite.py [--scale 60] [-m training] [--repeat 1]

Runs the real CLI in a subprocess against fresh twins (one per drill scenario) with the report
built, and prints the wall time of each run plus how many drills passed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default=None, help="twin scale (default: the profile's, 60)")
    parser.add_argument("-m", dest="markexpr", default="training", help="drill selection (pytest -m)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-html", action="store_true", help="skip the Allure HTML build")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drills-bench-") as reports:
        for n in range(args.repeat):
            argv = [sys.executable, "-m", "drills.cli", "run", "-m", args.markexpr, "--reports", reports,
                    "--run-id", f"bench-{n}"]
            argv += ["--scale", args.scale] if args.scale else []
            argv += ["--no-html"] if args.no_html else []
            start = time.perf_counter()
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
            wall = time.perf_counter() - start
            path = Path(reports) / f"bench-{n}" / "records.jsonl"
            recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
            passed = sum(r["verdict"] == "pass" for r in recs)
            recovery = ", ".join(f"{r['recovery_s']:.0f}s" for r in recs if r.get("recovery_s") is not None)
            print(f"drills run -m {args.markexpr} (scale {args.scale or 'profile'}): {wall:.1f} s wall, "
                  f"exit {done.returncode}, {passed}/{len(recs)} drills passed, cluster recovery {recovery}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
