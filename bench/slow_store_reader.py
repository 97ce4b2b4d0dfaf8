"""The slow checkpoint-store reader's constructions (a benchmark script, not a test: prints a table).

The reader pod's image is not on the node and pulls for `--pull` twin minutes, so the drill lists the store after
the resumed job has saved again. Each construction is one `drills run -m training -k cordon` on a fresh twin (an
HF Trainer job: per-checkpoint completion evidence): a healthy job read with GNU find (modification times), the
same read with busybox (no -printf: no times), and a store that loses the last save (defect lost-last-save). The
e2e test tests/e2e/test_training_integrity.py::test_a_slow_store_reader_judges_the_store_as_it_was_at_the_fault
runs the last one; this script fills the table for the rest:

    .venv/bin/python bench/slow_store_reader.py [--scale 600] [--pull 12m]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drills.twin.launcher import start_twin  # noqa: E402

__all__ = ["main", "CONSTRUCTIONS"]

REPO = Path(__file__).resolve().parents[1]
JOB = "llm-finetune-8b"
# name, defects, the reader's image (flavour: debian = GNU findutils, busybox = no -printf)
CONSTRUCTIONS = [
    ("healthy, slow GNU reader", (), "registry.local/tools/debian:12.5"),
    ("healthy, slow busybox reader", (), "busybox:1.36.1"),
    ("lost-last-save, slow GNU reader", ("lost-last-save",), "registry.local/tools/debian:12.5"),
    ("lost-last-save, slow busybox reader", ("lost-last-save",), "busybox:1.36.1"),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=600.0)
    p.add_argument("--pull", default="12m", help="the twin's cold image pull (the reader's start)")
    args = p.parse_args(argv)
    print("| construction | exit | verdict | category | resumed checkpoint |\n|---|---|---|---|---|")
    for name, defects, image in CONSTRUCTIONS:
        with tempfile.TemporaryDirectory(prefix="slow-reader-") as tmp:
            root = Path(tmp)
            profile = yaml.safe_load((REPO / "drills/twin/profiles/minimal.yaml").read_text())
            profile["workloads"]["training"][JOB]["log_format"] = "hf-trainer"
            profile["timings"]["image_pull_cold"] = args.pull
            (root / "twin.yaml").write_text(yaml.safe_dump(profile))
            site = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
            site["workloads"]["training"]["checkpoint_store"] = {"read": "pod", "image": image, "timeout_s": "30m"}
            site["nominal"]["drills"]["gpu-node-loss"] = {"no_worker_restart_s": "30m"}
            (root / "site.yaml").write_text(yaml.safe_dump(site))
            twin = start_twin(root / "twin", profile=str(root / "twin.yaml"), defects=defects, scale=args.scale)
            try:
                done = subprocess.run([sys.executable, "-m", "drills.cli", "run", "-m", "training", "-k", "cordon",
                                       "--no-html", "--reports", str(root / "reports"), "--run-id", "r",
                                       "--twin-state", str(twin.state_dir), "--profile", str(root / "site.yaml")],
                                      cwd=REPO, capture_output=True, text=True, timeout=600)
            finally:
                twin.stop()
            recs = [json.loads(line) for line in (root / "reports" / "r" / "records.jsonl").read_text().splitlines()]
            rec = recs[0]
            check = next((c for c in rec["details"].get("checks", []) if c["name"] == "resumed checkpoint"), {})
            print(f"| {name} | {done.returncode} | {rec['verdict']} | {rec['category']} | "
                  f"{check.get('verdict')}: {check.get('reason', '')[:400]} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
