"""Client-side switch dialects: loading, and reading port state from literal switch output."""

from __future__ import annotations

import pytest

from drills.core.errors import InvalidProfile
from drills.faults.switch.dialect import (
    PortState,
    StateUnreadable,
    load_switch_dialect,
    read_state,
    switch_dialect_names,
)
from drills.faults.switch.session import CommandResult

SONIC = """\
  Interface                  Lanes  Speed   MTU  FEC  Alias    Vlan  Oper  Admin             Type  Asym PFC
  ---------  ---------------------  -----  ----  ---  -----  ------  ----  -----  ---------------  --------
  Ethernet8  8,9,10,11,12,13,14,15   400G  9100   rs   etp2  routed  down   down  QSFP28 or later       N/A
"""
NXOS = """\
Ethernet1/2 is down (Administratively down)
admin state is down, Dedicated Interface
  Hardware: 100/1000/10000/25000/40000/50000/100000/200000/400000 Ethernet
"""
EOS = """\
Port       Name                Status       Vlan     Duplex Speed  Type            Flags Encapsulation
Et1        to spine1 Et1       notconnect   routed   full   400G   400GBASE-DR4
"""
NXOS_STATUS = """\
--------------------------------------------------------------------------------
Port    Name              Status     Vlan    Duplex  Speed  Type
--------------------------------------------------------------------------------
Eth1/2  spine1 Ethernet8  disabled   routed  full    400G   QSFP-DD-400G-DR4
"""
NVUE = """\
       operational  applied  pending
-----  -----------  -------  -------
state  down         down     down
"""


def test_every_dialect_loads_and_aliases_resolve():
    assert switch_dialect_names() == ["cumulus", "eos", "nxos", "sonic"]
    assert load_switch_dialect("nvue").name == "cumulus"  # the twin's inventory says nvue
    assert load_switch_dialect("nxos").command("startup", "Ethernet1/2") == [
        "configure terminal", "interface Ethernet1/2", "no shutdown", "end"]
    with pytest.raises(InvalidProfile, match="switch dialect 'junos' is not known .*cumulus, eos, nxos, sonic"):
        load_switch_dialect("junos")


def test_a_site_dialect_file_is_validated(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("name: mine\nexec_join: ' ; '\n")
    with pytest.raises(InvalidProfile, match=r"switch dialect file .*mine.yaml: shell: Field required"):
        load_switch_dialect(str(bad))
    with pytest.raises(InvalidProfile, match="does not exist"):
        load_switch_dialect(str(tmp_path / "absent.yaml"))


@pytest.mark.parametrize("dialect, output, iface, state", [
    ("sonic", SONIC, "Ethernet8", PortState("down", "down")),
    ("sonic", SONIC.replace("down   down", "  up     up"), "Ethernet8", PortState("up", "up")),
    ("nxos", NXOS, "Ethernet1/2", PortState("down", "down")),
    ("nxos", "Ethernet1/2 is down (Link not connected)\r\nadmin state is up, Dedicated Interface\r\n", "Ethernet1/2",
     PortState("up", "down")),
    ("eos", EOS, "Ethernet1", PortState("up", "down")),
    ("eos", NXOS_STATUS, "Ethernet1/2", PortState("down", "down")),
    ("cumulus", NVUE, "swp2", PortState("down", "down")),
    ("cumulus", "\x1b[1m" + NVUE.replace("down         down", "down         up  ") + "\x1b[0m", "swp2", PortState("up", "down")),
])
def test_state_is_read_from_the_switch_output(dialect, output, iface, state):
    assert read_state(load_switch_dialect(dialect), output, iface) == state


@pytest.mark.parametrize("dialect, output, why", [
    ("sonic", NXOS, "no table with the columns"),
    ("sonic", SONIC, "expected one row for Ethernet0, found 0"),
    ("nxos", SONIC, "no admin state"),
    ("eos", EOS.replace("notconnect", "weird     "), "status 'weird' is none of"),
    ("cumulus", NVUE.replace("state  down", "state  dn  "), "oper state 'dn' is neither up nor down"),
])
def test_unreadable_output_says_what_is_missing(dialect, output, why):
    iface = "Ethernet0" if "Ethernet0" in why else "x"
    with pytest.raises(StateUnreadable, match=why):
        read_state(load_switch_dialect(dialect), output, iface)


def test_errors_are_the_switchs_own_words():
    sonic = load_switch_dialect("sonic")
    out = ('Usage: config interface shutdown [OPTIONS] <interface_name>\nTry "config interface shutdown -h" for help.\n\n'
           "Error: Interface name is invalid. Please enter a valid interface name!!")
    res = CommandResult("sudo config interface shutdown Ethernet99", out, 2, tuple(sonic.error_lines(out)))
    assert not res.ok and sonic.is_unknown_interface(out)
    assert res.words.endswith("Error: Interface name is invalid. Please enter a valid interface name!!")
    nxos = load_switch_dialect("nxos")
    caret = "                    ^\n% Invalid input detected at '^' marker."
    res = CommandResult("shutdwn", caret, None, tuple(nxos.error_lines(caret)))
    assert not res.ok and res.words == "% Invalid input detected at '^' marker."
    assert CommandResult("x", "", 1).words == "exit status 1 and no output"
    assert CommandResult("show", "table", 0).ok and CommandResult("show", "table", None).ok
