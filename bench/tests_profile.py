"""Where the processes a test run forks spend their CPU, by function (a benchmark, not a test: prints figures).

    .venv/bin/python bench/tests_profile.py [--workers 2] [--top 40] [--keep DIR] -- tests/e2e/test_x.py …

Runs pytest on the given tests with DRILLS_PREFORK_PROFILE set: every process the prefork servers fork (twins,
`drills run`s, lanes, other `drills` commands) runs its main thread under cProfile timed by its own CPU clock, so
a machine shared with other work gives the same profile. Merges the profiles per kind of process and prints, for
each kind, its CPU and the functions with the most own and cumulative CPU. Only the main thread is profiled (the
twin runs everything on its event loop; a drill's watch threads are not counted). bench/tests_census.py gives the
CPU per kind of process and per test file without the profiler's overhead. cProfile charges every call: call-heavy
code (recursion, key functions) looks several times dearer than it is — bench/tests_sample.py samples instead (what
this one pointed at first in stop 46 was 1 % of the suite; the sampler found a third of a twin in its exporters).
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drills.core.prefork_server import PROFILE_ENV  # noqa: E402


def kind(path: Path) -> str:
    """`drills.cli-twin-up-123.prof` → `drills.cli-twin-up`."""
    return path.stem.rsplit("-", 1)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--top", type=int, default=35, help="functions to list per kind and order")
    parser.add_argument("--keep", type=Path, help="keep the .prof files in this folder (default: a temporary one)")
    parser.add_argument("pytest_args", nargs="+", help="what pytest runs (after --)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="drills-profile-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **{PROFILE_ENV: str(folder)})
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
                           str(args.workers), "--dist", "loadfile", *args.pytest_args], cwd=REPO, env=env,
                          capture_output=True, text=True)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:])
    groups: dict[str, list[Path]] = collections.defaultdict(list)
    for prof in folder.glob("*.prof"):
        groups[kind(prof)].append(prof)
    for name, files in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        stats = pstats.Stats(*map(str, files), stream=io.StringIO())
        print(f"\n===== {name}: {len(files)} processes, {stats.total_tt:.1f} s CPU under the profiler "
              f"({stats.total_tt / len(files):.2f} s each)")
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats(order).print_stats(args.top)
            body = out.getvalue().split("filename:lineno(function)", 1)[-1]
            print(f"--- by {order}\n{body.strip()}")
    print(f"\nprofiles: {folder}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
