"""Where a big twin spends its CPU while its fleet starts (issue 32; a benchmark, not a test: prints figures).

Runs the twin in this process (the same `Twin` `drills twin up` runs) with the fleet profile of
`bench/twin_scale.py --nodes N`, under cProfile timed by this process's CPU clock (so a machine shared with other
work gives the same profile), until no pod is Pending and every training job steps, or `--budget-s` wall seconds.
Prints wall and CPU seconds to settle, the twin's cluster seconds by then, and the functions that took the most
CPU (own time and cumulative): what grows faster than the fleet is found by comparing 512, 1024 and 2048 nodes.

    .venv/bin/python bench/twin_profile.py --nodes 1024 [--budget-s 600] [--top 40] [--no-profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import logging
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.twin_scale import _fleet_profile  # noqa: E402
from drills.twin.api.resources import by_path  # noqa: E402
from drills.twin.runtime import Twin  # noqa: E402
from drills.twin.workloads import TRUTH_APP_KEY  # noqa: E402

__all__ = ["main"]

log = logging.getLogger(__name__)

_PODS = by_path("", "v1", "pods")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="twin-profile-") as tmp:
        profile = _fleet_profile(Path(tmp), args.nodes)
        prof = None if args.no_profile else cProfile.Profile(time.process_time)
        figures = asyncio.run(_run(Path(tmp) / "state", profile, args, prof))
    print(f"{args.nodes} nodes: {figures['pods']} pods, settled={figures['settled']} after {figures['wall_s']:.1f} s "
          f"wall, {figures['cpu_s']:.1f} s CPU, {figures['cluster_s']:.0f} cluster s "
          f"({figures['cluster_s'] / max(figures['wall_s'], 1e-9):.1f}x); pending by wall second: {figures['trace']}")
    if prof is not None:
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.top)
            print(out.getvalue())
        if args.dump:
            prof.dump_stats(args.dump)
    return 0


async def _run(state: Path, profile: str, args: argparse.Namespace, prof: cProfile.Profile | None) -> dict:
    t0, c0 = time.monotonic(), time.process_time()
    if prof is not None:
        prof.enable()
    twin = Twin(state, profile=profile, scale=args.scale)
    await twin.start()
    c_start = time.process_time() - c0
    trace: list[tuple[int, int]] = []
    settled = False
    try:
        while time.monotonic() - t0 < args.budget_s:
            await asyncio.sleep(2.0)
            pending = sum(1 for e in twin.store.list_entries(_PODS)
                          if (e.obj.get("status") or {}).get("phase") == "Pending")
            trace.append((round(time.monotonic() - t0), pending))
            if not pending and _stepping(twin):
                settled = True
                break
        cluster_s = twin.clock.timestamp() - twin.info["twinStarted"]
        pods = twin.store.count(_PODS)
    finally:
        await twin.stop()
        if prof is not None:
            prof.disable()
    return {"settled": settled, "wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - c0,
            "cpu_start_s": c_start, "cluster_s": cluster_s, "pods": pods, "trace": trace[::max(1, len(trace) // 12)]}


def _stepping(twin: Twin) -> bool:
    jobs = twin.server.app[TRUTH_APP_KEY].snapshot()["training"].values()
    return bool(jobs) and all("job_started" in j.get("last", {}) for j in jobs)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=512)
    p.add_argument("--scale", type=float, default=None)
    p.add_argument("--budget-s", type=float, default=600.0)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--dump", default="", help="write the raw profile here (pstats)")
    p.add_argument("--no-profile", action="store_true", help="figures only (cProfile slows the twin ~2x)")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
