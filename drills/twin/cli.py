"""`drills twin …` — run the embedded GPU-cluster twin in the foreground, stop it, list its defects.

`drills twin up` keeps its state (kubeconfig, twin.json, audit log, private keys) in a folder of its own
under `$XDG_STATE_HOME/gpu-drills/twins/` unless `--state-dir` names one (drills.twin.statedir), and
prints it; `drills run --twin-state DIR` drills that twin, `drills twin down [--state-dir DIR]` stops it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer

__all__ = ["twin_app"]

log = logging.getLogger(__name__)

twin_app = typer.Typer(no_args_is_help=True)


@twin_app.command("up")
def up(
    profile: str = typer.Option("minimal", "--profile", help="Profile name or YAML path."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0 = a free port)."),
    state_dir: Optional[Path] = typer.Option(
        None, "--state-dir", "--state",
        help="Where kubeconfig, twin.json, the audit log and the twin's private keys go (default: a new folder "
             "under $XDG_STATE_HOME/gpu-drills/twins, printed on start)."),
    scale: float = typer.Option(None, "--scale", help="Twin seconds per wall second (default: the profile's, else 60)."),
    defect: list[str] = typer.Option([], "--defect", help="Named defect to apply (repeatable)."),
    watch_history: int = typer.Option(20000, "--watch-history", hidden=True,
                                      help="Events kept per resource for watch resume (older → 410 Gone)."),
    parent_pid: int = typer.Option(None, "--parent-pid", hidden=True,
                                   help="Stop when this process is gone (set by drills run and the tests)."),
    tls: bool = typer.Option(False, "--tls", help="Also serve HTTPS with a service-account token, as a pod sees the "
                                                  "API (twin.json `tls`: url, ca, serviceaccount_dir)."),
) -> None:
    """Run the twin in the foreground until Ctrl-C (or SIGTERM, `drills twin down`)."""
    from drills.twin.runtime import run_twin
    from drills.twin.statedir import new_state_dir, prepare_state_dir

    state_dir = prepare_state_dir(state_dir) if state_dir is not None else new_state_dir()

    def ready(info: dict) -> None:
        kubeconfig = Path(info["kubeconfig"]).resolve()
        state = Path(info["state_dir"])
        typer.echo(f"twin ready at {info['url']} (profile {info['profile']}, scale {info['scale']:g}x)", err=True)
        typer.echo(f"  state: {state} (drill it: drills run --twin-state {state}; stop it: drills twin down "
                   f"--state-dir {state})", err=True)
        typer.echo(f"  export KUBECONFIG={kubeconfig}", err=True)
        if info.get("tls"):
            host, _, port = info["tls"]["url"].removeprefix("https://").rpartition(":")
            typer.echo(f"  in-cluster: KUBERNETES_SERVICE_HOST={host} KUBERNETES_SERVICE_PORT={port} "
                       f"DRILLS_SERVICEACCOUNT_DIR={info['tls']['serviceaccount_dir']}", err=True)
        typer.echo("  Ctrl-C to stop", err=True)
        typer.echo(info["url"])

    run_twin(state_dir, profile=profile, defects=defect, scale=scale, port=port, on_ready=ready,
             watch_history=watch_history, parent_pid=parent_pid, tls=tls)


@twin_app.command("down")
def down(
    state_dir: Optional[Path] = typer.Option(
        None, "--state-dir", "--state", help="The twin's state dir (default: the newest `drills twin up`'s)."),
    timeout: float = typer.Option(30.0, "--timeout", min=0.1, help="Seconds to wait for it to exit."),
) -> None:
    """Stop a running twin (SIGTERM, then wait until it has exited); its state dir stays."""
    from drills.twin.launcher import stop_running_twin
    from drills.twin.statedir import latest_state_dir

    state = state_dir if state_dir is not None else latest_state_dir()
    info = stop_running_twin(state, timeout)
    typer.echo(f"stopped the twin at {info.get('url')} (pid {info.get('pid')}); its state stays in {state}")


@twin_app.command("defects")
def defects() -> None:
    """List the named defects (`--defect NAME`) with what each breaks."""
    from drills.twin.profile import list_defects

    known = list_defects()
    width = max(len(name) for name, _ in known)
    for name, description in known:
        typer.echo(f"{name:<{width}}  {description}")


@twin_app.command("health")
def health(
    state_dir: Path = typer.Option(Path("reports/twin"), "--state-dir", help="The running twin's --state-dir."),
) -> None:
    """Is every component of a running twin healthy? Lists what broke (exit 1), with its traceback."""
    import requests

    from drills.core.errors import DrillError
    from drills.twin.launcher import read_twin_info

    info = read_twin_info(state_dir)
    if info is None:
        raise DrillError(f"no running twin in {state_dir} (start one with `drills twin up --state-dir {state_dir}`)")
    snapshot = requests.get(f"{info['url']}/twin/v1/health", timeout=10).json()
    if snapshot["ok"]:
        typer.echo(f"twin at {info['url']}: every component healthy")
        return
    typer.echo(f"twin at {info['url']}: {len(snapshot['broken'])} broken", err=True)
    for b in snapshot["broken"]:
        typer.echo(f"  {b['component']}: {b['error']}: {b['message']} at {b['where']} "
                   f"({b['count']}x, first on {b['key']})", err=True)
        typer.echo("    " + b["traceback"].rstrip().replace("\n", "\n    "), err=True)
    raise typer.Exit(1)
