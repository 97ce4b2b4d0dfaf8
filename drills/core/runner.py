"""`drills run` and `drills revert`: prepare a run, drive the features through pytest-bdd, report.

A run: validate the profile and every option (drills.core.preflight: one line if anything is wrong, before
the run folder exists) → probe a real cluster (one line if unreachable) → `reports/<run-id>/` (on the
twin, `fixtures.target` starts a fresh twin per scenario) → `pytest.main` in this process on the features (Allure results, JUnit XML, the drill plugins) → report
(summary, timeline charts, Allure HTML) → `reports/latest` → the final table. Exit 0 iff every drill
passed; 2 when no drill could start (bad input, the fault could not be injected, or a precondition
failed: nothing was injected; a collection error, an unknown step or a fixture error before any record —
drills.core.runwatch); otherwise 1 when any drill failed or was inconclusive (an inconclusive
drill proved nothing, so it is not a pass); 130 whenever the run was interrupted. Decided from the
records' typed verdict and category through the one table of drills.core.outcomes (which also gives
each record's Allure status, JUnit result and word: junit.xml is rewritten from the records after the
run), never from the words of a reason. The first
SIGINT or SIGTERM stops the run (KeyboardInterrupt: pytest tears down, so every fault is reverted, the
run lock released, the records written, every twin stopped); any later one is recorded, never raised,
so that teardown finishes (drills.core.signals). The journal, not the console, says whether it did:
`RunResult.open_entries`.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from drills.profile.model import load_target
from drills.core.errors import DrillError
from drills.core.journal import JOURNAL_NAME, Entry, Journal, open_entries, revert_open
from drills.core import outcomes
from drills.core.outcomes import EXIT_INTERRUPTED, EXIT_NOT_STARTED, AllureStatus, exit_code_of, run_exit_code
from drills.core.record import Record
from drills.core.preflight import check_run, feature_selection, random_plan
from drills.core.runwatch import RunWatch
from drills.core.scoped import no_bytecode_written, working_dir
from drills.core.selection import check_selection
from drills.core.signals import interrupt_caused, stop_on_signal

__all__ = ["RunOptions", "RunResult", "run_drills", "revert_runs", "REPO", "final_table"]

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
_PYTEST_INTERRUPTED = 2  # pytest.ExitCode.INTERRUPTED (also what it returns for collection errors: RunWatch tells)
PLUGINS = ("fixtures.heap", "fixtures.twin", "fixtures.target", "fixtures.selection", "fixtures.variants", "fixtures.guard", "fixtures.targets", "fixtures.recorder", "fixtures.picks",
           "fixtures.progress", "fixtures.training", "fixtures.inference", "fixtures.rollout", "fixtures.neighbour", "fixtures.network", "fixtures.storage",
           "fixtures.detection", "fixtures.steps")
# What a prefork server imports once for the processes a run starts (drills.core.prefork): the CLI, the twin,
# pytest and what the drills' plugins import, and what a run then imports on first use (measured: a forked
# drill spent half its CPU importing): the client's API classes and their models (loaded on first use), the
# result table, the report's chart backend, what pytest-bdd's and pytest's own plugins import, and the drills'
# plugins themselves (they hold no `assert` for pytest to rewrite, and read the environment only when called).
PRELOAD = ("drills.cli", "drills.cli.run", "drills.cli.report", "drills.cli.accept", "drills.cli.schedule",
           "drills.cli.validate", "drills.core.runner", "drills.verdicts.training", "drills.verdicts.serving",
           "drills.twin.cli", "drills.twin.runtime", "drills.twin.profile", "drills.report.make",
           "drills.twin.fabric", "drills.twin.controllers.preload", "drills.twin.warm",  # what every twin loads
           "pytest", "pytest_bdd.plugin", "allure_pytest_bdd.plugin", "allure_commons", "kubernetes.client",
           *(f"kubernetes.client.api.{api}_api" for api in ("core_v1", "apps_v1", "batch_v1", "policy_v1",
                                                            "coordination_v1", "custom_objects", "version")),
           "drills.core.kube_warm",  # the client methods' argument validators, built once (not per child)
           "rich.console", "rich.table", "matplotlib.backends.backend_agg", "mako.lookup", "mako.ext.pygmentplugin",
           "execnet", "_pytest.junitxml", "_pytest.unraisableexception", "_pytest.threadexception",
           "_pytest.skipping", "_pytest.warnings", "_pytest.helpconfig", "_pytest.faulthandler", "pdb", "tomllib",
           "xml.etree.ElementTree",
           *PLUGINS, "~drills.core.lanes")


RANDOM_PLAN = "random.json"  # the run's RandomPlan (drills.core.picks), read by fixtures/picks.py

# Scenarios at once on fresh twins: a drill mostly waits on its twin's clock; bench/suite.py measures the wall
# time and the error against the twins' truth for each choice on 2 cores.
DEFAULT_LANES = 3
LANES_MAX_SCALE = 120.0  # above this twin scale scenarios run one by one unless --lanes says otherwise (_lanes)

_STYLES = {AllureStatus.PASSED: "green", AllureStatus.FAILED: "red", AllureStatus.BROKEN: "yellow",
           AllureStatus.SKIPPED: "yellow"}  # the console's colour follows the record's Allure status


@dataclass
class RunOptions:
    target: str = "twin"  # "twin" or a kubeconfig context
    profile: str | None = None
    defects: list[str] = field(default_factory=list)
    scale: float | None = None
    run_id: str | None = None
    dry_run: bool = False
    lang: str = "en"
    load_workers: int | None = None
    debug: bool = False
    markexpr: str | None = None
    keyword: str | None = None
    features: list[str] = field(default_factory=list)
    reports_root: Path = Path("reports")
    html: bool = True
    twin_state: str | None = None  # drill this running twin (`drills twin up --state-dir`) instead of fresh ones
    lanes: int | None = None  # scenarios at once on fresh twins (None: DEFAULT_LANES); 1 runs them one by one
    random: str | None = None  # `--random SEED|auto`: targets drawn at random (drills.core.picks)
    replay: str | None = None  # `--replay RUN`: the targets RUN recorded


@dataclass
class RunResult:
    exit_code: int
    run_dir: Path
    records: list[Record]
    errors: list[str]
    interrupted: str | None = None  # the signal that stopped the run (SIGINT/SIGTERM), None if it ran to its end
    open_entries: list[Entry] = field(default_factory=list)  # this run's journal entries still open (the truth)
    skipped: list[dict] = field(default_factory=list)  # Examples this target does not run: scenario, test, reason


def run_drills(opts: RunOptions) -> RunResult:
    """Run the selected drills once; raises DrillError (one line) for input that stops the run early."""
    check_selection(opts.markexpr, opts.keyword)  # one line, before a run folder exists
    profile = load_target(opts.profile)
    check_run(opts, profile)
    collect, named = feature_selection(opts.features, REPO / "features", opts.lang)
    run_id = opts.run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    reports_root = Path(opts.reports_root).resolve()
    run_dir = reports_root / run_id
    if run_dir.exists():
        raise DrillError(f"run {run_id} already exists in {reports_root}; pass another --run-id")
    if not opts.twin_state and not (opts.target == "twin" and profile.cluster.mode == "twin"):
        _preflight(profile, None if opts.target == "twin" else opts.target)
    picks = random_plan(opts, profile)  # checked by check_run already: the same answer, now kept for the run
    _make_run_dir(run_dir)
    _mark_run(run_dir, dry_run=bool(opts.dry_run or profile.safety.dry_run))
    if picks is not None:
        (run_dir / RANDOM_PLAN).write_text(picks.to_json(), encoding="utf-8")
    watch = RunWatch()
    lanes = _lanes(opts, profile)
    with stop_on_signal() as interrupts:
        if lanes > 1:  # scenarios on fresh twins of their own, in parallel (drills.core.lanes)
            from drills.core.lanes import run_lanes

            from drills.core.prefork import server_in_environment

            with server_in_environment(PRELOAD, cwd=REPO):  # lanes and their twins fork from it
                ran = run_lanes(opts, run_id, run_dir, collect, named, lanes)
            rc, watch.interrupted = ran.rc, ran.interrupted
            for line in ran.errors:
                watch.add(line)
            interrupts.received += ran.signals
        else:
            rc = _interruptible(lambda: _pytest(opts, run_id, run_dir, collect, named, watch))
        records = _records(run_dir)
        still_open = Journal(run_dir / JOURNAL_NAME).open_entries() if (run_dir / JOURNAL_NAME).exists() else []
        with stop_on_signal() as later:  # the faults are settled: a signal now only cuts the report short
            _interruptible(lambda: _finish(run_dir, reports_root, run_id, opts, profile.name, records))
    interrupted = interrupts.first or later.first or ("SIGINT" if watch.interrupted else None)
    errors = [*watch.errors, *_not_started(records)]
    from_records = run_exit_code(records) if records else None  # the one table (drills.core.outcomes)
    if from_records == EXIT_INTERRUPTED:
        interrupted = interrupted or "SIGINT"
    if interrupted:
        code = EXIT_INTERRUPTED
    elif watch.errors:
        code = EXIT_NOT_STARTED
    elif from_records is not None:
        code = 1 if from_records == 0 and rc != 0 else from_records  # pytest failed where no record says so
    elif rc == 5 or rc == 0:
        code = 0 if opts.dry_run else 4  # nothing selected (or a dry run that injected nothing)
    else:
        code = 1
    return RunResult(code, run_dir, records, errors, interrupted, still_open, _skipped(run_dir))


def revert_runs(reports_root: Path, run_id: str | None = None, *, accept_new_host_key: bool = False,
                settle_s: float | None = None, force: bool = False) -> list:
    """Revert every open journal entry (one run, or all runs under reports_root) and return the outcomes.
    Each revert is verified as a run's teardown verifies it: read back (drills.faults `verify_entry`) after a
    settle period of cluster time (`settle_s`, else the run's journaled `safety.revert_settle_s`, else 60 s);
    a fault that is back stays open, its reading in the failure.

    Entries of live runs — alive on this host, or holding a current run-lock Lease on their cluster (unless
    `force`) — of another cluster than the one their connection reaches now, and of a switch that presents
    another host key than at inject (unless `accept_new_host_key`) are refused (left open);
    `raise_for_failures(outcomes)` turns what was not reverted into one error line.
    """
    root = Path(reports_root)
    if run_id is not None and not (root / run_id).is_dir():
        raise DrillError(f"no run {run_id} under {root}; `ls {root}` shows the runs")
    if not open_entries(root, run_id):
        return []
    from functools import partial

    from drills.faults import reverter

    from drills.core.revertcheck import RevertChecks

    with RevertChecks() as check:
        return revert_open(root, run_id, partial(reverter, accept_new_host_key=accept_new_host_key, verify=True,
                                                 settle_s=settle_s),
                           check_target=check, lease_live=None if force else check.lease_live)


def final_table(records: list[Record], width: int = 100, lang: str = "en"):
    """drill, scenario, target, measured, verdict — as a rich Table one line per record on a `width`-column
    terminal: long scenario names keep their Outline example values; a target the site profile set
    instead of the feature's number reads "30s (site profile)" (drills.report.figures)."""
    from rich.table import Table

    from drills.report.figures import headline_figures, overridden, scenario_cell
    from drills.verdicts.timeline import format_duration

    from drills.report.text import labels, say

    words = labels(lang)
    rows = []
    for rec in records:
        row = outcomes.of(rec)
        verdict = words[row.word]
        style = _STYLES[row.allure]
        if rec.target_s:
            measured = format_duration(rec.recovery_s) if rec.recovery_s is not None else "—"
            target = format_duration(rec.target_s) + overridden(rec)
        else:  # no recovery target (storage saturation): its headline check against that check's limit
            target, measured = headline_figures(rec)
        rows.append((rec.drill, rec.scenario or "?", target, measured, f"[{style}]{verdict}[/{style}]",
                     rec.details.get("example")))
    from rich.cells import cell_len  # a Chinese character is two columns wide

    names = {c: say(f"col_{c}", lang) for c in ("drill", "scenario", "target", "measured", "verdict")}
    verdict_width = max([cell_len(names["verdict"]), *(cell_len(words[outcomes.of(rec).word]) for rec in records)])
    widths = [max(cell_len(names[column]), *(cell_len(row[i]) for row in rows)) for i, column in
              ((0, "drill"), (2, "target"), (3, "measured"))] if rows else [5, 6, 8]
    others = sum(w + 3 for w in [*widths, verdict_width])  # a cell is its text, a space each side and a border
    scenario_width = max(16, width - others - 4)
    table = Table(title=say("table_title", lang), show_lines=False)
    for column, min_width in zip(("drill", "target", "measured", "verdict"), [*widths, verdict_width]):
        table.add_column(names[column], no_wrap=True, min_width=min_width)
        if column == "drill":
            table.add_column(names["scenario"], no_wrap=True, overflow="ellipsis", max_width=scenario_width)
    for drill, scenario, *rest, example in rows:
        siblings = [row[1] for row in rows if row[0] == drill]
        table.add_row(drill, scenario_cell(scenario, example, siblings, scenario_width), *rest)
    return table


def _pytest(opts: RunOptions, run_id: str, run_dir: Path, collect: list[str], named: list[str],
            watch: "RunWatch", lane: tuple[Path, int] | None = None) -> int:
    """pytest on the features, in this process; `lane` = (lanes dir, lane number) when it is one lane of
    a parallel run (drills.core.lanes): then it claims scenarios from the shared counter and writes its
    own JUnit file (the supervisor merges them), and never cleans the shared Allure results."""

    import pytest

    from drills.core.languages import feature_root

    if str(REPO) not in sys.path:  # fixtures/ (the pytest layer) lives in the repo, it is not an installed package
        sys.path.insert(0, str(REPO))
    features = collect or [str(feature_root(REPO / "features", opts.lang))]  # features/ or features/zh/
    rootdir = os.path.commonpath([str(REPO), *features])  # Allure titles need every feature under the rootdir
    args = [*features, "--rootdir", rootdir, "-c", str(REPO / "pyproject.toml"),
            "-o", "addopts=--strict-markers", "-o", "timeout=0", "-p", "no:cacheprovider",
            # only the plugins a drill uses (xdist's, timeout's and locust's are not), and nothing installed later
            # joins a drill unasked; they are given as modules below, not `-p NAME`: pytest scans every installed
            # package's entry points for each `-p` (~10 ms of CPU each, 20 plugins, every drill and lane)
            "--disable-plugin-autoload",
            "--alluredir", str(run_dir / "allure-results"),
            "--drills-run-dir", str(run_dir), "--drills-run-id", run_id, "--drills-lang", opts.lang]
    if lane is None:
        args += ["--clean-alluredir", "--junitxml", str(run_dir / "junit.xml")]
    else:
        args += ["--junitxml", str(lane[0] / f"junit-{lane[1]}.xml"), "--drills-lanes-dir", str(lane[0])]
    plugins = [importlib.import_module(name) for name in  # also for features outside the repo (no root conftest)
               ("pytest_bdd.plugin", "allure_pytest_bdd.plugin", *PLUGINS, *(("fixtures.lanes",) if lane else ()))]
    if opts.profile:
        args += ["--drills-profile", str(Path(opts.profile).resolve())]
    if opts.twin_state:
        args += ["--drills-twin-state", str(Path(opts.twin_state).resolve())]
    elif opts.target != "twin":
        args += ["--drills-context", opts.target]
    for name in opts.defects:
        args += ["--drills-twin-defect", name]
    if opts.scale:
        args += ["--drills-twin-scale", str(opts.scale)]
    if opts.dry_run:
        args.append("--drills-dry-run")
    if opts.markexpr:
        args += ["-m", opts.markexpr]
    if opts.keyword:
        args += ["-k", opts.keyword]
    args += ["--tb=short", "-rfE"] if opts.debug else ["-p", "no:terminal"]
    if opts.load_workers:  # an option, not the environment: a second run in this process must not inherit it
        args += ["--drills-load-workers", str(opts.load_workers)]
    for path in named:  # a folder of .feature files or one file: its binder is collected, filtered to these
        args += ["--drills-feature", path]
    if (run_dir / RANDOM_PLAN).exists():  # --random / --replay: how the scenarios pick their targets
        args += ["--drills-random-plan", str(run_dir / RANDOM_PLAN)]
    log.debug("pytest %s", " ".join(args))
    with working_dir(REPO), no_bytecode_written():
        return int(pytest.main(args, plugins=[*plugins, watch]))


def _lanes(opts: RunOptions, profile) -> int:
    """How many scenarios may run at once: `opts.lanes` when each gets a fresh twin of its own, by default
    DEFAULT_LANES up to LANES_MAX_SCALE and one above it; one on a real cluster or a running twin (one run at a
    time per cluster) and for a dry run.

    Lanes share this machine's cores, and a wall millisecond a drill's load waits for a core is `scale`
    milliseconds of cluster time. At 600× the inference recovery measured in 3 lanes on 2 cores was 0.9-1.7 %
    of its 5-minute target off the twin's truth, alone 0.1-0.5 % (bench/suite.py): accuracy first."""
    fresh_twins = not opts.twin_state and opts.target == "twin" and profile.cluster.mode == "twin"
    if not fresh_twins or opts.dry_run:
        return 1
    if opts.lanes is not None:
        return max(1, opts.lanes)
    scale = opts.scale or profile.cluster.twin.scale
    return DEFAULT_LANES if scale <= LANES_MAX_SCALE else 1


def _make_run_dir(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True)
    except OSError as err:
        raise DrillError(f"cannot create the run folder {run_dir}: {err.strerror}; pass a writable --reports") from None


def _mark_run(run_dir: Path, dry_run: bool) -> None:
    """`run.json`: what kind of run this is, for the report (a dry run never counts in the trend or score)."""
    from drills.report.records import RUN_FILE

    (run_dir / RUN_FILE).write_text(json.dumps({"dry_run": dry_run}) + "\n", encoding="utf-8")


def _preflight(profile, context: str | None) -> None:
    """A real target must answer before anything runs (TargetUnreachable is one line)."""
    from drills.core.kube import connect

    connect(profile, context=context).close()


def _records(run_dir: Path) -> list[Record]:
    from drills.report.records import load_records

    path = run_dir / "records.jsonl"
    return load_records(path) if path.exists() else []


def _skipped(run_dir: Path) -> list[dict]:
    """The Examples fixtures/variants.py skipped on this target, in run order."""
    path = run_dir / "skipped.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _not_started(records: list[Record]) -> list[str]:
    """Reasons of drills that stopped before changing anything (bad input, unmet precondition, an injector that
    refused before acting). A fault that was partly made and reverted (`reverts`) did start: exit 1."""
    return [r.reason for r in records if exit_code_of(r) == EXIT_NOT_STARTED]


def _interruptible(step):
    """Run `step`; a KeyboardInterrupt (the first signal) ends it — stop_on_signal has recorded which signal."""
    try:
        return step()
    except KeyboardInterrupt:
        return _PYTEST_INTERRUPTED
    except Exception as err:
        if interrupt_caused(err):  # the signal landed in an import (the report's charts load numpy)
            return _PYTEST_INTERRUPTED
        raise


def _finish(run_dir: Path, reports_root: Path, run_id: str, opts: RunOptions, target: str, records: list[Record]) -> None:
    from drills.report.junit import rewrite_junit

    _link_latest(reports_root, run_id)
    rewrite_junit(run_dir / "junit.xml", records)  # its testcases say what their records say, whatever pytest saw
    if records and len(_not_started(records)) < len(records):  # nothing ran: the one-line error is the whole story
        _report(run_dir, reports_root, opts, target)


def _report(run_dir: Path, reports_root: Path, opts: RunOptions, target: str) -> None:
    from drills.report.make import make_report

    try:
        # Cluster facts (Kubernetes, nodes, GPUs, defects) come from <run>/environment.json, saved during the run.
        make_report(run_dir, lang=opts.lang, reports_root=reports_root, html=opts.html,
                    environment={"Target profile": target})
    except DrillError as err:  # a report that cannot be built must not hide the drills' outcome
        log.warning("report not built: %s", err)


def _link_latest(reports_root: Path, run_id: str) -> None:
    latest = reports_root / "latest"
    tmp = reports_root / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_id)
    os.replace(tmp, latest)
