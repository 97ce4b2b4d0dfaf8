"""`drills validate`: the read-only preflight (drills.validate.preflight) against the twin or a real context.

The twin (default) is started for the check like `drills run` starts one, and stopped after; a running
twin is checked with `--twin-state`. Exit 0 iff every check passed (warnings do not count), 2 otherwise.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from typing import Optional

import typer

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI loads this module for every command, the twin's too: preflight is imported when used
    from drills.validate.preflight import Check

__all__ = ["validate", "run_validation", "TWIN_SETTLE_S"]

log = logging.getLogger(__name__)

TWIN_SETTLE_S = 30.0  # wall seconds a twin gets to bring its workloads up before a "not yet" is a failure


def validate(
    target: str = typer.Option("twin", "--target", help="twin (the embedded twin) or a kubeconfig context."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Target profile YAML (default: built-in twin)."),
    twin_state: Optional[str] = typer.Option(None, "--twin-state", help="Check a running twin (its --state-dir)."),
    markexpr: Optional[str] = typer.Option(None, "-m", help="Only what these drills need (pytest -m expression)."),
) -> None:
    """Check, without changing anything, that the profile and the cluster are ready for the drills."""
    checks = run_validation(target=target, profile=profile, twin_state=twin_state, markexpr=markexpr)
    for check in checks:
        typer.echo(check.line())
    failed = [c for c in checks if c.blocking]
    typer.echo(f"{len(checks) - len(failed)}/{len(checks)} checks passed" +
               (f"; fix the {len(failed)} ✗ line(s) before the first run" if failed else ""))
    if failed:
        raise typer.Exit(2)


def run_validation(*, target: str = "twin", profile: str | None = None, twin_state: str | None = None,
                   markexpr: str | None = None) -> list[Check]:
    """Every check, in order: profile, cluster, switches, storage, tools. Starts (and stops) a twin when
    the target is the twin and none is given. Bad input — a profile that does not load, a refused target, a
    -m naming no tag — is the one DrillError line every command gives (exit 2), never a list of checks."""
    from drills.core.errors import DrillError
    from drills.core.grammar import check_flag
    from drills.core.selection import check_selection
    from drills.profile.model import load_target
    from drills.profile.safety import check_target
    from drills.validate.preflight import Check, profile_checks, selected_drills
    from drills.validate.site import site_checks

    check_selection(markexpr, None)
    check_flag("--target", "context", target)
    prof = load_target(profile)
    on_twin = check_target(target, prof, twin_state, source=profile)  # the rule every command applies
    drills = set(selected_drills(markexpr))
    if not drills:
        raise DrillError(f"-m {markexpr!r} selects no drill; use a drill's tag (e.g. training, network, storage)")
    checks = [Check("profile", True, f"{profile or 'built-in twin profile'} loads (target {prof.name}); "
                    f"drills: {', '.join(sorted(drills)) or 'none selected by -m'}"), *profile_checks(prof, drills),
              *site_checks(prof, drills, on_twin)]
    if not on_twin:
        return checks + _against(prof, drills, None, context=None if target == "twin" else target, settle_s=0.0)
    if twin_state:
        from drills.twin.launcher import read_twin_info

        info = read_twin_info(twin_state)
        if info is None:
            raise DrillError(f"--twin-state {twin_state}: no running twin there (no twin.json); start one with "
                             "`drills twin up --state-dir DIR`")
        return checks + _against(prof, drills, info, context=None, settle_s=TWIN_SETTLE_S)
    from drills.twin.launcher import start_twin

    state = tempfile.mkdtemp(prefix="drills-validate-twin-")
    twin = prof.cluster.twin
    try:
        try:
            handle = start_twin(state, profile=twin.profile, defects=twin.defects, scale=twin.scale)
        except DrillError as err:
            return checks + [Check("twin", False, str(err).splitlines()[0])]
        try:
            return checks + _against(prof, drills, handle.info, context=None, settle_s=TWIN_SETTLE_S)
        finally:
            handle.stop()
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _against(prof, drills: set[str], twin_info: dict | None, *, context: str | None, settle_s: float) -> list[Check]:
    from drills.core.errors import DrillError
    from drills.core.kube import USER_AGENT, connect
    from drills.validate.preflight import Check, cluster_checks, settle
    from drills.validate.local import storage_checks, switch_checks, tool_checks

    if not log.isEnabledFor(logging.DEBUG):  # connection retries: the check's line says it
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        cluster = connect(prof, twin_info=twin_info, context=context)
    except DrillError as err:
        out = [Check("Kubernetes API", False, str(err))]
        cluster = None
    else:
        cluster.api.user_agent = f"{USER_AGENT} validate"  # the audit log tells our reads from anyone's writes
        out = []
    try:
        if cluster is not None:
            out += settle(lambda: cluster_checks(cluster, prof, drills, twin_info), settle_s)
            from drills.validate.steady import steady_checks  # the drills' steady-state hypotheses, read only

            out += steady_checks(cluster, prof, drills, twin_info)  # once the cluster checks settled
        if "switch-uplink" in drills:
            out += switch_checks(prof, twin_info)
        if "storage-saturation" in drills:
            if cluster is None and prof.storage.saturation.mode == "job":
                out.append(Check("checkpoint store", False, "job mode needs the Kubernetes API (see above)"))
            else:
                out += storage_checks(cluster, prof, twin_info)
        out += tool_checks(drills)
        from drills.validate.monitoring import monitoring_checks  # detection: the managed stack's tools, or the site's

        out += monitoring_checks(prof)
    finally:
        if cluster is not None:
            cluster.close()
    return out
