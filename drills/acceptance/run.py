"""One acceptance run: connect → plan (read-only, refused if unsafe) → journal + gate taint → the runbook
(features/acceptance/, drills/acceptance/runbook.py: the checks' Jobs phase by phase, judged) → settle the
gate → delete the Jobs → records and report.

Phases run one after the other (each check wants the node's GPUs to itself); inside a phase every node
runs its Job at once (drills/acceptance/checks.py). The Jobs' journal entry is opened before the first Job and reverted (every Job of
the run deleted) whatever happens; the gate's entry is settled at the end — passing nodes untainted,
failing ones keep the taint with the reason as annotation and event — or, when the run did not finish
(exception, SIGINT, SIGTERM), reverted: no taint of this run is left. Signals are deferred while an
entry is opened or reverted (drills.core.signals), as in the drills.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from drills.acceptance import freshness, identity, policy
from drills.acceptance.checks import JOB_PHASES, AcceptChecks
from drills.acceptance.judge import CheckResult
from drills.acceptance.plan import AcceptPlan, make_plan
from drills.acceptance.runbook import run_runbook
from drills.core.errors import DrillError
from drills.core.journal import Journal
from drills.core.signals import deferred_signals, stop_on_signal
from drills.faults import Target, fault_module, revert_entry

__all__ = ["AcceptOptions", "AcceptResult", "run_acceptance", "check_options", "JOB_PHASES"]

log = logging.getLogger(__name__)


@dataclass
class AcceptOptions:
    nodes: str
    gate: bool = False
    dry_run: bool = False
    target: str = "twin"
    profile: str | None = None
    twin_profile: str | None = None
    defects: list[str] = field(default_factory=list)
    scale: float | None = None
    twin_state: str | None = None
    run_id: str | None = None
    reports_root: Path = Path("reports")
    html: bool = True  # build the Allure HTML (needs the Allure CLI and Java)
    progress: Callable[[str], None] = lambda line: None


@dataclass
class AcceptResult:
    exit_code: int
    run_dir: Path | None
    plan: AcceptPlan | None
    results: list[CheckResult] = field(default_factory=list)
    pairs: list[CheckResult] = field(default_factory=list)  # new ↔ new node pairs (the heat map's other cells)
    aggregate: dict[str, Any] | None = None
    gate: dict[str, list[str]] = field(default_factory=dict)  # untainted / kept
    interrupted: str | None = None
    open_entries: list = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the dry run's plan
    policy: Any = None  # the profile's acceptance section (required checks, waivers)
    raw: dict[tuple[str, str, str | None], str] = field(default_factory=dict)  # (node, check, peer) → tool output
    runbook: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (node, check) → its row's steps

    def node_verdicts(self) -> dict[str, list[CheckResult]]:
        """node → its failed checks that are not waived (empty: go)."""
        out: dict[str, list[CheckResult]] = {n: [] for n in (self.plan.nodes if self.plan else ())}
        for r in self.results:
            if (not r.go) if self.policy is None else policy.blocking(self.policy, r):
                out.setdefault(r.node, []).append(r)
        return out

    def waived(self) -> list[tuple[CheckResult | None, Any]]:
        """(the result or None when the check left none, its waiver) for every waiver of this run's nodes."""
        if self.policy is None or self.plan is None:
            return []
        by = {(r.node, r.check): r for r in self.results}
        return [(by.get((w.node, w.check)), w) for w in self.policy.waivers if w.node in self.plan.nodes]


def run_acceptance(opts: AcceptOptions) -> AcceptResult:
    from drills.profile.model import load_target

    profile = load_target(opts.profile)
    check_options(opts, profile)  # every option, the target rule of every command: one line, before anything starts
    run_id = opts.run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    reports_root = Path(opts.reports_root).resolve()
    run_dir = reports_root / run_id
    if run_dir.exists():
        raise DrillError(f"run {run_id} already exists in {reports_root}; pass another --run-id")
    with _connected(profile, opts) as (cluster, twin_info):
        plan = make_plan(cluster, profile, opts.nodes)
        if opts.dry_run:
            lines = ["dry run: nothing changed"] + plan.describe(profile.acceptance.namespace, opts.gate,
                                                                   profile.acceptance.healthy_conditions)
            return AcceptResult(0, None, plan, lines=lines)
        run_dir.mkdir(parents=True)
        journal = Journal.for_run(reports_root, run_id)
        from drills.core.lock import ClusterLock

        lock = ClusterLock.for_profile(cluster, profile, run_id, journal)  # one run at a time per cluster
        journal.guard = lock.guard  # taken before the first journal entry (UnsafeTarget if another run holds it)
        target = Target(cluster, run_dir=run_dir)
        result = AcceptResult(1, run_dir, plan, policy=profile.acceptance)
        entries = _Entries(journal, target, profile)
        finished = False
        with stop_on_signal() as interrupts:
            try:
                if opts.gate:
                    entries.open("accept-gate", nodes=list(plan.nodes))
                entries.open("accept-jobs", namespace=profile.acceptance.namespace, run_id=run_id, nodes=list(plan.nodes))
                run_runbook(AcceptChecks(cluster, profile, plan, run_id, twin_info, result, opts.progress), run_dir)
                finished = True
            except KeyboardInterrupt:
                result.interrupted = interrupts.first or "SIGINT"
            finally:  # `drills run`'s guarantees: every step runs to its end whatever signal arrives (the first one
                # raises once a deferred section ends — it must not skip the steps after it; later ones only record)
                def fresh(node: str) -> CheckResult | None:  # the node read again just before its verdict stands
                    return freshness.recheck(cluster, profile, plan, node)

                def settle() -> None:
                    if finished and not result.interrupted:
                        result.gate = entries.settle_gate(cluster, result, fresh)
                    else:  # an interrupted run leaves no taint of its own
                        entries.revert("accept-gate")

                def recheck() -> None:  # no gate to lift: the verdict itself must not outlive its evidence
                    if finished and not result.interrupted:
                        result.results += [r for n, failed in sorted(result.node_verdicts().items())
                                           if not failed and (r := fresh(n)) is not None]

                def release() -> None:
                    journal.guard = None
                    lock.release()

                for step in (lambda: entries.revert("accept-jobs"), settle if opts.gate else recheck, release):
                    _to_its_end(step, result, interrupts)
            result.open_entries = journal.open_entries()
            from drills.acceptance.report import write_report

            _to_its_end(lambda: write_report(run_dir, run_id, profile, result,
                                             html_report=opts.html and not result.interrupted), result, interrupts)
        verdicts = result.node_verdicts()
        failed = any(verdicts.values()) or (result.aggregate is not None and not result.aggregate["go"])
        result.exit_code = 130 if result.interrupted else (1 if failed else 0)
        return result


def _to_its_end(step: Callable[[], Any], result: AcceptResult, interrupts) -> None:
    """Run one teardown step; a KeyboardInterrupt it ends with (the run's first signal, raised once a deferred
    section finished) marks the run interrupted instead of cutting the steps after it short."""
    try:
        step()
    except KeyboardInterrupt:
        result.interrupted = result.interrupted or interrupts.first or "SIGINT"


def check_options(opts: AcceptOptions, profile) -> None:
    """The options of `drills accept`, by the grammars and rules `drills run` applies (drills.core.grammar,
    drills.core.preflight, drills.profile.safety.check_target): one DrillError line before any twin starts."""
    from drills.core.grammar import check_flag
    from drills.core.preflight import (check_reports_writable, check_run_id, check_scale, check_twin,
                                       check_twin_state)
    from drills.profile.safety import check_target

    selection = opts.nodes.strip()
    if "=" in selection or selection.startswith("!"):
        check_flag("--nodes", "selector", selection)
    else:
        names = [n.strip() for n in selection.split(",")]
        if not selection or not all(names):
            raise DrillError(f"--nodes {opts.nodes!r}: name the new nodes, comma-separated (e.g. gpu-new-01,gpu-new-02), "
                             "or give a label selector like gpu-drills.io/role=new")
        for name in names:
            check_flag("--nodes", "dns_subdomain", name)
    check_flag("--target", "context", opts.target)
    check_run_id(opts.run_id, Path(opts.reports_root))
    if opts.twin_state and (opts.defects or opts.scale is not None or opts.twin_profile):
        raise DrillError("--defect, --scale and --twin-profile start a twin; with --twin-state they would be ignored")
    on_twin = check_target(opts.target, profile, opts.twin_state, source=opts.profile)
    if opts.scale is not None:
        check_scale(opts.scale, "--scale")
    if opts.twin_profile is not None:
        check_flag("--twin-profile", "dns_label", opts.twin_profile)
    if opts.twin_state:
        check_twin_state(opts.twin_state)
    elif on_twin:
        check_twin(profile, opts.defects, opts.twin_profile or profile.acceptance.twin_profile)
    elif opts.defects or opts.scale is not None or opts.twin_profile:
        raise DrillError(f"--defect, --scale and --twin-profile apply to the twin only, but the target is {opts.target} "
                         f"(cluster.mode {profile.cluster.mode}); drop them or accept nodes of the twin")
    check_reports_writable(Path(opts.reports_root))


class _Entries:
    """The run's journal entries (plan → allowlist → journal, fsynced → inject), and their revert."""

    def __init__(self, journal: Journal, target: Target, profile) -> None:
        self.journal, self.target, self.profile = journal, target, profile
        self.open_: dict[str, tuple[str, Any, Any]] = {}  # kind → (entry id, plan, record)

    def open(self, kind: str, **params) -> None:
        from drills.profile.safety import check_namespace_allowed, check_node_allowed

        module = fault_module(kind)
        plan = module.plan(self.target, self.profile, **params)
        for name, labels in plan.reach.nodes:
            check_node_allowed(self.profile, name, dict(labels))
        for ns in plan.reach.namespaces:
            check_namespace_allowed(self.profile, ns)
        with deferred_signals():
            entry_id = self.journal.open_entry(kind, plan.target, plan.undo, connection=self.target.describe())
            self.open_[kind] = (entry_id, plan, None)
        record = module.inject(self.target, plan)
        data = record if isinstance(record, dict) else record.to_dict()
        with deferred_signals():
            self.open_[kind] = (entry_id, plan, data)
            self.journal.mark_injected(entry_id, data)

    def revert(self, kind: str) -> bool:
        if kind not in self.open_:
            return True
        entry_id, plan, record = self.open_.pop(kind)
        with deferred_signals():
            try:
                outcome = revert_entry(_Entry(kind, plan, record), self.target)
            except Exception as err:  # keep the entry open for `drills revert`, and say so
                self.journal.mark_revert_failed(entry_id, str(err) or type(err).__name__)
                log.error("revert of %s failed: %s (run `drills revert`)", kind, err)
                return False
            self.journal.close_entry(entry_id, outcome or "reverted")
        return True

    def settle_gate(self, cluster, result: AcceptResult,
                    fresh: Callable[[str], CheckResult | None]) -> dict[str, list[str]]:
        """The run finished: untaint the nodes that passed — each read again just before (`fresh`: a node that
        changed since its checks is a no-go) — and keep (annotate, event) the ones that did not."""
        from drills.faults import accept_gate

        entry_id, plan, record = self.open_.pop("accept-gate")
        done: dict[str, list[str]] = {"untainted": [], "kept": []}
        with deferred_signals():
            for node, failed in sorted(result.node_verdicts().items()):
                if not failed and (changed := fresh(node)) is not None:
                    result.results.append(changed)
                    failed = [changed]
                if failed:
                    reason = "; ".join(f"{r.check}: {r.reason}" for r in failed)
                    accept_gate.keep(cluster, node, reason)
                    done["kept"].append(node)
                else:
                    accept_gate.release(cluster, node)
                    accept_gate.accepted(cluster, node, identity.of_node(result.results, node))
                    done["untainted"].append(node)
            outcome = (f"settled: untainted {', '.join(done['untainted']) or 'none'}; kept on "
                       f"{', '.join(done['kept']) or 'none'} (no-go)")
            self.journal.close_entry(entry_id, outcome)
        return done


class _Entry:
    def __init__(self, kind: str, plan, record) -> None:
        self.kind, self.target, self.revert_spec, self.record, self.connection = kind, plan.target, plan.undo, record, None


class _connected:
    """The cluster to accept nodes on: the twin (started for the run unless --twin-state) or a context."""

    def __init__(self, profile, opts: AcceptOptions) -> None:
        self.profile, self.opts = profile, opts
        self.handle = self.state = self.cluster = None

    def __enter__(self):
        import tempfile

        from drills.core.kube import connect
        from drills.twin.launcher import read_twin_info, start_twin

        opts, profile = self.opts, self.profile
        info = None
        if opts.twin_state:
            info = read_twin_info(opts.twin_state)
            if info is None:
                raise DrillError(f"--twin-state {opts.twin_state}: no running twin there (no twin.json)")
        elif opts.target == "twin" and profile.cluster.mode == "twin":
            twin = profile.cluster.twin
            self.state = tempfile.mkdtemp(prefix="drills-accept-twin-")
            self.handle = start_twin(self.state, profile=opts.twin_profile or profile.acceptance.twin_profile,
                                     defects=[*twin.defects, *opts.defects], scale=opts.scale or twin.scale)
            info = self.handle.info
        context = None if opts.target == "twin" else opts.target  # check_options refused a twin profile for it
        try:
            self.cluster = connect(profile, twin_info=info, context=context)
        except BaseException:
            self._stop_twin()
            raise
        return self.cluster, info

    def __exit__(self, *exc) -> None:
        if self.cluster is not None:
            self.cluster.close()
        self._stop_twin()

    def _stop_twin(self) -> None:
        import shutil

        if self.handle is not None:
            self.handle.stop()
            self.handle = None
        if self.state:
            shutil.rmtree(self.state, ignore_errors=True)


def _json(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
