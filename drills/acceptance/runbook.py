"""The acceptance suite in Gherkin: `features/acceptance/*.feature` is the sign-off's runbook — a Scenario
Outline per check over the new nodes, then the batch's identity cross-check, the policy's required checks,
the shared store's aggregate and each node's sign-off — and `drills accept` runs it through pytest-bdd.

The Examples rows are the nodes the run planned: the feature files in the repository carry a `| node |`
table without rows; `render` writes the run's copy of them into `<run>/runbook/` with one row per planned
node (the runbook that was executed, kept with the report), and pytest collects that copy through the
binder `features/acceptance/accept_runbook.py`. That binder is not a `test_*.py`: `drills run` (and the
drills' binder features/test_drills.py, which skips this folder) never collects the acceptance scenarios,
and this run collects nothing but them: `--noconftest` keeps the drills' plugins (a fresh twin per
scenario, the drill recorder) out; the drills' unknown-step check (fixtures.selection) is loaded with the
acceptance steps (fixtures.acceptance).

The steps only call `AcceptChecks` (drills/acceptance/checks.py); the records and the report are written
from its result as before. pytest's own outcome per row (a no-go fails its row, a waiver is an xfail) is the
runbook's view, in `<run>/runbook/junit.xml`. An error that is not a verdict (a Job that could not be
created, a collection error, an unknown step) stops the runbook and is raised here as it was raised before;
a SIGINT/SIGTERM that pytest caught is raised again as KeyboardInterrupt: the caller's teardown (Jobs
deleted, gate reverted, Lease released) is the one `drills accept` always had.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

import pytest

from drills.acceptance.checks import AcceptChecks
from drills.core.errors import DrillError
from drills.core.runwatch import RunWatch, error_line
from drills.core.scoped import no_bytecode_written, working_dir
from drills.core.signals import interrupt_caused

__all__ = ["FEATURES", "BINDER", "NoGo", "render", "run_runbook", "NODE_HEADER"]

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
FEATURES = REPO / "features" / "acceptance"
BINDER = FEATURES / "accept_runbook.py"
NODE_HEADER = ("node",)  # an Examples table with exactly this header is filled with the planned nodes
_ROW = re.compile(r"^(\s*)\|(.*)\|\s*$")


class NoGo(AssertionError):
    """A row of the runbook judged no-go: a verdict, not an error (the run goes on)."""


def render(source: Path, nodes: tuple[str, ...], dest: Path) -> list[Path]:
    """Copy every `.feature` of `source` into `dest`, each Examples table headed `| node |` given one row
    per planned node; anything else verbatim. Returns the written files."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted(source.glob("*.feature")):
        lines = path.read_text(encoding="utf-8").splitlines()
        rendered: list[str] = []
        in_examples = False
        for line in lines:
            rendered.append(line)
            if line.strip().startswith("Examples:"):
                in_examples = True
                continue
            m = _ROW.match(line)
            if in_examples and m:
                in_examples = False  # the header: only it is looked at
                if tuple(c.strip() for c in m.group(2).split("|")) == NODE_HEADER:
                    rendered += [f"{m.group(1)}| {node} |" for node in nodes]
            elif in_examples and line.strip() and not line.strip().startswith("#"):
                in_examples = False
        target = dest / path.name
        target.write_text("\n".join(rendered) + "\n", encoding="utf-8")
        out.append(target)
    if not out:
        raise DrillError(f"no acceptance runbook: {source} has no .feature file")
    return out


class _Context(RunWatch):
    """The plugin object handed to pytest.main: the run's `AcceptChecks` as a fixture, and what the runbook
    ended with beyond verdicts — errors (one line each, the first exception kept to raise) and the interrupt."""

    def __init__(self, checks: AcceptChecks, rendered: Path) -> None:
        super().__init__()
        self.checks, self.rendered = checks, rendered
        self.error: BaseException | None = None

    @pytest.fixture
    def accept_checks(self) -> AcceptChecks:
        return self.checks

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[RUNBOOK_DIR] = self.rendered

    def pytest_bdd_before_scenario(self, request, feature, scenario) -> None:
        request.node.stash[_STEPS] = {}

    def pytest_bdd_after_step(self, request, feature, scenario, step, step_func, step_func_args) -> None:
        request.node.stash[_STEPS][id(step)] = ("passed", step_func_args.get("check"))

    def pytest_bdd_step_error(self, request, feature, scenario, step, step_func, step_func_args, exception) -> None:
        status = "failed" if isinstance(exception, NoGo) else "skipped" if isinstance(exception, pytest.xfail.Exception) \
            else "broken"
        request.node.stash[_STEPS][id(step)] = (status, step_func_args.get("check"))

    def pytest_bdd_after_scenario(self, request, feature, scenario) -> None:
        """The row's steps as the report shows them under its node × check (Allure steps): the runbook read."""
        seen = request.node.stash.get(_STEPS, {})
        node = (getattr(getattr(request.node, "callspec", None), "params", {}).get("_pytest_bdd_example") or {}).get("node")
        check = next((c for _, c in seen.values() if c), None)
        if node and check:
            self.checks.result.runbook[(node, check)] = [
                {"name": f"{s.keyword} {s.name}", "status": seen.get(id(s), ("skipped", None))[0]} for s in scenario.steps]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call) -> None:
        error = call.excinfo.value if call.excinfo is not None else None
        if error is None or isinstance(error, (NoGo, pytest.skip.Exception, pytest.xfail.Exception)):
            return
        if isinstance(error, KeyboardInterrupt) or interrupt_caused(error):
            self.interrupted = True
            item.session.shouldstop = "interrupted"
            return
        self.add(error_line(error))
        self.error = self.error or error
        item.session.shouldstop = f"the runbook stopped: {error_line(error)}"  # as an exception stopped _checks


RUNBOOK_DIR = pytest.StashKey[Path]()
_STEPS = pytest.StashKey[dict]()  # id(step) → (status, the step's check argument)


def run_runbook(checks: AcceptChecks, run_dir: Path, debug: bool = False) -> None:
    """Render the runbook for `checks.plan`'s nodes into `<run_dir>/runbook`, run it, settle the batch steps
    it did not run. Raises what stopped it: KeyboardInterrupt, the step's DrillError, or a DrillError line."""
    rendered = run_dir / "runbook"
    render(FEATURES, checks.plan.nodes, rendered)
    ctx = _Context(checks, rendered)
    args = [str(BINDER), "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), "--noconftest",
            "-o", "addopts=--strict-markers", "-o", "timeout=0", "-p", "no:cacheprovider", "-p", "no:locust",
            "-p", "no:allure_pytest_bdd", "-p", "fixtures.selection", "-p", "fixtures.acceptance",
            "--junitxml", str(rendered / "junit.xml")]
    args += ["--tb=short", "-rfE"] if debug else ["-p", "no:terminal"]
    if str(REPO) not in sys.path:  # fixtures/ (the pytest layer) lives in the repo, it is not an installed package
        sys.path.insert(0, str(REPO))
    sys.modules.pop(BINDER.stem, None)  # a second run in this process collects its own rendering, not a cached one
    try:
        with working_dir(REPO), no_bytecode_written():
            rc = int(pytest.main(args, plugins=[ctx]))
    finally:
        sys.modules.pop(BINDER.stem, None)
    log.debug("runbook: pytest exit %s, %s", rc, os.fspath(rendered))
    if ctx.interrupted:
        raise KeyboardInterrupt
    if ctx.error is not None:
        raise ctx.error
    if ctx.errors:
        raise DrillError(f"the acceptance runbook did not run: {'; '.join(ctx.errors)}")
    if rc not in (0, 1):
        raise DrillError(f"the acceptance runbook did not run (pytest exit {rc})")
    checks.finish()
