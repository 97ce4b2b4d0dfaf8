"""The construction table of issue 31 (a benchmark script, not a test: prints a table).

One twin (the e2e module's: tests/e2e/test_accept_evidence.py), one `drills accept` run per construction,
each class's broken expansion next to a sound node; prints node → verdict and the failing checks with their
failure kinds. Run it on the tree before the change (with this tree's twin, which can build the
constructions) and after, to fill both columns:

    .venv/bin/python bench/accept_constructions.py [--scale 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drills.acceptance.run import AcceptOptions, run_acceptance  # noqa: E402
from drills.twin.launcher import start_twin  # noqa: E402

__all__ = ["main", "CONSTRUCTIONS"]

REPO = Path(__file__).resolve().parents[1]
ALL = ["gpu", "dcgm", "burn", "nccl-node", "rdma", "nccl-pair", "switch-port", "storage"]

# class, construction, nodes, acceptance overrides (only keys the profile had before the change)
CONSTRUCTIONS = [
    ("expectation", "gpu-new-02: nvidia-smi AND nvidia.com/gpu show 7 on an 8-GPU DGX H100", "gpu-new-01,gpu-new-02", {}),
    ("identity", "gpu-new-03 fronts gpu-new-04's machine (same host name, GPU UUIDs, NIC GUIDs)",
     "gpu-new-03,gpu-new-04", {}),
    ("plausibility", "gpu-new-05: ib_write_bw loops through its own HCA, 1.2 × line rate", "gpu-new-05", {}),
    ("identity (store)", "gpu-new-06: the store is not mounted, fio measures the local NVMe", "gpu-new-06", {}),
    ("required check", "dcgm left out of acceptance.checks", "gpu-new-01", {"checks": [c for c in ALL if c != "dcgm"]}),
    ("path", "reference gpu-iso-02: new, failing, still tainted, same isolated leaf", "gpu-iso-01",
     {"reference_node": "gpu-iso-02"}),
]


from tests.e2e.test_accept_evidence import DEFECTS, ISOLATED, twin_profile  # noqa: E402,F401 (the e2e module's twin)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=300.0)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="accept-constructions-") as tmp:
        root = Path(tmp)
        (root / "twin.yaml").write_text(yaml.safe_dump(twin_profile()))
        twin = start_twin(root / "twin", profile=str(root / "twin.yaml"), scale=args.scale)
        try:
            _taint_failed_reference(twin)
            print("| class | construction | node | verdict | failing checks |\n|---|---|---|---|---|")
            for i, (klass, what, nodes, acceptance) in enumerate(CONSTRUCTIONS):
                target = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
                target["acceptance"].update(acceptance)
                (root / f"target-{i}.yaml").write_text(yaml.safe_dump(target))
                result = run_acceptance(AcceptOptions(nodes=nodes, gate=True, twin_state=str(twin.state_dir),
                                                      profile=str(root / f"target-{i}.yaml"), html=False,
                                                      reports_root=root / "reports", run_id=f"c{i}"))
                for node, failed in result.node_verdicts().items():
                    checks = ", ".join(f"{r.check} ({r.failure})" for r in failed) or "—"
                    print(f"| {klass} | {what} | {node} | {'NO-GO' if failed else 'GO'} | {checks} |", flush=True)
        finally:
            twin.stop()
    return 0


def _taint_failed_reference(twin) -> None:
    """gpu-iso-02 failed an earlier acceptance: the gate taint and the no-go annotation stay on it."""
    import requests

    patch = {"metadata": {"annotations": {"gpu-drills.io/acceptance": "no-go"}},
             "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                 {"key": "gpu-drills.io/unaccepted", "value": "true", "effect": "NoSchedule"}]}}
    requests.patch(f"{twin.url}/api/v1/nodes/gpu-iso-02", json=patch, timeout=5,
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
