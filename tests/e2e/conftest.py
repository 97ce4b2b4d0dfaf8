"""The end-to-end tests' session: a prefork server (drills.core.prefork) — the run's, started by xdist's controller
(tests/conftest.py), or this process's own when pytest runs without workers.

Each test starts `drills` commands and twins; forked from a server that has imported the CLI, the twin,
pytest and the kubernetes client once, each starts in ≈ 0.1 s of CPU instead of ≈ 1-2 s. The processes are
still real and of their own (pid, session, signals, stdio, environment); the tests that exercise a cold start
or a signal's delivery to a fresh interpreter use `drills_popen`, which never forks from the server.
"""

import pytest

from drills.core import prefork
from drills.core.runner import PRELOAD, REPO


@pytest.fixture(scope="session", autouse=True)
def prefork_server():
    with prefork.server_in_environment(PRELOAD, cwd=REPO):  # one already named (the run's, or a test's) is used
        yield
