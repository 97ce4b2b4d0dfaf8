"""Requests/s the locust load sustains against the twin's inference gateway (a benchmark, not a test).

    .venv/bin/python bench/load.py [--seconds 10] [--users 16] [--workers 0 2] [--scale 600]

Starts a twin (all replicas Ready), then for each worker count runs `LoadRunner` for `--seconds`
and prints the steady requests/s (first second skipped), failures and p99 — one locust process,
then a master with N workers (`drills run --load-workers N`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drills.load import LoadRunner, window  # noqa: E402
from drills.twin.launcher import start_twin  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--scale", type=float, default=600.0, help="twin scale (high: short gateway latency)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drills-bench-load-") as tmp:
        twin = start_twin(Path(tmp) / "twin", scale=args.scale)
        try:
            gateway = twin.info["gateway"]
            deadline = time.monotonic() + 60
            while requests.get(gateway + "/health", timeout=5).status_code != 200:
                if time.monotonic() > deadline:
                    raise SystemExit("the twin's gateway never became healthy")
                time.sleep(0.1)
            for workers in args.workers:
                runner = LoadRunner(gateway, users=args.users, spawn_rate=args.users, workers=workers,
                                    out_dir=Path(tmp) / f"load-{workers}", model="llama-7b")
                with runner:
                    time.sleep(args.seconds)
                result = runner.stop()
                t0 = result.buckets[0].t + 1.0 if result.buckets else 0.0
                steady = window(result.buckets, t0, result.buckets[-1].t if result.buckets else None)
                print(f"workers={workers} users={args.users}: {steady.rps:.0f} req/s, {steady.failures} failed, "
                      f"p99 {steady.p99_ms:.1f} ms ({steady.requests} requests in {steady.end - steady.start:.1f} s)")
        finally:
            twin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
