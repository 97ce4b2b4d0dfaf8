"""`drills twin …` — run the embedded GPU-cluster twin in the foreground."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

__all__ = ["twin_app"]

log = logging.getLogger(__name__)

twin_app = typer.Typer(no_args_is_help=True)


@twin_app.command("up")
def up(
    profile: str = typer.Option("minimal", "--profile", help="Profile name or YAML path."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0 = a free port)."),
    state_dir: Path = typer.Option(Path("reports/twin"), "--state-dir", help="Where kubeconfig, twin.json and the audit log go."),
    scale: float = typer.Option(None, "--scale", help="Twin seconds per wall second (default: the profile's, else 60)."),
    defect: list[str] = typer.Option([], "--defect", help="Named defect to apply (repeatable)."),
    watch_history: int = typer.Option(20000, "--watch-history", hidden=True,
                                      help="Events kept per resource for watch resume (older → 410 Gone)."),
    parent_pid: int = typer.Option(None, "--parent-pid", hidden=True,
                                   help="Stop when this process is gone (set by drills run and the tests)."),
    tls: bool = typer.Option(False, "--tls", help="Also serve HTTPS with a service-account token, as a pod sees the "
                                                  "API (twin.json `tls`: url, ca, serviceaccount_dir)."),
) -> None:
    """Run the twin in the foreground until Ctrl-C (or SIGTERM)."""
    from drills.twin.runtime import run_twin

    def ready(info: dict) -> None:
        kubeconfig = Path(info["kubeconfig"]).resolve()
        typer.echo(f"twin ready at {info['url']} (profile {info['profile']}, scale {info['scale']:g}x)", err=True)
        typer.echo(f"  export KUBECONFIG={kubeconfig}", err=True)
        if info.get("tls"):
            host, _, port = info["tls"]["url"].removeprefix("https://").rpartition(":")
            typer.echo(f"  in-cluster: KUBERNETES_SERVICE_HOST={host} KUBERNETES_SERVICE_PORT={port} "
                       f"DRILLS_SERVICEACCOUNT_DIR={info['tls']['serviceaccount_dir']}", err=True)
        typer.echo("  Ctrl-C to stop", err=True)
        typer.echo(info["url"])

    run_twin(state_dir, profile=profile, defects=defect, scale=scale, port=port, on_ready=ready,
             watch_history=watch_history, parent_pid=parent_pid, tls=tls)


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
