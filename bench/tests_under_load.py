"""`make test` under CPU load, several times in a row (issue 19; a benchmark of the suite's steadiness).

    .venv/bin/python bench/tests_under_load.py [--runs 3] [--busy 2] [--workers 3] [-- PYTEST ARGS]

Keeps `--busy` busy-loop processes on the CPU and runs the test suite exactly as `make test` does
(`pytest -n WORKERS --dist loadfile`) `--runs` times in a row. Prints one row per run (wall time, passed,
failed, errors, skipped) and the failing tests by name, so a flaky test shows which run it broke. The
acceptance of issue 19: 0 failures in 3 consecutive runs with two busy loops (the 8 minutes are `make test`'s
on a quiet machine: with two busy loops the suite has about half the CPU).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# as `make test` runs pytest: bytecode may be written (its assert-rewritten test modules are cached)
TEST_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes loading the CPU")
    parser.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (make test's TEST_WORKERS)")
    parser.add_argument("--keep", default=None, help="write each run's whole pytest output here (run-N.log)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    # a SIGTERM (or SIGHUP) ends the bench like Ctrl-C: through the finally below, so no busy loop outlives it
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    rows, bad = [], 0
    try:
        for n in range(1, args.runs + 1):
            start = time.monotonic()
            done = _pytest(["-n", str(args.workers), "--dist", "loadfile", "--no-loadscope-reorder", "-q", "-p",
                            "no:cacheprovider", *args.pytest_args])
            wall = time.monotonic() - start
            if args.keep:  # the failures' own words, for a run that was not clean
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                (Path(args.keep) / f"run-{n}.log").write_text(done.stdout + done.stderr)
            tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(num)
                      for num, kind in SUMMARY.findall(tail)}
            failing = [line.split(" ", 1)[1].split(" - ")[0] for line in done.stdout.splitlines()
                       if line.startswith(("FAILED ", "ERROR "))]
            bad += counts.get("failed", 0) + counts.get("error", 0)
            rows.append((n, wall, counts, failing))
            print(f"run {n}: {wall / 60:.1f} min, exit {done.returncode}, {tail}", flush=True)
            for name in failing:
                print(f"    {name}", flush=True)
    finally:
        for proc in busy:
            proc.kill()
    print(f"\n{args.runs} run(s), {args.busy} busy loop(s), {args.workers} workers:")
    print(f"{'run':>4} {'wall min':>9} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}")
    for n, wall, counts, _ in rows:
        print(f"{n:>4} {wall / 60:>9.1f} {counts.get('passed', 0):>7} {counts.get('failed', 0):>7} "
              f"{counts.get('error', 0):>7} {counts.get('skipped', 0):>8}")
    return 0 if bad == 0 else 1


def _pytest(argv: list[str]) -> subprocess.CompletedProcess:
    """One run of the suite in its own process group: interrupted, the whole group goes (xdist workers and the
    twins they started included), not just pytest."""
    cmd = [str(REPO / ".venv/bin/python"), "-m", "pytest", *argv]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=TEST_ENV,
                            start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


if __name__ == "__main__":
    sys.exit(main())
