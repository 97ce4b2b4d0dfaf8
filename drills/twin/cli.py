"""`drills twin …` — placeholder until the API server lands."""

import typer

__all__ = ["twin_app"]

twin_app = typer.Typer(no_args_is_help=True)


@twin_app.command("up")
def up() -> None:
    """Run the twin in the foreground."""
    raise typer.Exit(1)
