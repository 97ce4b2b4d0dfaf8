"""Where the test suite's CPU goes: `make test` with the prefork servers counting what they fork (issue 19).

    .venv/bin/python bench/tests_census.py [--workers 2] [-- PYTEST ARGS]

Runs the suite as `make test` does with DRILLS_PREFORK_CENSUS set: each worker's prefork server appends a line
per process it forked and reaped (what it ran, its CPU with its own reaped children's, its wall time). Prints
the whole run's wall and CPU (this process's children: pytest and everything under it) and the CPU per kind of
process — twins, `drills run`s, other `drills` commands — with counts and the mean per process; the rest is
pytest itself and what the tests start directly (kubectl, Chromium, the Allure CLI, fresh interpreters).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def kind(line: dict) -> str:
    args = line["args"]
    if line["module"] == "drills.cli":
        return "twin" if args[:2] == ["twin", "up"] else f"drills {args[0] if args else ''}".strip()
    return line["module"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (make test's TEST_WORKERS)")
    parser.add_argument("--files", type=int, default=40, help="how many test files to list, most CPU first")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    census = Path(tempfile.mkdtemp(prefix="drills-census-")) / "census.jsonl"
    env = dict(os.environ, DRILLS_PREFORK_CENSUS=str(census))
    start = time.monotonic()
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "pytest", "-n", str(args.workers), "--dist",
                           "loadfile", "-q", "-p", "no:cacheprovider", *args.pytest_args], cwd=REPO, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    print(f"{tail}\nwall {wall:.0f} s, CPU {total:.0f} s ({total / wall:.2f} cores) with {args.workers} workers")
    for line in done.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"    {line}")
    lines = [json.loads(x) for x in census.read_text().splitlines()] if census.exists() else []
    cpu, count, walls = collections.Counter(), collections.Counter(), collections.Counter()
    for line in lines:
        cpu[kind(line)] += line["cpu_s"]
        count[kind(line)] += 1
        walls[kind(line)] += line["wall_s"]
    print(f"{'forked process':<22} {'count':>6} {'CPU s':>8} {'share':>6} {'CPU/proc':>9} {'wall/proc':>10}")
    for name, seconds in cpu.most_common():
        print(f"{name:<22} {count[name]:>6} {seconds:>8.1f} {seconds / total:>6.1%} {seconds / count[name]:>9.2f} "
              f"{walls[name] / count[name]:>10.2f}")
    per_file, file_count = collections.Counter(), collections.Counter()
    for line in lines:
        per_file[line.get("test") or "?"] += line["cpu_s"]
        file_count[line.get("test") or "?"] += 1
    print(f"\n{'test file (forked processes only)':<60} {'count':>6} {'CPU s':>8}")
    for name, seconds in per_file.most_common(args.files):
        print(f"{name:<60} {file_count[name]:>6} {seconds:>8.1f}")
    rest = total - sum(cpu.values())
    print(f"{'the rest (pytest, …)':<22} {'':>6} {rest:>8.1f} {rest / total:>6.1%}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
