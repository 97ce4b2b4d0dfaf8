"""What `drills run` needs to know of its in-process pytest session beyond the exit code.

pytest returns 2 both for Ctrl-C and for collection errors, and a fixture that fails before the
scenario's `drill` account exists (a twin that does not start, a profile the fixture refuses) leaves
no record. `RunWatch` — a plugin object handed to `pytest.main` — keeps, as one line each: collection
errors, problems found at selection (unknown Gherkin steps, fixtures/selection.py) and errors of
scenarios that left no record; and whether pytest really saw a KeyboardInterrupt.
"""

from __future__ import annotations

import logging
import re

import pytest

from drills.core.errors import DrillError

__all__ = ["RunWatch", "error_line", "RECORDED"]

log = logging.getLogger(__name__)

RECORDED = pytest.StashKey[bool]()  # set on an item by the recorder once its record will be written


class RunWatch:
    """Errors that stop drills before their record exists, one line each, in order; and the interrupt."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.interrupted = False

    def add(self, line: str) -> None:
        if line not in self.errors:
            self.errors.append(line)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            where = report.nodeid or "the selected features"
            self.add(f"cannot collect {where}: {_longrepr_line(report.longrepr)}")

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        if not issubclass(excinfo.type, pytest.Session.Interrupted):  # pytest's own stop after collection errors
            self.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call) -> None:
        error = call.excinfo.value if call.excinfo is not None else None
        if error is None or call.when == "teardown" or isinstance(error, (pytest.skip.Exception, KeyboardInterrupt)):
            return
        if not item.stash.get(RECORDED, False):  # the scenario's record will not say it: the run does
            self.add(error_line(error))


def error_line(error: BaseException) -> str:
    """One line for an error that stopped a drill: a DrillError's own first line, else the type and message."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text if isinstance(error, DrillError) or isinstance(error, pytest.UsageError) else \
        f"{type(error).__name__}: {text}"


def _longrepr_line(longrepr) -> str:
    """The last exception of a collection error's report, on one line: `FeatureError: … Line number: 1; …`."""
    lines = [line[1:].strip() for line in str(longrepr).splitlines() if line.startswith("E ")]
    heads = [i for i, line in enumerate(lines) if _EXC_HEAD.match(line)]
    if not heads:
        crash = getattr(longrepr, "reprcrash", None)
        text = getattr(crash, "message", None) or (lines[-1] if lines else str(longrepr).strip().splitlines()[-1:])
        return str(text).replace("\n", " ") or "unknown error"
    first = heads[-1]
    head = _EXC_HEAD.match(lines[first])
    rest = [line for line in lines[first + 1:] if line]
    return "; ".join([f"{head.group(1).rsplit('.', 1)[-1]}: {head.group(2)}", *rest])


_EXC_HEAD = re.compile(r"^([\w.]*(?:Error|Exception|Warning)):\s*(.*)$")
