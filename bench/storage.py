"""The storage drill's pieces on this machine (a benchmark, not a test).

    .venv/bin/python bench/storage.py [--seconds 5] [--dir /tmp] [--skip-drill]

1. fio bandwidth of the drill's saturation job (twin profile `storage.saturation`), with the profile's
   throttle (`storage.fio_options`, rate 10m per job) and unthrottled (the store's real maximum here);
2. the checkpoint probe (profile probe size and shards): save and load MB/s idle, then under the
   unthrottled fio job, and their ratio;
3. wall time of one `drills run -m storage --scale 600 --no-html` in a scratch reports folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drills.measure.storage_io import probe_series  # noqa: E402
from drills.profile.model import load_target  # noqa: E402
from drills.faults.storage.saturation import fio_jobs  # noqa: E402
from drills.faults.storage.fio import run_fio, start_fio  # noqa: E402
from drills.faults.storage.saturation import saturation_spec  # noqa: E402

MB = 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="fio runtime per bandwidth figure")
    parser.add_argument("--dir", default=None, help="store directory (default: a temporary one under /tmp)")
    parser.add_argument("--skip-drill", action="store_true", help="skip the timed `drills run`")
    args = parser.parse_args()
    profile = load_target(None)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="drills-bench-storage-", dir=args.dir) as tmp:
        store = Path(tmp) / "store"
        store.mkdir()
        spec = dataclasses.replace(saturation_spec(profile, str(store)), max_seconds=args.seconds)
        throttle = ", ".join(f"{k}={v}" for k, v in spec.extra) or "none"
        for name, label, extra in (("throttled", f"fio saturation, throttled ({throttle}/job)", spec.extra),
                                   ("unthrottled", "fio saturation, unthrottled", ())):
            (store / name).mkdir()
            result = run_fio(fio_jobs(dataclasses.replace(spec, extra=extra), store / name), timeout=args.seconds + 60)
            rows.append((label, f"{result.total_bw_bytes_s / MB:.0f} MB/s "
                                f"(write {result.write.bw_bytes_s / MB:.0f}, read {result.read.bw_bytes_s / MB:.0f})"))
        size, shards = profile.storage.probe_size_mb, profile.storage.probe_shards
        idle = probe_series(store / "probe-idle", size, shards)
        loud = dataclasses.replace(spec, extra=(), max_seconds=120.0)
        (store / "fio-busy").mkdir()
        proc = start_fio(fio_jobs(loud, store / "fio-busy"), output=Path(tmp) / "fio-busy.json")
        try:
            time.sleep(1.0)  # fio lays out its files first
            busy = probe_series(store / "probe-busy", size, shards)
        finally:
            proc.stop()
        for what, base, sat in (("save", idle.write_mb_s, busy.write_mb_s), ("load", idle.read_mb_s, busy.read_mb_s)):
            rows.append((f"probe {what} ({size} MB in {shards} shards), idle → saturated",
                         f"{base:.0f} → {sat:.0f} MB/s ({base / sat if sat else float('inf'):.2f}× slower)"))
        rows.append(("probe save time, idle → saturated", f"{idle.write_s * 1000:.1f} → {busy.write_s * 1000:.1f} ms"))
        if not args.skip_drill:
            started = time.monotonic()
            proc_run = subprocess.run([str(REPO / ".venv" / "bin" / "drills"), "run", "-m", "storage", "--scale", "600",
                                       "--no-html", "--reports", str(Path(tmp) / "reports")],
                                      cwd=REPO, capture_output=True, text=True, check=False)
            rows.append(("drills run -m storage --scale 600 --no-html",
                         f"{time.monotonic() - started:.1f} s wall (exit {proc_run.returncode})"))
    width = max(len(name) for name, _ in rows)
    print(f"{'what'.ljust(width)}  figure")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
