"""Benchmark of `drills accept` on 16 new nodes of the twin (a benchmark, not a test: prints figures).

The `expansion` profile with its new pool grown to 16 nodes (on leaf-3), every check, `--gate`; wall time
from the start of the twin, of the acceptance run itself (plan → gate → 7 Job phases + switch ports →
settle → Jobs deleted → report), and per phase. Checks' twin durations: new_nodes.durations; the twin's
scale: `--scale` (default 60, the built-in profile's).

    .venv/bin/python bench/accept_16_nodes.py [--nodes 16] [--scale 60] [--defect slow-rail] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drills.acceptance.run import AcceptOptions, run_acceptance  # noqa: E402
from drills.twin.launcher import start_twin  # noqa: E402
from drills.twin.profile import PROFILES_DIR  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--scale", type=float, default=60.0)
    p.add_argument("--defect", action="append", default=[])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="accept-bench-") as tmp:
        raw = yaml.safe_load((PROFILES_DIR / "expansion.yaml").read_text())
        raw["node_pools"]["new"]["count"] = args.nodes
        profile = Path(tmp) / f"expansion-{args.nodes}.yaml"
        profile.write_text(yaml.safe_dump(raw))
        t0 = time.perf_counter()
        twin = start_twin(Path(tmp) / "twin", profile=str(profile), defects=args.defect, scale=args.scale)
        t_twin = time.perf_counter() - t0
        phases: list[tuple[str, float]] = []
        try:
            names = ",".join(f"gpu-new-{i + 1:02d}" for i in range(args.nodes))
            t1 = time.perf_counter()
            result = run_acceptance(AcceptOptions(
                nodes=names, gate=True, twin_state=str(twin.state_dir), reports_root=Path(tmp) / "reports",
                run_id="bench", progress=lambda line: phases.append((line, time.perf_counter()))))
            t_run = time.perf_counter() - t1
        finally:
            twin.stop()
    verdicts = result.node_verdicts()
    steps = [(line, (phases[i + 1][1] if i + 1 < len(phases) else t1 + t_run) - at) for i, (line, at) in enumerate(phases)]
    figures = {"nodes": args.nodes, "scale": args.scale, "twin_start_s": round(t_twin, 1),
               "accept_wall_s": round(t_run, 1), "go": sum(1 for f in verdicts.values() if not f),
               "no_go": sum(1 for f in verdicts.values() if f), "jobs": sum(1 for r in result.results if r.check != "switch-port")
               + len(result.pairs), "phases": {line: round(s, 1) for line, s in steps}, "exit_code": result.exit_code}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"drills accept, {args.nodes} new nodes, twin scale {args.scale:g}: {figures['accept_wall_s']} s wall "
              f"(twin start {figures['twin_start_s']} s); {figures['go']} go, {figures['no_go']} no-go, "
              f"{figures['jobs']} Jobs")
        for line, s in figures["phases"].items():
            print(f"  {line:<45} {s:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
