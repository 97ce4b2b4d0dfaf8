"""The switch-uplink injector against the twin's real SSH switches (one per dialect), both transports."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from datetime import datetime

from drills.profile.model import SwitchConfig
from drills.core.errors import CheckFailed, InjectionFailed, RevertFailed, TargetUnreachable
from drills.faults.switch import uplink as switch
from drills.faults.switch.session import SwitchSession
from drills.core.journal import open_entries, revert_open
from drills.faults import reverter
from drills.twin.fabric import leaf_spine, start_fabric
from drills.twin.fabric.state import ensure_key

PASSWORD = "Tw1n-sw1tch-pa55"  # the twin's password; tests prove it never leaks
PASSWORD_ENV = "DRILLS_TEST_SWITCH_PASSWORD"
REPO = Path(__file__).resolve().parents[2]

# (switch, client dialect, uplink): one twin leaf per dialect.
DIALECTS = ("sonic", "nxos", "nvue", "eos", "onyx")
CASES = [("leaf1", "sonic", "Ethernet8"), ("leaf2", "nxos", "Ethernet1/2"), ("leaf4", "eos", "Ethernet3/1"),
         ("leaf3", "cumulus", "swp2"), ("leaf5", "onyx", "Eth1/3")]


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    handle = start_fabric(leaf_spine(leaves=5, spines=2, downlinks=1, dialects=DIALECTS), tmp_path_factory.mktemp("fabric"),
                          password=PASSWORD, password_env=PASSWORD_ENV)
    yield handle
    handle.stop()


@pytest.fixture
def events(fab):
    seen = []
    off = fab.fabric.on_change(seen.append)
    yield seen
    off()
    assert all(fab.fabric.redundancy(leaf).up == 2 for leaf in fab.fabric.leaves()), "a test left an uplink shut"


def cfg(fab, name, **update) -> SwitchConfig:
    """The switch as the profile would load it from the twin's inventory (switches.yaml)."""
    entries = yaml.safe_load(fab.inventory_file.read_text())["switches"]
    entry = next(e for e in entries if e["name"] == name)
    return SwitchConfig.model_validate({**entry, **update})


def admin(fab, name, iface) -> bool:
    return fab.fabric.iface_state(name, iface).admin


@pytest.mark.parametrize("transport", ["exec", "shell"])
@pytest.mark.parametrize("name, dialect, iface", CASES)
def test_inject_verify_revert(fab, events, name, dialect, iface, transport):
    sw = cfg(fab, name, dialect=dialect)
    record = switch.inject_port(sw, iface, transport)
    assert not admin(fab, name, iface) and fab.fabric.redundancy(name).up == 1
    assert switch.show_state(sw, iface, transport) == switch.PortState("down", "down")
    assert (record.switch, record.interface, record.admin_before, record.admin_after, record.transport) == \
        (name, iface, "up", "down", transport)
    assert switch.UplinkRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    # the stamp is the sending of the line that applies the change (the dialect's `takes_effect`): the switch's own
    # change lies inside the window that starts there (ms of the ISO stamp aside), never before it
    stamped = datetime.fromisoformat(record.injected_at.replace("Z", "+00:00")).timestamp()
    assert stamped <= events[0].at <= stamped + record.stamp_window_s + 0.001, (record, events[0])

    assert switch.revert_port(sw, record) == switch.PortState("up", "up")
    assert admin(fab, name, iface) and switch.show_state(sw, iface, transport).admin_up
    assert switch.revert_port(sw, record, "exec" if transport == "shell" else "shell").admin_up  # idempotent
    assert [(e.switch, e.iface, e.admin) for e in events] == [(name, iface, False), (name, iface, True)]


def test_injecting_a_port_already_down_is_refused(fab, events):
    sw = cfg(fab, "leaf1")
    record = switch.inject_port(sw, "Ethernet8")
    try:
        with pytest.raises(InjectionFailed, match="Ethernet8 is already admin down: refusing"):
            switch.inject_port(sw, "Ethernet8")
    finally:
        switch.revert_port(sw, record)


def test_nvue_refuses_when_someone_else_has_pending_changes(fab, events):
    fab.cli("leaf3").stage("swp1", False)
    try:
        with pytest.raises(InjectionFailed, match=r"leaf3 has pending NVUE changes .*nv config diff"):
            switch.inject_port(cfg(fab, "leaf3"), "swp2")
        assert admin(fab, "leaf3", "swp1") and admin(fab, "leaf3", "swp2") and events == []
    finally:
        fab.cli("leaf3").discard()


@pytest.mark.parametrize("crash_before_marked", [False, True])
def test_journal_reverts_after_sigkill(fab, events, tmp_path, crash_before_marked):
    """A real process opens the entry, shuts the port and is SIGKILLed; `revert_open` brings it up."""
    sw = cfg(fab, "leaf2")
    journal = tmp_path / "run-1" / "journal.jsonl"
    script = textwrap.dedent(f"""
        import json, os, signal, sys
        from drills.profile.model import SwitchConfig
        from drills.faults.switch import uplink as switch
        from drills.core.journal import Journal
        sw = SwitchConfig.model_validate(json.loads(sys.argv[1]))
        journal = Journal(sys.argv[2])
        entry = journal.open_entry(switch.KIND, sw.name + "/Ethernet1/3",
                                   switch.revert_spec(sw, "Ethernet1/3", "shell"))
        record = switch.inject_port(sw, "Ethernet1/3", "shell")
        if not {crash_before_marked}:
            journal.mark_injected(entry, record.to_dict())
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script, sw.model_dump_json(), str(journal)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not admin(fab, "leaf2", "Ethernet1/3")
    [entry] = open_entries(tmp_path)
    assert entry.injected is not crash_before_marked
    assert PASSWORD not in journal.read_text() and "password_env" in journal.read_text()

    outcomes = revert_open(tmp_path, resolver=reverter)  # every kind reverts through drills.faults.revert_entry
    assert [o.reverted for o in outcomes] == [True] and admin(fab, "leaf2", "Ethernet1/3")
    assert open_entries(tmp_path) == [] and revert_open(tmp_path) == []


def test_unknown_host_key_is_refused(fab, events, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    sw = cfg(fab, "leaf1", known_hosts=str(known))
    with pytest.raises(InjectionFailed) as err:
        switch.inject_port(sw, "Ethernet8")
    port = fab.port("leaf1")
    assert str(err.value) == (f"switch leaf1: host key for [127.0.0.1]:{port} is not in known_hosts {known}: "
                              "add it (ssh-keyscan) or set accept_unknown_host_keys: true")
    assert admin(fab, "leaf1", "Ethernet8") and events == []


def test_changed_host_key_is_refused_even_when_accepting_unknown_keys(fab, events, tmp_path):
    lines = fab.known_hosts.read_text().splitlines()
    leaf2_key = next(ln for ln in lines if ln.startswith(f"[127.0.0.1]:{fab.port('leaf2')} ")).split(" ", 1)[1]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{fab.port('leaf1')} {leaf2_key}\n")
    with pytest.raises(InjectionFailed, match=r"host key for \[127.0.0.1\]:\d+ does not match known_hosts .*intercepted"):
        switch.inject_port(cfg(fab, "leaf1", known_hosts=str(known)), "Ethernet8", accept_unknown_host_keys=True)


def test_accept_unknown_host_keys_works_loudly(fab, events, tmp_path, caplog):
    known = tmp_path / "known_hosts"
    known.write_text("")
    sw = cfg(fab, "leaf1", known_hosts=str(known))
    with caplog.at_level(logging.WARNING, logger="drills.faults"):
        record = switch.inject_port(sw, "Ethernet8", accept_unknown_host_keys=True)
        switch.revert_port(sw, record, accept_unknown_host_keys=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("accept_unknown_host_keys is ON" in w for w in warnings)
    assert any("ACCEPTED UNKNOWN host key ssh-ed25519 SHA256:" in w for w in warnings)
    assert known.read_text() == ""  # accepted for the session only, never written
    assert [e.admin for e in events] == [False, True]


def test_wrong_key_is_an_auth_error_line(fab, events, tmp_path):
    ensure_key(tmp_path / "other_ed25519")
    sw = cfg(fab, "leaf3", key_file=str(tmp_path / "other_ed25519"), password_env=None)
    with pytest.raises(InjectionFailed) as err:
        switch.inject_port(sw, "swp2")
    assert str(err.value) == (f"switch leaf3 (127.0.0.1:{fab.port('leaf3')}): authentication as cumulus with key "
                              f"{tmp_path / 'other_ed25519'} failed: check username, key_file / password_env and "
                              "the switch's authorized keys")
    with pytest.raises(RevertFailed, match="authentication as cumulus"):
        switch.revert_port(sw, "swp2")
    assert events == []


@pytest.mark.parametrize("transport", ["exec", "shell"])
@pytest.mark.parametrize("name, dialect, says", [
    ("leaf1", "sonic", "Invalid interface name Ethernet99"),
    ("leaf2", "nxos", "% Invalid range at '^' marker."),
    ("leaf3", "cumulus", "Error: The requested item does not exist."),
])
def test_unknown_interface_is_one_line_and_changes_nothing(fab, events, name, dialect, says, transport):
    iface = {"sonic": "Ethernet99", "nxos": "Ethernet1/99", "cumulus": "swp99"}[dialect]
    with pytest.raises(InjectionFailed) as err:
        switch.inject_port(cfg(fab, name), iface, transport)
    assert str(err.value) == (f"switch {name}: interface {iface} does not exist (the switch says: {says!r}); "
                              "check the uplinks in the switch inventory")
    with pytest.raises(CheckFailed, match="does not exist"):
        switch.show_state(cfg(fab, name), iface, transport)
    assert events == []


def test_wrong_dialect_is_named(fab, events):
    with pytest.raises(Exception, match="interface name 'Ethernet8' is not a nxos interface name"):
        cfg(fab, "leaf1", dialect="nxos")  # the inventory's uplinks are refused at load
    with pytest.raises(InjectionFailed, match=r"switch leaf1: `show interfaces Ethernet8` failed: "
                                              r".*No such command.*is dialect eos right for this switch\?"):
        switch.inject_port(cfg(fab, "leaf1", dialect="eos"), "Ethernet8")
    with pytest.raises(Exception, match="switch dialect 'junos' is not known"):
        switch.inject_port(cfg(fab, "leaf1", dialect="junos"), "Ethernet8")
    assert events == []


def test_failed_verification_brings_the_port_back_up(fab, events, tmp_path):
    """A dialect whose `shutdown` does nothing: accepted, still admin up, so inject restores and raises."""
    raw = yaml.safe_load((REPO / "drills/faults/switch/dialects/sonic.yaml").read_text())
    raw["commands"]["shutdown"] = [["show", "interfaces", "status"]]
    custom = tmp_path / "lying-sonic.yaml"
    custom.write_text(yaml.safe_dump(raw))
    with pytest.raises(InjectionFailed, match="still reports Ethernet8 admin up: the change did not take"):
        switch.inject_port(cfg(fab, "leaf1", dialect=str(custom)), "Ethernet8", settle_s=0.5)
    assert admin(fab, "leaf1", "Ethernet8") and events == []


@pytest.mark.parametrize("leaf, dialect, iface", CASES)
def test_port_that_stays_oper_up_is_a_failure_and_brought_back(fab, events, leaf, dialect, iface):
    """Defect port-stays-oper-up: the switch accepts the shutdown (admin down) but the link stays up."""
    fab.fabric.oper_stays_up = True
    try:
        with pytest.raises(InjectionFailed) as err:
            switch.inject_port(cfg(fab, leaf, dialect=dialect), iface, settle_s=1.0)
    finally:
        fab.fabric.oper_stays_up = False
    assert str(err.value).startswith(f"switch {leaf} accepted `")
    assert f"but {iface} is still oper up 1 s later (admin down)" in str(err.value)
    assert err.value.changed is True  # the guard keeps the entry and reverts (idempotently)
    assert admin(fab, leaf, iface) and [e.admin for e in events] == [False, True]


@pytest.mark.parametrize("leaf, dialect, iface, words", [
    ("leaf1", "sonic", "Ethernet8", "admin is not in the sudoers file."),
    ("leaf2", "nxos", "Ethernet1/2", "% Permission denied for the role"),
    ("leaf3", "cumulus", "swp2", "Error: Could not connect to nvued."),
    ("leaf4", "eos", "Ethernet3/1", "% Authorization denied for command 'shutdown'"),
    ("leaf5", "onyx", "Eth1/3", '% Unrecognized command "shutdown".'),
])
@pytest.mark.parametrize("transport", ["exec", "shell"])
def test_cli_that_rejects_shutdown_is_refused_in_its_own_words(fab, events, leaf, dialect, iface, words, transport):
    """Defect cli-rejects-shutdown: the OS's real error text, nothing changed, the port still up."""
    cli = fab.cli(leaf)
    cli.rejects_shutdown = True
    try:
        with pytest.raises(InjectionFailed) as err:
            switch.inject_port(cfg(fab, leaf, dialect=dialect), iface, transport)
    finally:
        cli.rejects_shutdown = False
        cli.discard()
    assert str(err.value).startswith(f"switch {leaf} refused to shut {iface}: ") and words in str(err.value)
    assert err.value.changed is False and admin(fab, leaf, iface) and events == []


INJECTIONS = ["Ethernet8 && sudo config interface shutdown Ethernet16", "Ethernet8; sudo reboot", "Ethernet8`reboot`",
              "Ethernet8\nsudo config interface shutdown Ethernet16", "Ethernet8$(reboot)"]


@pytest.mark.parametrize("attempt", INJECTIONS)
def test_injection_attempts_are_refused_before_anything_is_sent(fab, events, attempt):
    """Issue 13: a name with shell/CLI syntax is refused in plan() and at inventory load; the switch's
    own command log shows that nothing reached it."""
    from drills.core.errors import InvalidProfile
    from drills.faults.switch.uplink import plan

    cli = fab.cli("leaf1")
    before = len(cli.command_log())
    profile = type("P", (), {"switches": type("S", (), {"accept_unknown_host_keys": False})()})()
    with pytest.raises(InvalidProfile) as err:
        plan(None, profile, switch=cfg(fab, "leaf1"), interface=attempt)
    assert "\n" not in str(err.value) and "is not a sonic interface name" in str(err.value)
    for call in (lambda: switch.inject_port(cfg(fab, "leaf1"), attempt), lambda: switch.revert_port(cfg(fab, "leaf1"), attempt),
                 lambda: switch.show_state(cfg(fab, "leaf1"), attempt)):
        with pytest.raises(InvalidProfile, match="refused before connecting"):
            call()
    with pytest.raises(Exception, match="is not a sonic interface name"):
        cfg(fab, "leaf1", uplinks=[attempt])
    assert cli.command_log()[before:] == [] and events == []
    assert all(fab.fabric.iface_state("leaf1", i).admin for i in fab.fabric.interfaces("leaf1"))


def test_refused_connection_and_silent_port_are_one_line(fab, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(TargetUnreachable, match=rf"switch leaf1 \(127.0.0.1:{closed_port}\) refused the connection"):
        switch.inject_port(cfg(fab, "leaf1", port=closed_port), "Ethernet8")

    with socket.socket() as silent:  # accepts TCP (backlog) but never speaks SSH
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(TargetUnreachable) as err:
            switch.inject_port(cfg(fab, "leaf1", port=port), "Ethernet8", connect_timeout=0.5)
        assert time.monotonic() - started < 10  # bounded by the timeout, not by paramiko's defaults
    assert str(err.value) == (f"switch leaf1 (127.0.0.1:{port}) did not answer within 0.5 s: "
                              "check host/port in the switch inventory")


@pytest.mark.parametrize("transport", ["exec", "shell"])
def test_password_from_env_works_and_never_leaks(fab, events, monkeypatch, caplog, transport):
    caplog.set_level(logging.DEBUG)
    sw = cfg(fab, "leaf2", key_file=None)  # password only
    assert sw.password_env == PASSWORD_ENV
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    record = switch.inject_port(sw, "Ethernet1/2", transport)
    assert not admin(fab, "leaf2", "Ethernet1/2")
    switch.revert_port(sw, record)
    spec = switch.revert_spec(sw, "Ethernet1/2", transport)
    session = SwitchSession(sw, transport)
    assert PASSWORD not in json.dumps(spec) + repr(record) + repr(sw) + repr(session) + str(record.to_dict())

    monkeypatch.setenv(PASSWORD_ENV, PASSWORD + "-wrong")
    with pytest.raises(InjectionFailed) as err:
        switch.inject_port(sw, "Ethernet1/2", transport)
    assert f"with the password in ${PASSWORD_ENV} failed" in str(err.value)
    monkeypatch.delenv(PASSWORD_ENV)
    with pytest.raises(InjectionFailed, match=rf"password_env names \${PASSWORD_ENV}, which is not set"):
        switch.inject_port(sw, "Ethernet1/2", transport)
    assert PASSWORD not in caplog.text and PASSWORD not in str(err.value)
    assert [e.admin for e in events] == [False, True]
