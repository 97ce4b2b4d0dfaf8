"""The test session's environment (the drills' plugins are wired by the repo's conftest.py)."""

import os

# One scenario at a time in every `drills run` a test starts, unless it asks for lanes (`--lanes N`): the suite
# already runs test files in parallel, and a 600× twin sharing the CPU with two more lanes falls behind its clock.
os.environ.setdefault("DRILLS_LANES", "1")
# No Prometheus in every drill a test runs (the built-in twin profile has a managed `monitoring:` section): most
# run at 300-600x, where it cannot keep the site's cadence, and ~150 stacks would slow the suite. Detection is
# judged where it is the subject: tests/e2e/test_detect_drills.py and test_detect_resolution.py (their runs clear this).
os.environ.setdefault("DRILLS_MONITORING", "off")  # drills.profile.monitoring.OPT_OUT

import json  # noqa: E402
import logging  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

# The order files go to the workers (`make test`: `--dist loadfile --no-loadscope-reorder`): longest first, by the
# wall times bench/tests_timeline.py --write-weights saved, so the last files a worker takes are short ones and no
# worker is left alone with a 45 s file at the end. xdist's default reorder (most tests first) did the opposite: a
# file of 3 long drills came after every unit file. A file not listed (new) counts as a mid-sized e2e file.
_WEIGHTS = json.loads((Path(__file__).parent / "file_weights.json").read_text())


def pytest_collection_modifyitems(items):
    def weight(item) -> float:
        path = item.nodeid.split("::")[0]
        return _WEIGHTS.get(path, 10.0 if path.startswith("tests/e2e/") else 0.0)

    items.sort(key=lambda item: -weight(item))  # stable: a file's own order is kept


# One prefork server for the whole run (drills.core.prefork), started by xdist's controller before it spawns the
# workers, who inherit its socket in DRILLS_PREFORK (tests/e2e/conftest.py waits for it to be ready). Each worker
# used to start its own: four servers importing the CLI, the twin, pytest and the kubernetes client (≈ 3 s of CPU
# each) at the moment four workers collect the suite, and the twins their first tests start waited for it. One
# server imports while the workers collect; forking for four workers is a few ms per child.
_SHARED_SERVER = pytest.StashKey()


def pytest_configure(config: pytest.Config) -> None:
    from drills.core import prefork

    xdist_controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if xdist_controller and not os.environ.get(prefork.ENV):
        from drills.core.runner import PRELOAD, REPO

        server = prefork.PreforkServer.launch(PRELOAD, cwd=REPO)
        os.environ[prefork.ENV] = str(server.socket)
        config.stash[_SHARED_SERVER] = server


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_SHARED_SERVER, None)
    if server is not None:
        from drills.core import prefork

        os.environ.pop(prefork.ENV, None)
        server.stop()


@pytest.fixture(autouse=True)
def _root_logger_level_restored():
    """A command run in this process (`drills revert` quiets the root logger to CRITICAL) must not silence the
    log records a later test of the same worker asserts on."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


# bench/tests_timeline.py: each test's worker, start and end (wall), to see the workers' idle tails and overlaps
_TIMELINE = os.environ.get("DRILLS_TEST_TIMELINE")
_started: dict = {}


def pytest_runtest_logstart(nodeid, location):
    if _TIMELINE:
        import time

        _started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid, location):
    if _TIMELINE and nodeid in _started:
        import json
        import time

        line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": nodeid,
                "start": _started.pop(nodeid), "end": time.time()}
        with open(_TIMELINE, "a") as fh:
            fh.write(json.dumps(line) + "\n")
