"""The construction table of issue 31 (a benchmark script, not a test: prints a table).

One twin (the e2e module's: tests/e2e/test_accept_evidence.py), one `drills accept` run per construction,
each class's broken expansion next to a sound node; prints node → verdict and the failing checks with their
failure kinds. Run it on the tree before the change (with this tree's twin, which can build the
constructions) and after, to fill both columns:

    .venv/bin/python bench/accept_constructions.py [--scale 300] [--only '(i)']
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

from drills.profile.acceptance import DEFAULT_JOBS  # noqa: E402
from tests.e2e.test_accept_evidence import (COPIED_PORT, DEFECTS, HALF_NICS, ISOLATED, LATE_CHECKS,  # noqa: E402,F401
                                            MISCABLED, MOVED_REF, OTHER_DCGM, PRESSED, PRESSED_REF, RAIL_CHECKS, REF,
                                            REF3, ROUND2, ROUND2_CHECKS, SWAPPED, UNCABLED, UNREAD, twin_profile)

# issue 31's red-team round (the same module twin; its test module: test_accept_evidence.py's later tests)
_LATE = {"checks": LATE_CHECKS, "required": {"gpu": {}, "dcgm": {"min_level": 2}, "nccl-pair": {}},
         "jobs": {"nccl-pair": {**DEFAULT_JOBS["nccl-pair"].model_dump(), "timeout_s": 300}}}  # a ring Job may not fit
CONSTRUCTIONS += [
    ("GO outlives evidence (g)", "gpu-new-07 reboots with 7 GPUs, gpu-new-08 is relabelled, a pod tolerating every "
     "taint lands on gpu-new-14 — after their checks, before the gate", "gpu-new-07,gpu-new-08,gpu-new-14", _LATE),
    ("unknown is not healthy (f)", "gpu-new-09: nvidia-smi warns infoROM corrupted, exits 14; gpu-new-10: NCCL WARN "
     "port error in a pair run that finished; gpu-new-11: DCGM ends GPU Memory Warn", "gpu-new-09,gpu-new-10,gpu-new-11",
     _LATE),
    ("required check (c)", "no check asked for, none required (nothing observed)", "gpu-new-06",
     {"checks": [], "required": {}}),
    ("path (d)", f"reference {REF} fit at plan time, cordoned during the batch's DCGM", MOVED_REF,
     {"checks": ["dcgm", "nccl-pair"], "required": {"dcgm": {"min_level": 2}, "nccl-pair": {}}, "reference_node": REF}),
    ("identity (a): switch port", f"{COPIED_PORT}'s own port lost PFC; its annotation names gpu-new-01's", COPIED_PORT,
     {"checks": ["switch-port"], "required": {"switch-port": {}}}),
    ("identity (a): cabling", f"{MISCABLED}'s cable is in another leaf-4 port than its annotation names (defect "
     "miscabled-node; the annotated port is healthy and faces nothing)", MISCABLED,
     {"checks": ["switch-port"], "required": {"switch-port": {}}}),
    ("expectation (b)", f"{HALF_NICS}: a DGX H100 showing 4 of its 8 NICs, labelled p5.48xlarge (NICs known only "
     "as a 3,200 Gb/s total)", HALF_NICS, {"checks": ["rdma"], "required": {"rdma": {}}}),
    ("identity (a): machine", "gpu-new-03 fronts gpu-new-04's machine, accepted alone", "gpu-new-03",
     {"checks": ["gpu"], "required": {"gpu": {}}}),
    ("report vs record (h)", "the batch's store aggregate below the site's 30,000 MB/s: 2 × 12,000 from the store, "
     "gpu-new-06's 25,000 from its own NVMe", "gpu-new-01,gpu-new-05,gpu-new-06",
     {"checks": ["storage"], "required": {"storage": {}}, "thresholds": "aggregate 30000"}),
]

# the second red-team round (bench/issue31-matrix.md): the same module twin, its tests test_second_round_*
CONSTRUCTIONS += [
    ("GO outlives evidence (g), node unhealthy (i), unknown (f)", "gpu-new-16 tainted nvidia.com/gpu.unhealthy, "
     "gpu-new-17's Ready flaps False → True, gpu-new-18 comes under DiskPressure — after their last check, before "
     f"the gate; {PRESSED} under DiskPressure since before the run; {UNREAD}'s rdma output carries libmlx5's "
     "completion-error dump, exit 0", ",".join(["gpu-new-01", *ROUND2, PRESSED, UNREAD]),
     {"checks": ROUND2_CHECKS, "required": {"gpu": {}, "dcgm": {"min_level": 2}, "rdma": {}}}),
    ("path (d) × node unhealthy (i)", f"reference {REF3} fit at plan time, under MemoryPressure after the batch's DCGM",
     PRESSED_REF, {"checks": ["dcgm", "nccl-pair"], "required": {"dcgm": {"min_level": 2}, "nccl-pair": {}},
                   "reference_node": REF3}),
]

# the third round (rails, bench/issue31-matrix.md): leaf-4 carries rails 0-3, leaf-5 rails 4-7
CONSTRUCTIONS += [
    ("identity (a) × DCGM, expectation (b) × switch port", f"{OTHER_DCGM}'s DCGM pod reports gpu-new-01's GPUs "
     f"(dcgm-other-host); {SWAPPED}'s NIC 3 and 4 cables swapped between the rail leaves (rail-swapped); {UNCABLED}'s "
     "mlx5_5 cabled nowhere (nic-uncabled)", ",".join(["gpu-new-01", OTHER_DCGM, SWAPPED, UNCABLED]),
     {"checks": RAIL_CHECKS, "required": {"gpu": {}, "dcgm": {"min_level": 2}, "rdma": {}, "switch-port": {}}}),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=300.0)
    p.add_argument("--only", default="", help="run only the rows whose class contains this text (e.g. '(i)')")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="accept-constructions-") as tmp:
        root = Path(tmp)
        (root / "twin.yaml").write_text(yaml.safe_dump(twin_profile()))
        twin = start_twin(root / "twin", profile=str(root / "twin.yaml"), scale=args.scale)
        try:
            _taint_failed_reference(twin)
            print("| class | construction | node | verdict | failing checks |\n|---|---|---|---|---|")
            for i, (klass, what, nodes, acceptance) in enumerate(CONSTRUCTIONS):
                if args.only not in klass:
                    continue
                target = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
                if nodes == COPIED_PORT:
                    _copy_port(twin)  # just before its row: from then on gpu-new-01's port is named twice
                if PRESSED in nodes.split(","):  # its kubelet reports DiskPressure before the run plans it
                    _pressure(twin, PRESSED)
                if nodes == HALF_NICS:
                    _label(twin, HALF_NICS, "node.kubernetes.io/instance-type", "p5.48xlarge")
                if acceptance.get("thresholds") == "aggregate 30000":  # the twin profile's thresholds, one added
                    acceptance = {**acceptance, "thresholds": {**target["acceptance"]["thresholds"],
                                                               "store_aggregate_read_mb_s_min": 30000}}
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


def _label(twin, node: str, key: str, value: str) -> None:
    import requests

    requests.patch(f"{twin.url}/api/v1/nodes/{node}", json={"metadata": {"labels": {key: value}}}, timeout=5,
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()


def _pressure(twin, node: str) -> None:
    from tests.e2e.test_accept_evidence import _status

    _status(twin, node, "DiskPressure", "True")


def _copy_port(twin) -> None:
    """gpu-new-12's port annotation names gpu-new-01's leaf port (an operator's copy-paste)."""
    import requests

    port = "network.gpu-drills.io/leaf-port"
    theirs = requests.get(f"{twin.url}/api/v1/nodes/gpu-new-01", timeout=5).json()["metadata"]["annotations"][port]
    requests.patch(f"{twin.url}/api/v1/nodes/{COPIED_PORT}", json={"metadata": {"annotations": {port: theirs}}},
                   timeout=5, headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()


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
