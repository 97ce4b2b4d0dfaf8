"""The CLI's commands are registered once per process, however often `main()` runs in it (the tests run it
in-process hundreds of times; typer builds every registered command on each call)."""

from drills import cli


def test_main_called_again_registers_nothing_more(capsys):
    cli.main(["validate", "--help"])
    commands, groups = len(cli.app.registered_commands), len(cli.app.registered_groups)
    for _ in range(3):
        cli.main(["validate", "--help"])
    capsys.readouterr()
    assert (len(cli.app.registered_commands), len(cli.app.registered_groups)) == (commands, groups)
    assert sorted(c.name for c in cli.app.registered_commands) == ["accept", "report", "revert", "run", "schedule",
                                                                   "validate"]
