"""Where a test run's CPU goes, sampled (a benchmark, not a test: prints figures).

    .venv/bin/python bench/tests_sample.py [--rate 25] [--workers 4] [--top 25] [--kind twin ...] [--keep FILE] -- tests/e2e/test_x.py …
    .venv/bin/python bench/tests_sample.py --samples FILE [--kind twin]   # an earlier run's samples (--keep)

Runs pytest under `py-spy record --subprocesses` (every Python process the run starts: the workers, the twins,
`drills run`s, locust, the stores), then sorts the samples by kind of process and prints, per kind, the CPU seconds
it was seen running (samples / rate; a thread blocked in a wait is not counted) and the functions seen most — on
top of the stack (own time) and anywhere in it among our own modules (cumulative). A sampler costs every function
the same; bench/tests_profile.py's cProfile charges each call, which made call-heavy code (a recursive interning,
a sort with a key function) look several times dearer than it is and hid the real cost of a few C calls.

py-spy is not a test dependency: `.venv/bin/uv pip install --python .venv/bin/python -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# a stack whose top frame is one of these is a thread waiting, not running
IDLE = ("select (selectors", "socket.accept", "Condition.wait", "_worker (concurrent", "readinto", "time.sleep",
        "_wait_for_tstate_lock", "recv_into", "poll (", "Event.wait", "waitpid", "acquire_with_timeout", "Hub.run")
# (marker in a stack, kind): the first that matches names the process
KINDS = (("run_twin (", "twin"), ("run_drills (", "drills run"), ("lane_main (", "lane"), ("locust", "locust"),
         ("storefs.py", "store (FUSE)"), ("-m drills.cli twin up", "twin (start)"), ("-m drills.cli", "drills (other)"),
         ("prefork_server", "prefork server"), ("-u -c import", "pytest worker"), ("-m pytest", "pytest"))


def kind(stack: list[str]) -> str:
    process = next((f for f in reversed(stack) if f.startswith("process ")), "")
    text = ";".join(stack)
    for marker, name in KINDS:
        if marker in text or marker in process:
            return name
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=25, help="samples a second per process")
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers")
    parser.add_argument("--top", type=int, default=25, help="functions to list per kind")
    parser.add_argument("--kind", action="append", default=[], help="list functions for this kind only (repeatable)")
    parser.add_argument("--keep", type=Path, help="keep py-spy's raw samples in this file")
    parser.add_argument("--samples", type=Path, help="read the raw samples of an earlier run (--keep) instead of running")
    parser.add_argument("pytest_args", nargs="*", help="what pytest runs (after --)")
    args = parser.parse_args()
    if args.samples is not None:
        print_samples(args.samples, args)
        return 0
    if not args.pytest_args:
        parser.error("name what pytest runs (after --), or --samples FILE")
    spy = shutil.which("py-spy", path=f"{REPO / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    if spy is None:
        print("py-spy is not installed: .venv/bin/uv pip install --python .venv/bin/python -e '.[bench]'", file=sys.stderr)
        return 2
    raw = args.keep or Path(tempfile.mkdtemp(prefix="drills-sample-")) / "samples.txt"
    done = subprocess.run([spy, "record", "--subprocesses", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--",
                           str(REPO / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
                           str(args.workers), "--dist", "loadfile", *args.pytest_args],
                          cwd=REPO, capture_output=True, text=True)
    summary = [line for line in done.stdout.splitlines() if " passed" in line or " failed" in line]
    print(summary[-1] if summary else done.stdout[-500:] + done.stderr[-500:])
    print_samples(raw, args)
    return done.returncode


def print_samples(raw: Path, args: argparse.Namespace) -> None:
    running, waiting = collections.Counter(), collections.Counter()
    own: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    ours: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        text, _, count = line.rpartition(" ")
        if not text:
            continue
        stack, n = text.split(";"), int(count)
        name = kind(stack)
        if any(marker in stack[-1] for marker in IDLE):
            waiting[name] += n
            continue
        running[name] += n
        own[name][stack[-1]] += n
        for frame in set(stack):
            if "(drills/" in frame or "(fixtures/" in frame:
                ours[name][frame] += n
    total = sum(running.values())
    print(f"\n{total / args.rate:.0f} CPU seconds seen running ({total} samples at {args.rate} Hz); by kind of process:")
    for name, n in running.most_common():
        print(f"  {n / args.rate:8.1f} s  {100 * n / max(total, 1):5.1f} %  {name}  (waiting: {waiting[name] / args.rate:.0f} s)")
    for name, _ in running.most_common():
        if args.kind and name not in args.kind:
            continue
        print(f"\n===== {name}: on top of the stack")
        for frame, n in own[name].most_common(args.top):
            print(f"  {n / args.rate:7.1f} s  {frame[:150]}")
        print(f"===== {name}: our code anywhere in the stack (less the entry frames every sample has)")
        frames = [(f, n) for f, n in ours[name].most_common() if n < 0.9 * running[name]]
        for frame, n in frames[:args.top]:
            print(f"  {n / args.rate:7.1f} s  {frame[:150]}")
    print(f"\nsamples: {raw}")


if __name__ == "__main__":
    sys.exit(main())
