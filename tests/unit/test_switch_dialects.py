"""Client-side switch dialects: loading, the interface-name grammar that refuses injection attempts,
commands built from arguments, and reading port state from literal switch output."""

from __future__ import annotations

import shlex

import pytest

from drills.core.errors import InvalidProfile
from drills.faults.switch.dialect import InvalidName, check_switch_name, load_switch_dialect, switch_dialect_names
from drills.faults.switch.parse import PortState, StateUnreadable, parse_interfaces, read_state
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
Ethernet1 is administratively down, line protocol is down (disabled)
  Hardware is Ethernet, address is 001c.7300.0001 (bia 001c.7300.0001)
  Description: to spine1 Et1
"""
EOS_STATUS = """\
Port       Name                Status       Vlan     Duplex Speed  Type            Flags Encapsulation
Et1        to spine1 Et1       notconnect   routed   full   400G   400GBASE-DR4
"""
NVUE_JSON = '{\n  "admin-status": "down",\n  "oper-status": "down",\n  "mtu": 9216,\n  "state": {"down": {}}\n}\n'
ONYX = """\
Eth1/3:
  Admin state                      : Enabled
  Operational state                : Down
  Actual speed                     : 400 Gbps
"""

INJECTIONS = [
    "Ethernet240 && sudo config interface shutdown Ethernet248",
    "Ethernet240; sudo reboot",
    "Ethernet240`reboot`",
    "Ethernet240\nsudo config interface shutdown Ethernet248",
    "Ethernet240$(reboot)",
    "Ethernet240 | tee /etc/passwd",
    "Ethernet240 ",
    "-h",
    "",
]


def test_every_dialect_loads_and_aliases_resolve():
    assert switch_dialect_names() == ["cumulus", "eos", "nxos", "onyx", "sonic"]
    assert load_switch_dialect("nvue").name == "cumulus"  # the twin's inventory says nvue
    assert load_switch_dialect("nxos").command("startup", "Ethernet1/2") == [
        "configure terminal", "interface Ethernet1/2", "no shutdown", "end"]
    assert load_switch_dialect("onyx").command("shutdown", "Eth1/3") == [
        "configure terminal", "interface ethernet 1/3", "shutdown", "exit", "exit"]
    assert load_switch_dialect("sonic").command("shutdown", "Ethernet8") == ["sudo config interface shutdown Ethernet8"]
    assert load_switch_dialect("cumulus").command("shutdown", "swp3") == [
        "nv set interface swp3 link state down", "nv config apply -y"]
    with pytest.raises(InvalidProfile, match="switch dialect 'junos' is not known .*cumulus, eos, nxos, onyx, sonic"):
        load_switch_dialect("junos")


@pytest.mark.parametrize("dialect, good, bad", [
    ("sonic", ["Ethernet0", "Ethernet248", "etp1", "etp1a", "fortyGigE1/1/1", "Eth1/1"], ["Ethernet", "eth0", "Ethernet0/1/2/3"]),
    ("cumulus", ["swp1", "swp1s0", "swp64s3"], ["swp", "eth0", "swp1.100", "bond0"]),
    ("nxos", ["Ethernet1/1", "Ethernet1/1/1", "Eth1/49"], ["Ethernet1", "port-channel1", "mgmt0"]),
    ("eos", ["Ethernet1", "Ethernet3/1", "Et3/1/1"], ["Management1", "Port-Channel1"]),
    ("onyx", ["Eth1/1", "Eth1/1/2", "eth1/32"], ["Eth1", "ethernet 1/1", "Po1"]),
])
def test_interface_names_follow_each_os_grammar(dialect, good, bad):
    d = load_switch_dialect(dialect)
    for name in good:
        assert d.check_interface(name)["iface"] == name
    for name in bad + INJECTIONS:
        with pytest.raises(InvalidName, match=r"is not a \w+ interface name .*refused before connecting"):
            d.check_interface(name)


@pytest.mark.parametrize("attempt", INJECTIONS)
def test_injection_attempts_never_become_a_command(attempt):
    for dialect in switch_dialect_names():
        with pytest.raises(InvalidName) as err:
            load_switch_dialect(dialect).command("shutdown", attempt)
        assert "\n" not in str(err.value)  # one clear line


def test_linux_cli_commands_are_quoted_arguments():
    line = load_switch_dialect("sonic").command("show", "fortyGigE1/1/1")[0]
    assert shlex.split(line) == ["show", "interfaces", "status", "fortyGigE1/1/1"]
    with pytest.raises(InvalidName, match="characters a switch CLI could interpret"):
        load_switch_dialect("sonic").line(["show", "{iface}"], {"iface": "a;b", "port": "a;b"})


def test_switch_names_are_host_names():
    assert check_switch_name("leaf-1.pod2") == "leaf-1.pod2"
    for bad in ["leaf 1", "leaf;reboot", "-oProxyCommand=x", "", "leaf\n"]:
        with pytest.raises(InvalidName, match="is not a host name"):
            check_switch_name(bad)


def test_a_site_dialect_file_is_validated(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("name: mine\nexec_join: ' ; '\n")
    with pytest.raises(InvalidProfile, match=r"switch dialect file .*mine.yaml: \w+: Field required"):
        load_switch_dialect(str(bad))
    with pytest.raises(InvalidProfile, match="does not exist"):
        load_switch_dialect(str(tmp_path / "absent.yaml"))


@pytest.mark.parametrize("dialect, output, iface, state", [
    ("sonic", SONIC, "Ethernet8", PortState("down", "down")),
    ("sonic", SONIC, "etp2", PortState("down", "down")),  # alias naming mode
    ("sonic", SONIC.replace("down   down", "  up     up"), "Ethernet8", PortState("up", "up")),
    ("nxos", NXOS, "Ethernet1/2", PortState("down", "down")),
    ("nxos", "Ethernet1/2 is down (Link not connected)\r\nadmin state is up, Dedicated Interface\r\n", "Ethernet1/2",
     PortState("up", "down")),
    ("eos", EOS, "Ethernet1", PortState("down", "down")),
    ("eos", EOS.replace("administratively down, line protocol is down (disabled)", "up, line protocol is up (connected)"),
     "Ethernet1", PortState("up", "up")),
    ("cumulus", NVUE_JSON, "swp2", PortState("down", "down")),
    ("cumulus", "\x1b[1m" + NVUE_JSON.replace('"admin-status": "down"', '"admin-status": "up"') + "\x1b[0m", "swp2",
     PortState("up", "down")),
    ("onyx", ONYX, "Eth1/3", PortState("up", "down")),
])
def test_state_is_read_from_the_switch_output(dialect, output, iface, state):
    assert read_state(load_switch_dialect(dialect), output, iface) == state


@pytest.mark.parametrize("dialect, output, why", [
    ("sonic", NXOS, "no row for Ethernet0"),
    ("sonic", SONIC, "no row for Ethernet0"),
    ("nxos", SONIC, "no row for Ethernet0"),
    ("eos", EOS_STATUS, "no row for Ethernet0"),
    ("cumulus", NVUE_JSON.replace("{", "", 1), "not valid JSON|no JSON"),
])
def test_unreadable_output_says_what_is_missing(dialect, output, why):
    """(A status word such as notconnect does not say the admin side: read_state refuses to guess.)"""
    with pytest.raises(StateUnreadable, match=why):
        read_state(load_switch_dialect(dialect), output, "Ethernet0")


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
    with pytest.raises(StateUnreadable, match="does not state the admin state of Et1"):
        from drills.faults.switch.parse import parse_interfaces  # noqa: F401 - status words leave admin open
        read_state(load_switch_dialect("eos").model_copy(update={"state": "ntc:arista_eos_show_interfaces_status"}),
                   EOS_STATUS, "Et1")
    assert CommandResult("x", "", 1).words == "exit status 1 and no output"
    assert CommandResult("show", "table", 0).ok and CommandResult("show", "table", None).ok


SONIC_NO_VLAN = """\
  Interface            Lanes    Speed    MTU            Alias    Oper    Admin    Type    Asym PFC
  -----------  ---------------  -------  -----  ---------------  ------  -------  ------  ----------
  Ethernet0      49,50,51,52     100G   9100   hundredGigE1/1     N/A       up     N/A         off
"""
ONYX_STATUS = """\
Port                   Operational state           Speed                  Negotiation
----                   -----------------           -----                  -----------
Eth1/3                 Down                        100G                   Auto
"""
NXOS_TUNNELS = """\
Port             Name            Status    Vlan      Duplex  Speed   Type
Eth1/1           TEST1           connected routed    full    a-10G   10Gbase-SR
-------------------------------------------------------------------------------
Interface     Name               Status    Reason            Reason description
-------------------------------------------------------------------------------
Tunnel40      Test Tun40         down      admin down         Administratively down
Tunnel43      Test Tun43         weird     Link not connected tunnel link is not connected
"""


def test_state_words_are_read_by_column_not_guessed():
    """Oper N/A with no Vlan column is not taken for a Vlan (which would shift `up` into Oper); a tunnel
    row whose status word is unknown is left out, not read from the "connected" in its Reason."""
    assert parse_interfaces("sonic_show_interfaces_status", SONIC_NO_VLAN) == {"Ethernet0": PortState("up", None)}
    assert parse_interfaces("ntc:cisco_nxos_show_interface_status", NXOS_TUNNELS) == {
        "Eth1/1": PortState("up", "up"), "Tunnel40": PortState("down", "down")}
    assert parse_interfaces("onyx_show_interfaces_ethernet_status", ONYX_STATUS) == {"Eth1/3": PortState(None, "down")}


@pytest.mark.parametrize("parser, output", [
    ("onyx_show_interfaces_ethernet", ONYX_STATUS),  # the status table is not the port's key/value block
    ("sonic_show_interfaces_status", NXOS),
    ("nvue_show_interface_link", "hello"),
    ("ntc:cisco_nxos_show_interface_status", ""),
])
def test_an_output_of_another_shape_is_unreadable_never_empty(parser, output):
    with pytest.raises(StateUnreadable):
        parse_interfaces(parser, output, "swp1")
