"""`drills` — the command line: run | twin | report | revert | schedule | validate | accept.

Every DrillError ends as one line on stderr and a non-zero exit; `--debug` shows the traceback.
"""

from __future__ import annotations

import logging
import signal
import sys

import typer

from drills.core.errors import DrillError
from drills.core.log import setup_logging
from drills.core.signals import interrupt_caused

__all__ = ["app", "main", "os_error_line"]

log = logging.getLogger(__name__)

app = typer.Typer(
    help="Chaos and acceptance drills for AI compute clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_state = {"debug": False}


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logs.")) -> None:
    _state["debug"] = debug
    setup_logging(debug)


def _register() -> None:
    """Sub-apps live next to what they drive; the CLI only wires them in (once per process: typer builds every
    registered command on each call, so a second registration made each later `main()` slower than the last)."""
    if app.registered_commands:
        return
    from drills.twin.cli import twin_app

    app.add_typer(twin_app, name="twin", help="Run and inspect the embedded GPU-cluster twin.")
    from drills.cli.report import report

    app.command("report")(report)
    from drills.cli.run import revert, run

    app.command("run")(run)
    app.command("revert")(revert)
    from drills.cli.schedule import schedule

    app.command("schedule")(schedule)
    from drills.cli.validate import validate

    app.command("validate")(validate)
    from drills.cli.accept import accept

    app.command("accept")(accept)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the exit code (130 once interrupted: a late signal while the process exits changes nothing)."""
    rc = _main(argv)
    if rc == 130:  # the run has stopped and torn down; a further Ctrl-C must not turn 130 into a traceback or -2
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    return rc


def _main(argv: list[str] | None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        _register()
        from drills.cli.run import optional_values

        rc = app(args=optional_values(argv if argv is not None else sys.argv[1:]), standalone_mode=False)
        if isinstance(rc, int):  # standalone_mode=False: click returns typer.Exit(code)'s code
            return rc
    except DrillError as err:
        if debug:
            log.exception("drills failed")
        print(f"drills: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("drills: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except OSError as err:  # disk full, a folder not writable: the file and what to do, not a traceback
        if debug:
            log.exception("drills failed")
        print(f"drills: {os_error_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # click usage errors and the unexpected: still one line unless --debug
        click = _click_exceptions()
        if type(err).__name__ == "NoArgsIsHelpError":  # help is already on screen
            return 2
        if isinstance(err, click.ClickException):  # one line, like every other refusal
            message = " ".join(err.format_message().split())
            hint = f" (see `drills {err.ctx.info_name} --help`)" if getattr(err, "ctx", None) is not None else ""
            print(f"drills: {message}{hint}", file=sys.stderr)
            return err.exit_code
        if isinstance(err, (typer.Abort, getattr(click, "Abort", typer.Abort))):
            return 130
        if interrupt_caused(err):
            print("drills: interrupted", file=sys.stderr)
            return 130
        if debug:
            raise
        print(f"drills: unexpected error: {type(err).__name__}: {err} (re-run with --debug for the traceback)",
              file=sys.stderr)
        return 1
    return 0


def os_error_line(err: OSError) -> str:
    """One line for a filesystem error: which file, what the system said, what to do."""
    import errno

    where = f" writing {err.filename}" if err.filename else ""
    advice = {errno.ENOSPC: "free some space or pass --reports on another disk",
              errno.EDQUOT: "free some space or pass --reports on another disk",
              errno.EACCES: "fix its permissions or pass another --reports",
              errno.EROFS: "pass a --reports folder on a writable file system"}.get(err.errno or 0,
                                                                                  "check the path and retry")
    return f"{err.strerror or type(err).__name__}{where}; {advice}"


def _click_exceptions():
    """Typer ≥ 0.17 vendors click as typer._click; its exceptions are the ones raised."""
    try:
        from typer._click import exceptions  # type: ignore[import-not-found]
    except ImportError:
        from click import exceptions
    return exceptions


if __name__ == "__main__":
    sys.exit(main())
