"""Dialects as data: each vendor CLI parses and prints like the switch (no sockets)."""

from __future__ import annotations

import pytest

from drills.core.errors import InvalidProfile
from drills.twin.fabric import Fabric, SwitchCli, dialect_names, leaf_spine, load_dialect
from drills.twin.fabric.dialects import TableSpec, _word_regex, render_table


@pytest.fixture
def fabric():
    return Fabric(leaf_spine(leaves=3, spines=2, downlinks=1))  # leaf1 sonic, leaf2 nxos, leaf3 nvue


def test_every_shipped_dialect_loads():
    assert {"sonic", "nxos", "nvue"} <= set(dialect_names())
    for name in dialect_names():
        assert load_dialect(name).name == name


def test_unknown_dialect_is_a_profile_error():
    with pytest.raises(InvalidProfile, match="unknown switch dialect 'ios-xr'.*eos, nvue, nxos, onyx, sonic"):
        load_dialect("ios-xr")


def test_abbreviation_notation():
    import re

    rx = re.compile("^" + _word_regex("conf[igure]") + "$")
    assert all(rx.match(w) for w in ("conf", "confi", "configure"))
    assert not any(rx.match(w) for w in ("con", "configured", "config-x"))


def test_interface_spellings_and_port_names():
    nx, sonic, nv = load_dialect("nxos"), load_dialect("sonic"), load_dialect("nvue")
    assert [nx.canonical_iface(t) for t in ("eth1/1", "Ethernet1/1", "e 1/2", "ethernet 1/3")] == [
        "Ethernet1/1", "Ethernet1/1", "Ethernet1/2", "Ethernet1/3"]
    assert nx.canonical_iface("Foo1") is None and sonic.canonical_iface("eth0") is None
    assert (sonic.port(2), nx.port(2), nv.port(2)) == ("Ethernet16", "Ethernet1/3", "swp3")
    assert nx.short_iface("Ethernet1/12") == "Eth1/12"


def test_render_table_alignments():
    right = TableSpec(align="right", columns=[("A", "{a}"), ("Bee", "{b}")])
    assert render_table(right, [{"a": "xyz", "b": "1"}]).splitlines() == ["  A  Bee", "---  ---", "xyz    1"]
    full = TableSpec(rule="full_width", columns=[("Port", "{a}")])
    lines = render_table(full, [{"a": "Eth1/1"}]).splitlines()
    assert lines[0] == "-" * 80 == lines[2] and lines[1] == "Port" and lines[3] == "Eth1/1"


# -- SONiC ------------------------------------------------------------------------------------
def test_sonic_status_table_has_the_real_columns(fabric):
    out = SwitchCli(fabric, "leaf1", "sonic").run("show interfaces status")
    header = out.output.splitlines()[0].split()
    assert header == ["Interface", "Lanes", "Speed", "MTU", "FEC", "Alias", "Vlan", "Oper", "Admin", "Type", "Asym", "PFC"]
    assert out.exit_status == 0 and "Ethernet8" in out.output


def test_sonic_shutdown_startup_change_the_fabric(fabric):
    cli = SwitchCli(fabric, "leaf1", "sonic")
    assert cli.run("sudo config interface shutdown Ethernet8").exit_status == 0
    assert not fabric.iface_state("leaf1", "Ethernet8").admin
    row = cli.run("show interfaces status Ethernet8").output.splitlines()[2].split()
    assert row[0] == "Ethernet8" and row[7:9] == ["down", "down"]
    cli.run("sudo config interface startup Ethernet8")
    assert fabric.iface_state("leaf1", "Ethernet8").oper


@pytest.mark.parametrize(
    "command, status, text",
    [
        ("sudo config interface shutdown Ethernet99", 2, "Error: Interface name is invalid. Please enter a valid interface name!!"),
        ("sudo config interface startup eth0", 2, 'Usage: config interface startup [OPTIONS] <interface_name>'),
        ("show interfaces status Ethernet99", 1, "Invalid interface name Ethernet99"),
        ("show frobnicate", 2, 'Error: No such command "frobnicate".'),
        ("config interface shutdown Ethernet8", 1, "Root privileges are required for this operation"),
        ("frob --now", 127, "-bash: frob: command not found"),
        ("sudo config interface shutdown", 2, 'Error: Missing argument "<interface_name>".'),
    ],
)
def test_sonic_errors_read_like_sonic(fabric, command, status, text):
    res = SwitchCli(fabric, "leaf1", "sonic").run(command)
    assert res.exit_status == status and text in res.output
    assert fabric.leaf_uplinks_up("leaf1") == 2


def test_exec_separators_stop_at_the_first_error(fabric):
    cli = SwitchCli(fabric, "leaf1", "sonic")
    res = cli.run("sudo config interface shutdown Ethernet8 && bogus && sudo config interface shutdown Ethernet16")
    assert res.exit_status == 127 and fabric.leaf_uplinks_up("leaf1") == 1


# -- NX-OS / EOS style -------------------------------------------------------------------------
def test_nxos_modal_shutdown_with_prompts_and_abbreviations(fabric):
    s = SwitchCli(fabric, "leaf2", "nxos").session()
    assert s.prompt == "leaf2# "
    s.execute("conf t")
    assert s.prompt == "leaf2(config)# "
    s.execute("int eth1/2")
    assert s.prompt == "leaf2(config-if)# "
    s.execute("shut")
    assert fabric.leaf_uplinks_up("leaf2") == 1
    s.execute("no shutdown")
    s.execute("exit")
    assert s.prompt == "leaf2(config)# "
    s.execute("end")
    assert s.prompt == "leaf2# " and fabric.leaf_uplinks_up("leaf2") == 2
    assert s.execute("exit").logout


def test_nxos_status_shows_disabled_and_notconnect(fabric):
    cli = SwitchCli(fabric, "leaf2", "nxos")
    cli.run("configure terminal ; interface Ethernet1/2 ; shutdown ; end")
    fabric.set_admin("spine2", "Ethernet8", False)  # far end of leaf2's second uplink
    lines = cli.run("show interface status").output.splitlines()
    assert lines[1].split()[:3] == ["Port", "Name", "Status"]
    rows = {ln.split()[0]: ln for ln in lines[3:]}
    assert " disabled " in rows["Eth1/2"] and " notconnect " in rows["Eth1/3"] and " connected " in rows["Eth1/1"]
    one = cli.run("show interfaces Ethernet1/2 status").output.splitlines()
    assert len(one) == 4 and one[3].startswith("Eth1/2")


def test_nxos_errors_put_the_caret_under_the_bad_word(fabric):
    s = SwitchCli(fabric, "leaf2", "nxos").session()
    res = s.execute("show interfaze status", interactive=True)
    caret, message = res.output.splitlines()
    assert message == "% Invalid input detected at '^' marker."
    assert caret.index("^") == len("leaf2# show ") and res.exit_status == 1
    res = s.execute("shutdown")  # only in interface mode
    assert res.output.splitlines()[0] == "^"
    s.execute("conf t")
    res = s.execute("interface Ethernet1/99")
    assert res.output.splitlines() == ["          ^", "% Invalid range at '^' marker."]
    assert s.prompt == "leaf2(config)# "  # stayed in config mode
    assert "% Incomplete command" in s.execute("interface").output


# -- Cumulus NVUE ------------------------------------------------------------------------------
def test_nvue_set_is_pending_until_apply(fabric):
    cli = SwitchCli(fabric, "leaf3", "nvue")
    assert cli.run("nv set interface swp2 link state down").exit_status == 0
    assert fabric.iface_state("leaf3", "swp2").admin  # nothing applied yet
    state = cli.run("nv show interface swp2 link state").output.splitlines()[2].split()
    assert state == ["state", "up", "up", "down"]
    assert "state: down" in cli.run("nv config diff").output
    res = cli.run("nv config apply -y")
    assert res.output == "applied [rev_id: 2]" and not fabric.iface_state("leaf3", "swp2").admin
    assert cli.run("nv config apply -y").output.startswith("Warning")
    table = cli.run("nv show interface").output
    assert table.splitlines()[0].split()[:2] == ["Interface", "State"] and "spine1" in table


def test_nvue_detach_discards_pending(fabric):
    cli = SwitchCli(fabric, "leaf3", "nvue")
    cli.run("nv set interface swp2 link state down; nv config detach; nv config apply -y")
    assert fabric.iface_state("leaf3", "swp2").admin


@pytest.mark.parametrize(
    "command, status, text",
    [
        ("nv set interface swp99 link state down", 1, "Error: The requested item does not exist."),
        ("nv show interface swp99", 1, "Error: The requested item does not exist."),
        ("nv set interface swp2 link state sideways", 1, "'sideways' is not one of ['down', 'up']"),
        ("nv frob", 2, "Error: Unknown command 'frob'"),
        ("ip link set swp2 down", 127, "-bash: ip: command not found"),
    ],
)
def test_nvue_errors(fabric, command, status, text):
    res = SwitchCli(fabric, "leaf3", "nvue").run(command)
    assert res.exit_status == status and text in res.output
