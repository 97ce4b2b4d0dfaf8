"""The test session's environment (the drills' plugins are wired by the repo's conftest.py)."""

import os

# One scenario at a time in every `drills run` a test starts, unless it asks for lanes (`--lanes N`): the suite
# already runs test files in parallel, and a 600× twin sharing the CPU with two more lanes falls behind its clock.
os.environ.setdefault("DRILLS_LANES", "1")
# No Prometheus in every drill a test runs (the built-in twin profile has a managed `monitoring:` section): most
# run at 300-600x, where it cannot keep the site's cadence, and ~150 stacks would slow the suite. Detection is
# judged where it is the subject: tests/e2e/test_detect_stack.py (its runs clear this).
os.environ.setdefault("DRILLS_MONITORING", "off")  # drills.profile.monitoring.OPT_OUT

import logging  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _root_logger_level_restored():
    """A command run in this process (`drills revert` quiets the root logger to CRITICAL) must not silence the
    log records a later test of the same worker asserts on."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)
