"""Interrupt trials of `drills run` and `drills accept` under CPU load (issues 11, 32; a benchmark of the safety
contract, not a test).

    .venv/bin/python bench/signal_trials.py [-n 20] [--busy 2] [--kinds training network inference storage accept]
                                            [--signals SIGINT SIGTERM] [--own-twin] [--seed S] [--keep]

For each drill kind and signal, N trials of its shortest scenario (`drills run -m KIND -k …` as a process of its
own; `accept`: `drills accept --gate` of the expansion twin's two new nodes, the same contract), interrupted at a random moment read from the run's progress: right after start, once the fault is
injected, while the drill's teardown reverts, and after the fault with a second SIGINT during the teardown
(moments in turn, each with a random delay). `--busy N` keeps N busy-loop processes on the CPU meanwhile. Each
trial drills a twin of its own (`drills twin up --state-dir`, `--twin-state`) so what the run left on it can be
read back; `--own-twin` lets `drills run` start and stop its own twins (journal and records checks only).
Prints one row per kind and signal (the share of trials where each check held) and every failing trial.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.e2e.interrupt_trial import KINDS, MOMENTS, Trial, run_trial, start_twin_for_trials  # noqa: E402

CHECKS = ("exit 130", "journal closed", "lock released", "record", "console truthful", "twin clean")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--trials", type=int, default=20, help="trials per drill kind and signal")
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes loading the CPU")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--signals", nargs="+", default=["SIGINT", "SIGTERM"], choices=["SIGINT", "SIGTERM"])
    parser.add_argument("--moments", nargs="+", default=list(MOMENTS), choices=list(MOMENTS))
    parser.add_argument("--own-twin", action="store_true", help="let drills run start its own twins")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the reports folder (printed)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="drills-signal-trials-"))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    trials: list[Trial] = []
    began = time.monotonic()
    print(f"seed {seed}; {args.busy} busy loop(s); reports under {root}", flush=True)
    try:
        for kind in args.kinds:
            for name in args.signals:
                for i in range(args.trials):
                    moment = args.moments[i % len(args.moments)]
                    trial = _one(kind, getattr(signal, name), moment, root, f"{kind}-{name}-{i}", rng, args.own_twin)
                    trials.append(trial)
                    mark = "·" if trial.missed else ("✓" if trial.ok else "✗")
                    print(f"  {mark} {trial.describe()} ({trial.wall_s:.1f}s)", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    _table(trials, args.own_twin)
    print(f"{len(trials)} trials in {time.monotonic() - began:.0f} s (seed {seed})")
    return 0 if all(t.ok or t.missed for t in trials) else 1


def _one(kind: str, signum: int, moment: str, root: Path, run_id: str, rng: random.Random, own_twin: bool) -> Trial:
    if own_twin:
        return run_trial(kind, signum, moment, root / "reports", run_id, rng=rng)
    twin = start_twin_for_trials(root / "twins" / run_id, kind)
    try:
        return run_trial(kind, signum, moment, root / "reports", run_id, twin=twin, rng=rng)
    finally:
        twin.stop()


def _table(trials: list[Trial], own_twin: bool) -> None:
    checks = [c for c in CHECKS if not (own_twin and c == "twin clean")]
    head = f"{'drill':<10} {'signal':<8} {'trials':>6} {'missed':>6} " + " ".join(f"{c:>16}" for c in checks)
    print("\n" + head + "\n" + "-" * len(head))
    groups: dict[tuple[str, int], list[Trial]] = {}
    for t in trials:
        groups.setdefault((t.kind, t.signum), []).append(t)
    for (kind, signum), group in [*groups.items(), (("all", 0), trials)]:
        counted = [t for t in group if not t.missed]
        cells = []
        for check in checks:
            good = sum(1 for t in counted if t.checks[check])
            cells.append(f"{good}/{len(counted)} {100 * good / len(counted):3.0f}%" if counted else "—")
        name = signal.Signals(signum).name if signum else ""
        print(f"{kind:<10} {name:<8} {len(group):>6} {len(group) - len(counted):>6} "
              + " ".join(f"{c:>16}" for c in cells))
    failing = [t for t in trials if not t.ok and not t.missed]
    if failing:
        print(f"\n{len(failing)} failing trial(s):")
        for t in failing:
            print("  " + t.describe())


if __name__ == "__main__":
    sys.exit(main())
