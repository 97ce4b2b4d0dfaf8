"""Representative cases in `make test`, every case in `bench/matrix.py` (issue 19: the suite stays fast; the
long matrices still run, on demand). A matrix test names both: `cases(representative, every)`."""

from __future__ import annotations

import os

FULL = os.environ.get("DRILLS_TEST_MATRIX") == "full"


def cases(representative, every) -> list:
    return list(every) if FULL else list(representative)
