"""Run the official Kubernetes Python client's own e2e tests (its repository's `kubernetes/e2e_test/`)
against a fresh twin, test logic unchanged, and print pass/fail counts.

    python bench/peer_client_e2e.py PATH [--profile minimal] [-- pytest args]

PATH is a checkout of github.com/kubernetes-client/python (its `kubernetes/e2e_test/` is used from
there, never copied into this repo) or the `kubernetes/e2e_test` folder itself. The only shim is the
config bootstrap: KUBECONFIG points at the twin's kubeconfig, which `base.get_e2e_configuration()`
loads as it would a real cluster's; the folder is made importable as `kubernetes.e2e_test`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drills.twin.launcher import start_twin  # noqa: E402

_CONFTEST = """\
import kubernetes
kubernetes.__path__.append({parent!r})  # `kubernetes.e2e_test` is the peer's folder, unchanged
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--profile", default="minimal")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    suite = args.path if (args.path / "base.py").exists() else args.path / "kubernetes" / "e2e_test"
    if not (suite / "base.py").exists():
        parser.error(f"{args.path}: no kubernetes/e2e_test/base.py there")
    with tempfile.TemporaryDirectory(prefix="peer-e2e-") as tmp:
        work = Path(tmp)
        (work / "peer_shim.py").write_text(_CONFTEST.format(parent=str(suite.resolve().parent)))
        handle = start_twin(work / "twin", profile=args.profile)
        try:
            env = dict(os.environ, KUBECONFIG=handle.kubeconfig, HOME=str(work), PYTHONPATH=str(work))
            cmd = [sys.executable, "-m", "pytest", "-p", "peer_shim", "-p", "no:cacheprovider", "-q", "-rfE",
                   "--rootdir", str(work),
                   "-c", os.devnull, "--confcutdir", str(work), "--import-mode=importlib",
                   "-o", "python_files=test_*.py", str(suite), *args.pytest_args]
            return subprocess.run(cmd, cwd=work, env=env).returncode
        finally:
            handle.stop()


if __name__ == "__main__":
    sys.exit(main())
