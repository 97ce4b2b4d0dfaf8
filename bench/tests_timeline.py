"""How the suite's workers spend their wall time (a benchmark, not a test: prints figures).

    .venv/bin/python bench/tests_timeline.py [--workers 3] [--top 25] [-- PYTEST ARGS]

Runs the suite as `make test` does with DRILLS_TEST_TIMELINE set (tests/conftest.py appends each test's worker,
start and end). Prints the run's wall time, each worker's busy time and idle tail (from its last test's end to the
run's end), and the test files with the most wall time (setup, call and teardown of their tests), longest first —
the files that decide the tail when they are scheduled last (`--dist loadfile` keeps a file on one worker).
`--write-weights` saves every file's wall time to tests/file_weights.json, the order tests/conftest.py hands the
files to the workers in (longest first).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (make test's TEST_WORKERS)")
    parser.add_argument("--top", type=int, default=25, help="test files to list")
    parser.add_argument("--write-weights", action="store_true", help="save the files' wall times to "
                        "tests/file_weights.json (the order the suite schedules files in)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    timeline = Path(tempfile.mkdtemp(prefix="drills-timeline-")) / "timeline.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["DRILLS_TEST_TIMELINE"] = str(timeline)
    start = time.time()
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "pytest", "-n", str(args.workers), "--dist",
                           "loadfile", "--no-loadscope-reorder", "-q", *args.pytest_args], cwd=REPO, env=env, capture_output=True, text=True)
    end = time.time()
    (timeline.parent / "pytest.out").write_text(done.stdout + done.stderr)  # the failures' own words
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    print(f"{tail}\nwall {end - start:.0f} s with {args.workers} workers")
    for line in done.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"    {line}")
    print(f"pytest's output: {timeline.parent / 'pytest.out'}")
    lines = [json.loads(x) for x in timeline.read_text().splitlines()] if timeline.exists() else []
    if any(line["worker"] != "main" for line in lines):  # xdist's controller logs every worker's tests again
        lines = [line for line in lines if line["worker"] != "main"]
    busy, last, files = collections.Counter(), {}, collections.Counter()
    for line in lines:
        busy[line["worker"]] += line["end"] - line["start"]
        last[line["worker"]] = max(last.get(line["worker"], 0.0), line["end"])
        files[line["test"].split("::")[0]] += line["end"] - line["start"]
    for worker in sorted(busy):
        print(f"{worker}: busy {busy[worker]:.0f} s, idle tail {end - last[worker]:.0f} s")
    print(f"\n{'test file':<60} {'wall s':>7}")
    for name, seconds in files.most_common(args.top):
        print(f"{name:<60} {seconds:>7.1f}")
    if args.write_weights and files:
        weights = {name: round(seconds, 1) for name, seconds in files.most_common() if seconds >= 1.0}
        (REPO / "tests" / "file_weights.json").write_text(json.dumps(weights, indent=1) + "\n")
        print(f"wrote tests/file_weights.json ({len(weights)} files)")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
