"""Wall time of `drills run` on the twin, and where it goes (a benchmark, not a timed test).

    .venv/bin/python bench/suite.py [--scale 60[,600]] [-m EXPR] [--repeat 1] [--no-html] [--per-scenario] [--busy N] [--keep]

Runs the real CLI in a subprocess against fresh twins (one per drill scenario) with the report
built — by default the whole default suite, as `drills run` runs it — and prints the wall time of
each run, how many drills passed, the host's load, and the breakdown bench/suite_profile.py records
inside the run (pytest start, twin starts, Given/When/Then steps, teardown, each part of the report).
Parts are summed over scenarios: when scenarios run concurrently their sum exceeds the wall time.
`--busy N` keeps N busy-loop processes on the CPU throughout (issue 12: no false FAIL on a loaded machine);
the last line counts the runs with a drill that did not pass and names those drills, and gives the worst
recovery error vs the twins' truth per scale (issue 32: ≤ 0.5 % of the target at 60× and 600× with two busy
loops: `--scale 60,600 --busy 2 -m "training or kill_all or sonic"`, the drills that have a truth).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.suite_profile import BOOT, CATEGORIES, breakdown  # noqa: E402
from bench.truth import errors  # noqa: E402

ERROR_LIMIT = 0.005  # measured recovery vs the twin's truth, of the target (issue 32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default=None, help="twin scale, or several (60,600: each in turn; default: the "
                                                      "profile's, 60)")
    parser.add_argument("-m", dest="markexpr", default=None, help="drill selection (pytest -m; default: all)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-html", action="store_true", help="skip the Allure HTML build")
    parser.add_argument("--per-scenario", action="store_true", help="also print each scenario's breakdown")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--repo", default=str(REPO), help="run this checkout's CLI (e.g. main, for a before/after)")
    parser.add_argument("--lanes", default=None, help="scenarios at once (drills run --lanes)")
    parser.add_argument("--busy", type=int, default=0, help="busy-loop processes loading the CPU meanwhile")
    parser.add_argument("--keep", action="store_true", help="keep the reports and twin states (to see where an "
                                                             "error vs truth came from)")
    parser.add_argument("extra", nargs="*", help="more `drills run` arguments (after --)")
    args = parser.parse_args()
    runs = []
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        _bench(args, runs)
    finally:
        for proc in busy:
            proc.kill()
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    failing = [r for r in runs if r["passed"] != r["records"] or r["exit"] != 0]
    worst = {scale: max((t["error_of_target"] for r in runs if r["scale"] == scale for t in r["truth"]), default=0)
             for scale in dict.fromkeys(r["scale"] for r in runs)}
    print(f"{len(runs)} run(s) with {args.busy} busy loop(s): {len(runs) - len(failing)} with every drill passing; "
          f"worst error vs truth {', '.join(f'{v:.2%} at {k or 60}×' for k, v in worst.items())} of the target "
          f"(limit {ERROR_LIMIT:.1%})")
    for r in failing:
        print(f"  not passing: {', '.join(r['not_passing']) or '(no records)'} (exit {r['exit']})")
    return 0


def _bench(args, runs: list) -> None:
    for scale in (args.scale or "").split(",") if args.scale else [None]:
        _bench_scale(args, scale, runs)


def _bench_scale(args, scale: str | None, runs: list) -> None:
    with tempfile.TemporaryDirectory(prefix="drills-bench-") as tmp:
        reports = tempfile.mkdtemp(prefix="drills-bench-kept-") if args.keep else tmp
        if args.keep:
            print(f"  reports (and each twin's state: audit, truth) kept in {reports}")
        for n in range(args.repeat):
            argv = [sys.executable, "-c", BOOT, "run", "--reports", reports, "--run-id", f"bench-{n}"]
            argv += ["-m", args.markexpr] if args.markexpr else []
            argv += ["--scale", scale] if scale else []
            argv += ["--no-html"] if args.no_html else []
            argv += ["--lanes", args.lanes] if args.lanes else []
            argv += args.extra
            timings = Path(reports) / f"timings-{n}.jsonl"
            env = dict(os.environ, PYTEST_PLUGINS="bench.suite_profile", DRILLS_BENCH_TIMINGS=str(timings),
                       PYTHONPATH=os.pathsep.join(filter(None, [args.repo, str(REPO), os.environ.get("PYTHONPATH")])))
            load_before = os.getloadavg()[0]
            cpu_before = _children_cpu()
            start = time.time()
            done = subprocess.run(argv, cwd=args.repo, capture_output=True, text=True, env=env)
            end = time.time()
            cpu = _children_cpu() - cpu_before
            load_after = os.getloadavg()[0]
            path = Path(reports) / f"bench-{n}" / "records.jsonl"
            recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
            passed = sum(r["verdict"] == "pass" for r in recs)
            recovery = ", ".join(f"{r['recovery_s']:.0f}s" for r in recs if r.get("recovery_s") is not None)
            print(f"drills run {' '.join(argv[argv.index('run') + 1:])}\n  {end - start:.1f} s wall, exit "
                  f"{done.returncode}, {passed}/{len(recs)} drills passed, cluster recovery {recovery}; "
                  f"CPU {cpu:.1f} s (every process of the run); load average {load_before:.1f} → {load_after:.1f} on "
                  f"{os.cpu_count()} CPUs")
            if done.returncode not in (0, 1):
                print(done.stderr[-2000:], file=sys.stderr)
            figures = breakdown(str(timings), start, end) if timings.exists() else None
            if figures:
                _print(figures, args.per_scenario)
            truth = [{"scenario": rec["scenario"], "measured_s": rec["recovery_s"], "truth_s": round(t, 3),
                      "error_of_target": round(e, 5)} for rec, t, e in errors(recs)]
            worst = max((t["error_of_target"] for t in truth), default=None)
            print(f"  measured vs the twins' truth: {len(truth)} recoveries compared, worst error "
                  f"{'—' if worst is None else f'{worst:.2%}'} of the target (limit {ERROR_LIMIT:.1%})")
            for t in truth if args.per_scenario else ():
                print(f"    · {t['scenario'][:60]}: measured {t['measured_s']:.1f} s, truth {t['truth_s']:.1f} s, "
                      f"error {t['error_of_target']:.2%}")
            not_passing = [f"{r['scenario'][:50]}: {r['verdict']} — {r.get('reason', '')[:200]}" for r in recs
                           if r["verdict"] != "pass"]
            for line in not_passing:
                print(f"  ✗ {line}")
            runs.append({"scale": scale, "wall_s": end - start, "exit": done.returncode, "passed": passed, "records": len(recs),
                         "cpu_s": cpu, "load": [load_before, load_after], "breakdown": figures, "truth": truth,
                         "not_passing": not_passing})


def _children_cpu() -> float:
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _print(figures: dict, per_scenario: bool) -> None:
    parts = figures["parts"]
    print(f"  where the time goes (seconds; scenarios summed, drills busy {figures['drills_span']:.1f} s of wall):")
    for name in CATEGORIES:
        if parts.get(name):
            print(f"    {name:<32} {parts[name]:7.1f}")
    if per_scenario:
        for nodeid, mine in figures["items"].items():
            cells = ", ".join(f"{k} {v:.1f}" for k, v in sorted(mine.items(), key=lambda kv: -kv[1]) if v >= 0.05)
            print(f"    · {nodeid.rsplit('::', 1)[-1][:60]}: {cells}")


if __name__ == "__main__":
    sys.exit(main())
