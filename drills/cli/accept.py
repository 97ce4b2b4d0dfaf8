"""`drills accept`: pre-expansion acceptance of new GPU nodes (drills.acceptance), a go/no-go per node.

Exit 0 iff every node passed every check (and the store's aggregate target, when set); 1 when any node
is a no-go; 2 for bad input or a refused target (nothing changed); 130 when interrupted (the Jobs were
deleted and this run's gate taints removed).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["accept"]

log = logging.getLogger(__name__)


def accept(
    nodes: str = typer.Option(..., "--nodes", help="New nodes: comma-separated names, or a label selector (k=v)."),
    gate: bool = typer.Option(False, "--gate", help="Taint the nodes gpu-drills.io/unaccepted:NoSchedule and untaint "
                                                    "only those that pass."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    target: str = typer.Option("twin", "--target", help="twin (the embedded twin) or a kubeconfig context."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Target profile YAML (default: built-in twin)."),
    twin_profile: Optional[str] = typer.Option(None, "--twin-profile", help="Twin profile (default: the profile's "
                                                                             "acceptance.twin_profile, expansion)."),
    defect: List[str] = typer.Option([], "--defect", help="Twin defect to apply (repeatable)."),
    scale: Optional[float] = typer.Option(None, "--scale", help="Twin seconds per wall second."),
    twin_state: Optional[str] = typer.Option(None, "--twin-state", help="Accept nodes of a running twin."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Run id (default: a UTC timestamp)."),
    reports: Path = typer.Option(Path("reports"), "--reports", help="Folder holding the runs."),
    no_html: bool = typer.Option(False, "--no-html", help="Skip the Allure HTML (no Java)."),
) -> None:
    """Run the acceptance checks on new GPU nodes; print and record a go/no-go per node and per check."""
    from drills.acceptance.run import AcceptOptions, run_acceptance
    from drills.core.signals import deferred_signals

    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    result = run_acceptance(AcceptOptions(
        nodes=nodes, gate=gate, dry_run=dry_run, target=target, profile=profile, twin_profile=twin_profile,
        defects=list(defect), scale=scale, twin_state=twin_state, run_id=run_id, reports_root=reports, html=not no_html,
        progress=lambda line: print(f"… {line}", file=sys.stderr, flush=True)))
    with deferred_signals():  # the run is over: a late signal must not cut what it says short (it then exits 130)
        _say(result, reports)
    raise typer.Exit(0 if result.lines else result.exit_code)


def _say(result, reports: Path) -> None:
    """The run's last words: the plan of a dry run, or a go/no-go per node and check, the gate, the report, and —
    as `drills run` ends — whether it was interrupted and what the journal says is still open."""
    from drills.cli.run import last_line

    if result.lines:
        print("\n".join(result.lines))
        return
    verdicts = result.node_verdicts()
    for node in result.plan.nodes:
        failed = verdicts.get(node) or []
        print(f"{'■' if failed else '✓'} {node}: {'NO-GO' if failed else 'GO'}")
        waived = {w.check: w for r, w in result.waived() if w.node == node}
        for r in sorted((r for r in result.results if r.node == node), key=lambda r: r.check):
            w = waived.get(r.check)
            print(f"    {'✓' if r.go else '~' if w else '✗'} {r.check}: {r.reason}"
                  + (f" (waived by {w.by}: {w.reason})" if w and not r.go else ""))
    if result.aggregate is not None:
        a = result.aggregate
        print(f"{'✓' if a['go'] else '✗'} shared store, all nodes: read {a['read_mb_s']:.0f} MB/s (≥ {a['min_mb_s']:.0f})")
    if result.gate:
        print(f"gate: untainted {', '.join(result.gate['untainted']) or 'none'}; kept tainted "
              f"{', '.join(result.gate['kept']) or 'none'}")
    print(f"report: {result.run_dir}")
    last = last_line(result.interrupted, result.open_entries, reports, result.run_dir)  # as `drills run` ends
    if last:
        print(last, file=sys.stderr)
