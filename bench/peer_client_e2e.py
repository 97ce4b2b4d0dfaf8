"""Run the official Kubernetes Python client's own e2e tests (its repository's `kubernetes/e2e_test/`)
against a fresh twin, test logic unchanged, and print pass/fail counts.

    python bench/peer_client_e2e.py PATH [--profile minimal] [-- pytest args]

PATH is a checkout of github.com/kubernetes-client/python (its `kubernetes/e2e_test/` is used from
there, never copied into this repo) or the `kubernetes/e2e_test` folder itself. The only shim is the
config bootstrap: KUBECONFIG points at the twin's kubeconfig, which `base.get_e2e_configuration()`
loads as it would a real cluster's; the folder is made importable as `kubernetes.e2e_test`.

The suite's pods (busybox, nginx, python) tolerate no GPU taint: as on the kind cluster the client's CI
uses, or the CPU system pool of a real GPU cluster, the twin gets `--cpu-nodes` untainted CPU nodes
(a `system` pool added to the profile; 0: the profile as it is).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drills.twin.launcher import start_twin  # noqa: E402
from drills.twin.profile import _profile_path  # noqa: E402

_CONFTEST = """\
import kubernetes
kubernetes.__path__.append({parent!r})  # `kubernetes.e2e_test` is the peer's folder, unchanged
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--profile", default="minimal")
    parser.add_argument("--cpu-nodes", type=int, default=2)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    suite = args.path if (args.path / "base.py").exists() else args.path / "kubernetes" / "e2e_test"
    if not (suite / "base.py").exists():
        parser.error(f"{args.path}: no kubernetes/e2e_test/base.py there")
    with tempfile.TemporaryDirectory(prefix="peer-e2e-") as tmp:
        work = Path(tmp)
        (work / "peer_shim.py").write_text(_CONFTEST.format(parent=str(suite.resolve().parent)))
        # the suite reads its manifests at `kubernetes/e2e_test/test_yaml/...`, relative to the checkout's root
        # (the working directory); a folder without __init__.py never shadows the installed `kubernetes`
        (work / "kubernetes").mkdir()
        (work / "kubernetes" / "e2e_test").symlink_to(suite.resolve(), target_is_directory=True)
        handle = start_twin(work / "twin", profile=_with_cpu_pool(args.profile, args.cpu_nodes, work))
        try:
            env = dict(os.environ, KUBECONFIG=handle.kubeconfig, HOME=str(work), PYTHONPATH=str(work))
            cmd = [sys.executable, "-m", "pytest", "-p", "peer_shim", "-p", "no:cacheprovider", "-q", "-rfE",
                   "--rootdir", str(work),
                   "-c", os.devnull, "--confcutdir", str(work), "--import-mode=importlib",
                   "-o", "python_files=test_*.py", str(suite), *args.pytest_args]
            return subprocess.run(cmd, cwd=work, env=env).returncode
        finally:
            handle.stop()


def _with_cpu_pool(profile: str, nodes: int, work: Path) -> str:
    """`profile` plus a `system` pool of `nodes` untainted CPU nodes (a path to the written profile)."""
    if nodes == 0:
        return profile
    raw = yaml.safe_load(_profile_path(profile).read_text())
    raw.setdefault("name", f"{_profile_path(profile).stem}-with-cpu-pool")
    raw["node_pools"]["system"] = {"prefix": "cpu-system", "count": nodes, "role": "cpu", "gpus": 0,
                                   "gpu_memory_mib": 0, "cpu": 32, "memory_gib": 128, "rdma_devices": []}
    path = work / "profile.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
