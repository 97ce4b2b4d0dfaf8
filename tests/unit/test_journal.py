"""The revert journal: durable before injection, open until reverted, replayable after SIGKILL.

The fault here is a test-local kind ("flag-file": a file that says "broken") with a test-local
reverter that writes "ok" back: that exercises the journal, not a mock of our code.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drills.core.errors import RevertFailed
from drills.core.journal import (
    JOURNAL_NAME, Journal, RevertRegistry, find_journals, open_entries, raise_for_failures, revert_open,
)


def flip_back(entry):
    Path(entry.revert_spec["path"]).write_text(entry.revert_spec["restore"])


def inject_flag(journal: Journal, flag: Path) -> str:
    entry_id = journal.open_entry("flag-file", str(flag), {"path": str(flag), "restore": "ok"})
    flag.write_text("broken")
    journal.mark_injected(entry_id, {"wrote": "broken"})
    return entry_id


@pytest.fixture
def registry():
    return RevertRegistry({"flag-file": flip_back})


def test_entry_is_on_disk_before_the_fault(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    entry_id = journal.open_entry("flag-file", "f", {"path": "x", "restore": "ok"})
    # A second reader (another process after a crash) sees the entry straight from the file.
    lines = [json.loads(line) for line in (tmp_path / "run-1" / JOURNAL_NAME).read_text().splitlines()]
    assert lines[0]["op"] == "open" and lines[0]["id"] == entry_id and lines[0]["revert"] == {"path": "x", "restore": "ok"}
    assert lines[0]["run_id"] == "run-1"
    [entry] = Journal(tmp_path / "run-1" / JOURNAL_NAME).open_entries()
    assert (entry.kind, entry.target, entry.injected, entry.run_id) == ("flag-file", "f", False, "run-1")


def test_entry_lifecycle(tmp_path, registry):
    journal = Journal.for_run(tmp_path, "run-1")
    flag = tmp_path / "flag"
    entry_id = inject_flag(journal, flag)
    [entry] = journal.open_entries()
    assert entry.injected and entry.record == {"wrote": "broken"}
    journal.close_entry(entry_id, "reverted")
    assert journal.open_entries() == []
    [closed] = journal.entries()
    assert closed.closed and closed.outcome == "reverted"


def test_revert_open_reverts_closes_and_is_idempotent(tmp_path, registry):
    journal = Journal.for_run(tmp_path, "run-1")
    flag = tmp_path / "flag"
    inject_flag(journal, flag)
    [outcome] = revert_open(journal, resolver=registry)
    assert outcome.reverted and flag.read_text() == "ok"
    assert journal.open_entries() == []
    assert revert_open(journal, resolver=registry) == []


def test_revert_open_undoes_newest_first(tmp_path):
    order = []
    journal = Journal.for_run(tmp_path, "run-1")
    first = journal.open_entry("step", "a", {})
    second = journal.open_entry("step", "b", {})
    revert_open(journal, resolver=RevertRegistry({"step": lambda e: order.append(e.id)}))
    assert order == [second, first]


def test_failed_revert_stays_open_with_its_error(tmp_path, registry):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("flag-file", "f", {"path": str(tmp_path / "no-such-dir" / "flag"), "restore": "ok"})
    [outcome] = revert_open(journal, resolver=registry)
    assert not outcome.reverted and "No such file" in outcome.error
    [entry] = journal.open_entries()
    assert len(entry.errors) == 1
    with pytest.raises(RevertFailed, match=r"1 of 1 open faults could not be reverted \(flag-file on f: "):
        raise_for_failures([outcome])
    (tmp_path / "no-such-dir").mkdir()
    [retry] = revert_open(journal, resolver=registry)
    assert retry.reverted and journal.open_entries() == []


def test_unknown_kind_fails_cleanly_and_a_journal_line_never_names_code(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("mystery", "t", {})
    outcomes = revert_open(journal, resolver=RevertRegistry())
    assert "no reverter for fault kind 'mystery'" in outcomes[0].error
    assert len(journal.open_entries()) == 1
    assert '"reverter"' not in journal.path.read_text().split("\n")[0]  # the open line names no code


def test_torn_last_line_is_tolerated_and_not_glued_to_the_next(tmp_path, registry):
    journal = Journal.for_run(tmp_path, "run-1")
    flag = tmp_path / "flag"
    inject_flag(journal, flag)
    with open(journal.path, "ab") as fh:
        fh.write(b'{"op":"open","id":"flag-file-torn","kind":"fl')  # the crash happened mid-write
    assert len(Journal(journal.path).open_entries()) == 1
    later = Journal(journal.path)
    flag2 = tmp_path / "flag2"
    inject_flag(later, flag2)
    assert [e.target for e in Journal(journal.path).open_entries()] == [str(flag), str(flag2)]
    assert all(o.reverted for o in revert_open(journal.path, resolver=registry))
    assert flag.read_text() == flag2.read_text() == "ok"


def test_revert_across_runs_and_by_run_id(tmp_path, registry):
    flags = {}
    for run in ("run-1", "run-2", "run-3"):
        flags[run] = tmp_path / f"flag-{run}"
        journal = Journal.for_run(tmp_path, run)
        entry_id = inject_flag(journal, flags[run])
        if run == "run-3":
            journal.close_entry(entry_id)
            flags[run].write_text("ok")
    (tmp_path / "latest").symlink_to(tmp_path / "run-2")
    assert len(find_journals(tmp_path)) == 3
    assert [e.run_id for e in open_entries(tmp_path)] == ["run-1", "run-2"]
    [only] = revert_open(tmp_path, run_id="run-2", resolver=registry)
    assert only.entry.run_id == "run-2" and flags["run-1"].read_text() == "broken"
    rest = revert_open(tmp_path, resolver=registry)
    assert [o.entry.run_id for o in rest] == ["run-1"] and flags["run-1"].read_text() == "ok"
    assert open_entries(tmp_path) == []
    assert revert_open(tmp_path / "no-such-reports-dir", resolver=registry) == []


def test_revert_spec_must_be_json(tmp_path):
    with pytest.raises(TypeError):
        Journal.for_run(tmp_path, "run-1").open_entry("flag-file", "f", {"path": object()})


CRASHER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from drills.core.journal import Journal
    journal, flag = Journal(sys.argv[1]), Path(sys.argv[2])
    journal.open_entry("flag-file", str(flag), {"path": str(flag), "restore": "ok"})
    flag.write_text("broken")
    print("injected", flush=True)
    time.sleep(600)
""")


def test_sigkill_after_injection_then_revert_open_closes_it(tmp_path, registry):
    journal_path = tmp_path / "run-9" / JOURNAL_NAME
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", CRASHER, str(journal_path), str(flag)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout.readline().strip() == "injected"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert flag.read_text() == "broken"
    [outcome] = revert_open(tmp_path, resolver=registry)
    assert outcome.reverted and outcome.entry.run_id == "run-9" and not outcome.entry.injected
    assert flag.read_text() == "ok"
    assert open_entries(tmp_path) == [] and revert_open(tmp_path, resolver=registry) == []
