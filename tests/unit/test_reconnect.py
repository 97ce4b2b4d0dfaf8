"""Which cluster and which process a journal entry belongs to, and what `revert_open` refuses because of it.

Clusters here are `Cluster` values with their identity already read (no API); the twin-backed
reconnects are in tests/e2e/test_reconnect.py and test_revert_in_cluster.py.
"""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from drills.core.clock import WallClock
from drills.core.errors import RevertFailed, TargetGone, UnsafeTarget
from drills.core.journal import Entry, Journal, RevertOutcome, RevertRegistry, raise_for_failures, revert_open
from drills.core.kube import Cluster, check_same_cluster

URL = "https://10.96.0.1:443"


def cluster(url: str = URL, uid: str | None = "uid-a", **kw) -> Cluster:
    return Cluster(api=None, clock=WallClock(), url=url, _uid=uid, **kw)


def test_describe_names_the_way_in_and_the_cluster_without_secrets():
    assert cluster(mode="in-cluster", name="in-cluster", serviceaccount_dir="/var/run/sa").describe() == {
        "mode": "in-cluster", "name": "in-cluster", "url": URL, "uid": "uid-a", "serviceaccount_dir": "/var/run/sa"}
    assert cluster(mode="kubeconfig", name="prod", kubeconfig="/home/me/.kube/config", context="prod").describe() == {
        "mode": "kubeconfig", "name": "prod", "url": URL, "uid": "uid-a", "kubeconfig": "/home/me/.kube/config",
        "context": "prod"}
    twin = cluster("http://127.0.0.1:4000", "uid-t", mode="twin", name="twin", twin_url="http://127.0.0.1:4000",
                   twin_state="/r/run/twin/1", kubeconfig="/r/run/twin/1/kubeconfig")
    assert twin.describe() == {"mode": "twin", "name": "twin", "url": "http://127.0.0.1:4000", "uid": "uid-t",
                               "twin_state": "/r/run/twin/1", "twin_url": "http://127.0.0.1:4000",
                               "kubeconfig": "/r/run/twin/1/kubeconfig"}


def test_same_cluster_passes():
    check_same_cluster({"url": URL + "/", "uid": "uid-a"}, cluster())


@pytest.mark.parametrize("reached, got", [
    (cluster(uid="uid-b"), f"UID uid-b at {URL}"),
    (cluster("https://10.0.0.9:6443"), "UID uid-a at https://10.0.0.9:6443"),  # same UID behind another API
    (cluster(uid=None), f"UID unknown at {URL}"),  # recorded a UID, cannot read one now: not provably the same
], ids=["other-uid", "other-url", "uid-unreadable"])
def test_another_cluster_is_one_unsafe_target_line(reached, got):
    with pytest.raises(UnsafeTarget) as err:
        check_same_cluster({"url": URL, "uid": "uid-a"}, reached, what="journal entry node-1")
    assert str(err.value) == (f"journal entry node-1 was made on cluster UID uid-a at {URL}; this connection reaches "
                              f"{got}: refusing to revert; reconnect to the right cluster")


def test_an_entry_without_a_uid_is_checked_by_url():
    check_same_cluster({"url": URL}, cluster(uid="anything"))
    with pytest.raises(UnsafeTarget):
        check_same_cluster({"url": URL}, cluster("https://elsewhere:443"))


def test_entry_records_this_process_and_knows_it_alive(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("step", "a", {}, connection={"mode": "kubeconfig", "url": URL, "uid": "uid-a"})
    (entry,) = journal.open_entries()
    assert (entry.pid, entry.host) == (os.getpid(), socket.gethostname()) and entry.pid_start > 0
    assert entry.connection == {"mode": "kubeconfig", "url": URL, "uid": "uid-a"}
    assert entry.run_alive() and entry.of_this_process()


def test_run_alive_is_false_for_a_dead_pid_a_reused_pid_another_host_or_boot(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("step", "a", {})
    (entry,) = journal.open_entries()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not _with(entry, pid=int(dead.stdout)).run_alive()
    assert not _with(entry, pid_start=entry.pid_start + 1).run_alive()  # our pid, but not the process that wrote it
    assert not _with(entry, host="another-host").run_alive()
    assert not _with(entry, boot_id="an-earlier-boot").run_alive()
    assert not _with(entry, pid=None, host=None, pid_start=None, boot_id=None).run_alive()  # an older entry


def test_connection_of_older_entries_comes_from_the_revert_spec(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("node", "n1", {"node": "n1", "cluster": {"url": URL, "kubeconfig": "/k", "context": "c"}})
    (entry,) = journal.open_entries()
    assert entry.connection == {"url": URL, "kubeconfig": "/k", "context": "c"}


def test_revert_refuses_a_live_run_and_leaves_its_journal_untouched(tmp_path):
    """Another process opens an entry and stays alive: `revert_open` must not touch it until it is gone."""
    path = tmp_path / "run-1" / "journal.jsonl"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from drills.core.journal import Journal
        Journal({str(path)!r}, run_id="run-1").open_entry("step", "a", {{}})
        print("open", flush=True)
        sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert child.stdout.readline().strip() == "open"
        before = path.read_bytes()
        reverted: list[str] = []
        (outcome,) = revert_open(path, resolver=RevertRegistry({"step": lambda e: reverted.append(e.id)}))
        assert outcome.refused and not outcome.reverted and reverted == []
        assert outcome.error == (f"run run-1 (pid {child.pid} on {socket.gethostname()}) is still running: it "
                                 "reverts its own faults; stop it first")
        assert path.read_bytes() == before
    finally:
        child.kill()
        child.wait()
    (outcome,) = revert_open(path, resolver=RevertRegistry({"step": lambda e: reverted.append(e.id)}))
    assert outcome.reverted and reverted == [outcome.entry.id]


def test_target_check_refuses_or_closes_an_ended_twin(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("step", "a", {}, connection={"mode": "kubeconfig", "url": URL})
    journal.open_entry("step", "b", {}, connection={"mode": "twin", "twin_state": "/gone"})
    journal.open_entry("step", "c", {})  # no cluster: nothing to check

    def check(entry):
        if entry.target == "a":
            raise UnsafeTarget("another cluster")
        if entry.target == "b":
            raise TargetGone("the twin ended")

    reverted: list[str] = []
    outcomes = revert_open(journal, resolver=RevertRegistry({"step": lambda e: reverted.append(e.target)}),
                           check_target=check)
    assert [(o.entry.target, o.reverted, o.refused, o.outcome) for o in outcomes] == [
        ("c", True, False, "reverted"), ("b", True, False, "target-gone"), ("a", False, True, "reverted")]
    assert reverted == ["c"]
    assert [(e.target, e.outcome) for e in journal.entries()] == [("a", None), ("b", "target-gone"), ("c", "reverted")]
    assert journal.entries()[0].errors == ()  # a refusal is not a failed attempt


def test_refusals_are_one_unsafe_target_line_failures_win(tmp_path):
    journal = Journal.for_run(tmp_path, "run-1")
    journal.open_entry("step", "a", {})
    (entry,) = journal.open_entries()
    refused = [RevertOutcome(entry, False, "run r (pid 1 on h) is still running", refused=True)] * 2
    with pytest.raises(UnsafeTarget) as err:
        raise_for_failures(refused)
    assert str(err.value) == "run r (pid 1 on h) is still running"
    with pytest.raises(RevertFailed) as err:
        raise_for_failures([*refused, RevertOutcome(entry, False, "boom")])
    assert "step on a: boom" in str(err.value) and "also refused: run r (pid 1 on h) is still running" in str(err.value)


def _with(entry: Entry, **changes) -> Entry:
    from dataclasses import replace

    return replace(entry, **changes)
