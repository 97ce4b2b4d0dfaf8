"""`reconnect` goes back to the cluster a run drilled, or refuses (DESIGN §6), against real twins; and
`drills revert` refuses a switch that presents another SSH host key than when its fault was injected.

Issue 13's case: a profile without a context, then `kubectl config use-context other` — the revert
must still reach the first cluster, because the context was pinned when the run connected.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests
import yaml

from drills.core.errors import TargetGone, UnsafeTarget
from drills.core.journal import open_entries
from drills.core.kube import connect_kubeconfig, connect_twin, reconnect
from drills.faults.switch.login import host_key_name
from drills.profile.model import SwitchConfig
from drills.twin.fabric import leaf_spine, start_fabric
from drills.twin.fabric.cli import SwitchCli
from drills.twin.fabric.ssh_server import SwitchServer
from drills.twin.fabric.state import ensure_key
from tests.e2e.drill_helpers import REPO, drills

pytestmark = pytest.mark.slow


def test_kubeconfig_context_is_pinned_and_another_cluster_refused(twin_factory, tmp_path, monkeypatch):
    first, second = twin_factory(scale=600.0), twin_factory(scale=600.0)
    path = tmp_path / "config"
    _kubeconfig(path, {"first": first.url, "second": second.url}, current="first")
    monkeypatch.setenv("KUBECONFIG", str(path))
    run = connect_kubeconfig()  # no context given: the current one, pinned now
    described = run.describe()
    run.close()
    assert described == {"mode": "kubeconfig", "name": "first", "url": first.url, "uid": _uid(first),
                         "kubeconfig": str(path), "context": "first"}

    _kubeconfig(path, {"first": first.url, "second": second.url}, current="second")  # kubectl config use-context
    monkeypatch.delenv("KUBECONFIG")  # and the revert runs without the run's environment
    back = reconnect(described)
    assert (back.url, back.uid) == (first.url, _uid(first))
    back.close()

    _kubeconfig(path, {"first": second.url}, current="first")  # the same name now leads elsewhere
    with pytest.raises(UnsafeTarget) as err:
        reconnect(described, entry_id="node-1")
    assert str(err.value) == (f"journal entry node-1 was made on cluster UID {_uid(first)} at {first.url}; this "
                              f"connection reaches UID {_uid(second)} at {second.url}: refusing to revert; "
                              "reconnect to the right cluster")


def test_twin_is_found_by_its_state_dir_and_an_ended_twin_is_gone(twin_factory):
    twin = twin_factory(scale=600.0)
    run = connect_twin(twin.kubeconfig, twin.url, state_dir=str(twin.state_dir))
    described = run.describe()
    run.close()
    assert described["mode"] == "twin" and described["twin_state"] == str(twin.state_dir)
    assert described["uid"] == _uid(twin)
    back = reconnect(described)
    assert back.uid == _uid(twin)
    back.close()
    twin.stop()
    with pytest.raises(TargetGone):
        reconnect(described)


def _kubeconfig(path, servers: dict[str, str], current: str) -> None:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in servers]}))


def _uid(twin) -> str:
    return requests.get(f"{twin.url}/api/v1/namespaces/kube-system", timeout=5).json()["metadata"]["uid"]


# -- a switch's identity is its SSH host key -------------------------------------------------------
# A bare fabric has no cluster, so no cluster clock: its entries' revert is read back after a settle period of
# wall time (60 s by default); these tests are about identity, so the port is read back at once.
NO_SETTLE = ("--settle", "0")

@pytest.fixture
def fab(tmp_path):
    handle = start_fabric(leaf_spine(leaves=1, spines=2, downlinks=1, dialects=("sonic",)), tmp_path / "fabric")
    yield handle
    handle.stop()


@pytest.mark.parametrize("past_known_hosts", ["known_hosts updated", "accept_unknown_host_keys"])
def test_revert_refuses_a_switch_that_presents_another_host_key(fab, tmp_path, past_known_hosts):
    """A run shut an uplink and was SIGKILLed; then another device answers at the switch's address (its
    key got past known_hosts: someone ran ssh-keyscan, or the inventory accepts unknown keys). `drills
    revert` refuses it in one line, exit 2, nothing sent, the entry left open; `--accept-new-host-key`
    (the operator's word that it is the same switch, re-keyed) reverts it."""
    accept = past_known_hosts == "accept_unknown_host_keys"
    known = tmp_path / "known_hosts"
    known.write_text("" if accept else fab.known_hosts.read_text())
    entry = fab.entry("leaf1")
    sw = SwitchConfig.model_validate({**entry, "known_hosts": str(known), "password_env": None})
    uplink = entry["uplinks"][0]
    reports = tmp_path / "reports"
    _inject_and_die(sw, uplink, reports / "run-1" / "journal.jsonl", accept)
    assert not fab.fabric.iface_state("leaf1", uplink).admin
    [opened] = open_entries(reports)
    recorded = opened.record["host_key"]
    assert recorded == f"ssh-ed25519 {fab.servers['leaf1'].host_key.fingerprint}"

    other = _another_device_at(fab, "leaf1", tmp_path / "other_key")  # same host and port, new key and CLI
    if not accept:
        known.write_text(f"{host_key_name(sw)} {other.host_key.get_name()} {other.host_key.get_base64()}\n")
    done = drills("revert", "--reports", str(reports), *NO_SETTLE)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line == (f"drills: switch leaf1 (127.0.0.1:{sw.port}) now presents host key ssh-ed25519 "
                    f"{other.host_key.fingerprint}, not {recorded} recorded when the fault was injected: another "
                    "device answers at that address; nothing was sent to it. Check the switch; if it is the same "
                    "one re-keyed, run `drills revert --accept-new-host-key`")
    assert other.cli.command_log() == [] and not fab.fabric.iface_state("leaf1", uplink).admin
    assert [e.id for e in open_entries(reports)] == [opened.id]

    done = drills("revert", "--reports", str(reports), "--accept-new-host-key", *NO_SETTLE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fab.fabric.iface_state("leaf1", uplink).admin and open_entries(reports) == []


def test_revert_with_the_same_host_key_goes_ahead(fab, tmp_path):
    """The check is not a blanket refusal: the switch that took the fault, same key, is reverted."""
    entry = fab.entry("leaf1")
    sw = SwitchConfig.model_validate({**entry, "password_env": None})
    uplink = entry["uplinks"][0]
    reports = tmp_path / "reports"
    _inject_and_die(sw, uplink, reports / "run-1" / "journal.jsonl", False)
    done = drills("revert", "--reports", str(reports), *NO_SETTLE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"reverted switch-uplink on leaf1:{uplink} (run run-1)"
    assert fab.fabric.iface_state("leaf1", uplink).admin and open_entries(reports) == []


def _inject_and_die(sw: SwitchConfig, uplink: str, journal: Path, accept: bool) -> None:
    """A real run's process: entry, shutdown, record, then SIGKILL (nothing of it reverts)."""
    script = textwrap.dedent("""
        import json, os, signal, sys
        from drills.profile.model import SwitchConfig
        from drills.faults.switch import uplink as switch
        from drills.core.journal import Journal
        sw = SwitchConfig.model_validate(json.loads(sys.argv[1]))
        iface, accept = sys.argv[3], sys.argv[4] == "1"
        journal = Journal(sys.argv[2])
        entry = journal.open_entry(switch.KIND, f"{sw.name}:{iface}",
                                   switch.revert_spec(sw, iface, accept_unknown_host_keys=accept))
        record = switch.inject_port(sw, iface, accept_unknown_host_keys=accept)
        journal.mark_injected(entry, record.to_dict())
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script, sw.model_dump_json(), str(journal), uplink,
                           "1" if accept else "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def _another_device_at(fab, name: str, key_path: Path) -> SwitchServer:
    """Stop switch `name`'s SSH server and start another device on its port: a fresh host key and CLI
    (over the same links, so a revert that went through would show on the port)."""
    old = fab.servers[name]
    old.stop()
    cli = SwitchCli(fab.fabric, name, old.cli.dialect)
    server = SwitchServer(cli, ensure_key(key_path), [ensure_key(fab.key_file)], cli.username, host=old.host,
                          port=old.port)
    server.start()
    fab.servers[name] = server
    return server
