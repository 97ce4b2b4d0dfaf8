"""`drills run` and `drills revert`: the command-line faces of drills.core.runner."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["run", "revert", "last_line", "optional_values"]

log = logging.getLogger(__name__)


_RANDOM = typer.Option(
    None, "--random", metavar="[SEED]",
    help="Pick each drill's node, uplink or replica at random within the allowlist; the seed (a fresh one when none "
         "is given, or `auto`) and the choices are recorded. Put it after the feature paths.")


def optional_values(argv: list[str]) -> list[str]:
    """`--random` with its value left out (last, or followed by another option) is `--random auto`: typer has no
    option whose value may be omitted, so the argument list says it explicitly before typer reads it."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--random" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, "auto")
            break
    return out


def run(
    features: Optional[List[str]] = typer.Argument(None, help="Feature files or folders (default: features/)."),
    target: str = typer.Option("twin", "--target", help="twin (the embedded twin) or a kubeconfig context."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Target profile YAML (default: built-in twin)."),
    defect: List[str] = typer.Option([], "--defect", help="Twin defect to apply (repeatable)."),
    scale: Optional[float] = typer.Option(None, "--scale", help="Twin seconds per wall second."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Run id (default: a UTC timestamp)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the plan; inject nothing."),
    lang: str = typer.Option("en", "--lang", help="Language of the features run and of the report: en | zh "
                                                  "(zh: the zh-CN features of features/zh/, reported in Chinese)."),
    load_workers: Optional[int] = typer.Option(None, "--load-workers", help="Load generator workers."),
    markexpr: Optional[str] = typer.Option(None, "-m", help="Select drills by tag expression (pytest -m)."),
    keyword: Optional[str] = typer.Option(None, "-k", help="Select drills by name expression (pytest -k)."),
    reports: Path = typer.Option(Path("reports"), "--reports", help="Folder holding the runs."),
    no_html: bool = typer.Option(False, "--no-html",
                                 help="Skip the rendered report (Allure HTML: no Java; charts, summary.html): "
                                      "summary.md, junit.xml and postmortems only; `drills report` renders the rest."),
    twin_state: Optional[str] = typer.Option(None, "--twin-state", help="Drill a running twin (its --state-dir)."),
    lanes: Optional[int] = typer.Option(None, "--lanes", min=1, envvar="DRILLS_LANES",
                                        help="Scenarios at once, each on a fresh twin (default 3, 1 above 120×; 1: one by one)."),
    random: Optional[str] = _RANDOM,
    replay: Optional[str] = typer.Option(None, "--replay", metavar="RUN",
                                         help="Repeat the targets run RUN picked (a run id under --reports)."),
    debug: bool = typer.Option(False, "--debug", help="pytest's own output and tracebacks."),
) -> None:
    """Run drills against a target and report; exit 0 iff every drill passed."""
    from drills.core.runner import RunOptions, run_drills
    from drills.core.signals import deferred_signals

    if not debug:  # the drills' own progress is the console; library chatter only with --debug
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger("urllib3").setLevel(logging.ERROR)  # connection retries: the error line says it
    result = run_drills(RunOptions(target=target, profile=profile, defects=list(defect), scale=scale, run_id=run_id,
                                   dry_run=dry_run, lang=lang, load_workers=load_workers, debug=debug,
                                   markexpr=markexpr, keyword=keyword, features=list(features or []),
                                   reports_root=reports, html=not no_html, twin_state=twin_state,
                                   lanes=lanes, random=random, replay=replay))
    with deferred_signals():  # the run is over: a late signal must not cut what it says short (it then exits 130)
        _say(result, reports, lang)
    raise typer.Exit(result.exit_code)


def _say(result, reports: Path, lang: str = "en") -> None:
    """The run's last words: the refusal lines, or the final table, the report path and what is left open — in
    the run's language (drills/report/messages.yaml)."""
    from rich.console import Console

    from drills.core.runner import final_table
    from drills.report.text import say

    if result.errors and result.exit_code == 2:  # nothing ran: the reasons are the whole story
        for line in dict.fromkeys(result.errors):  # one line per distinct problem
            print(f"drills: {line}", file=sys.stderr)
        return
    if result.records:
        console = Console(soft_wrap=False)
        console.print(final_table(result.records, width=console.width, lang=lang))
    if result.skipped:  # not failed, not hidden: what this site does not run, in one line; why, in the run folder
        print(skip_summary(result.skipped, result.run_dir, lang))
    seeds = sorted({str(r.details["random"].get("seed")) for r in result.records if r.details.get("random")})
    if seeds:  # what was hit is in the record; how to hit it again is one line here
        print(f"targets picked at random (seed {', '.join(seeds)}): `drills run --replay {result.run_dir.name}` "
              "repeats them")
    print(say("report", lang, path=result.run_dir))
    last = last_line(result.interrupted, result.open_entries, reports, result.run_dir, lang)
    if last:
        print(last, file=sys.stderr)


def revert(
    run_id: Optional[str] = typer.Option(None, "--run", help="Only this run's journal (default: every run)."),
    reports: Path = typer.Option(Path("reports"), "--reports", help="Folder holding the runs."),
    accept_new_host_key: bool = typer.Option(
        False, "--accept-new-host-key",
        help="Revert switch faults even when the switch now presents another SSH host key than at inject "
             "(only once you have checked it is the same switch, re-keyed)."),
    settle: Optional[str] = typer.Option(
        None, "--settle", help="How long each revert must hold (cluster time, e.g. 60 or \"2m\") before it is read "
                               "back; default: the run's safety.revert_settle_s (60 s)."),
    force: bool = typer.Option(
        False, "--force",
        help="Revert a run whose run-lock Lease is still current on its cluster (renewed by a process this host "
             "cannot see: another host, a pod). Only once you know that run is gone (its node lost, its pod "
             "killed): a live run would keep measuring a platform whose fault was undone under it. A run proven "
             "alive on this host is never reverted."),
) -> None:
    """Revert every fault still open in the journals (after a crash or SIGKILL), then verify each by reading
    it back after a settle period: a fault that is back (a node cordoned again, a port shut again) stays open.

    Refuses, leaving them open: faults of a run that is still alive — its process on this host, or its
    run-lock Lease still current on its cluster, whatever host it runs on (unless --force) — faults whose recorded cluster
    (UID, API URL) is not the one their recorded connection reaches now, and switch faults whose switch
    presents another SSH host key than when the fault was injected (unless --accept-new-host-key).
    """
    from drills.core.journal import raise_for_failures
    from drills.core.preflight import check_run_id
    from drills.core.runner import revert_runs

    check_run_id(run_id, reports, "--run")

    if not logging.getLogger().isEnabledFor(logging.DEBUG):  # the lines below say it all; --debug shows the logs
        logging.getLogger().setLevel(logging.CRITICAL)
    from drills.core.errors import InvalidProfile
    from drills.profile.base import parse_duration

    try:
        settle_s = None if settle is None else parse_duration(settle)
    except ValueError as err:
        raise InvalidProfile(f"--settle {err}") from None
    outcomes = revert_runs(reports, run_id, accept_new_host_key=accept_new_host_key, settle_s=settle_s,
                           force=force)
    if not outcomes:
        print("nothing to revert: no open faults in the journal")
    for outcome in outcomes:
        entry = outcome.entry
        if outcome.reverted and outcome.outcome == "reverted":
            print(f"reverted {entry.kind} on {entry.target} (run {entry.run_id})")
        elif outcome.reverted:
            print(f"closed {entry.kind} on {entry.target} (run {entry.run_id}): {outcome.error}")
    raise_for_failures(outcomes)  # one line for what stays open, exit 2


def skip_summary(skipped: list[dict], run_dir: Path, lang: str = "en") -> str:
    """One line for the Examples this target does not run: how many, which (their Example ids), the first
    reason, and where every reason is (skipped.jsonl, and junit.xml as skipped)."""
    from drills.report.text import say

    ids = [s["test"].split("[", 1)[1].rstrip("]") if "[" in s["test"] else s["test"] for s in skipped]
    reasons = list(dict.fromkeys(s["reason"] for s in skipped))
    more = say("skip_more", lang, n=len(reasons) - 1, s="s" if len(reasons) > 2 else "") if len(reasons) > 1 else ""
    noun = "Example" if len(skipped) == 1 else "Examples"
    return say("skip_summary", lang, n=len(skipped), noun=noun, ids=", ".join(ids), reason=reasons[0], more=more,
               path=run_dir / "skipped.jsonl")



def last_line(interrupted: str | None, open_entries: list, reports: Path, run_dir: Path,
              lang: str = "en") -> str | None:
    """The last line of every command that injects (run, accept): whether it was interrupted and what the journal —
    the truth, not what teardown meant to do — says is still in, with the command that reverts it."""
    from drills.report.text import say

    if not interrupted and not open_entries:
        return None
    if open_entries:
        left = ", ".join(f"{e.kind} {e.target}" for e in open_entries)
        said = say("still_open", lang, left=left, reports=reports, run=run_dir.name)
    else:
        said = say("all_reverted", lang)
    return say("interrupted", lang, signal=interrupted, said=said) if interrupted else say("open_only", lang, said=said)
