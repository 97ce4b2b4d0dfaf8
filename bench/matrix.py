"""Every case of the e2e matrices `make test` samples (a benchmark of coverage, not part of `make test`).

`make test` keeps representative cases of a few long matrices (issue 19: the suite stays quick): one log
format each way, one signal per drill kind (tests/e2e/test_interrupts.py), one slow inference phase, one shipped acceptance defect alone.
This runs those tests with every case (DRILLS_TEST_MATRIX=full, read by tests/e2e/matrix.py) and prints
pytest's summary.

    .venv/bin/python bench/matrix.py [-- PYTEST ARGS]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# every e2e module that samples a matrix (imports tests/e2e/matrix.py)
FILES = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "e2e").glob("test_*.py")
               if "tests.e2e.matrix import" in p.read_text())


def main(argv: list[str]) -> int:
    env = dict(os.environ, DRILLS_TEST_MATRIX="full")
    cmd = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q", "-p", "no:cacheprovider",
           *FILES, *argv]
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
