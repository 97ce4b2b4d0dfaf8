"""The twin's switches print what real ones print: every twin `show` output for which ntc-templates has
a template (a parser nobody here wrote) parses with it, and the parsed states match the twin's own."""

from __future__ import annotations

import pytest

from drills.faults.switch.parse import _ntc, parse_interfaces
from drills.twin.fabric import Fabric, SwitchCli, leaf_spine


@pytest.fixture
def twin():
    fabric = Fabric(leaf_spine(leaves=2, spines=1, downlinks=2, dialects=("nxos", "eos")))
    fabric.set_admin("leaf1", "Ethernet1/2", False)
    fabric.set_admin("leaf2", "Ethernet2/1", False)
    return fabric


@pytest.mark.parametrize("leaf, dialect, template, command, key", [
    ("leaf1", "nxos", "cisco_nxos_show_interface_status", "show interface status", "PORT"),
    ("leaf2", "eos", "arista_eos_show_interfaces_status", "show interfaces status", "PORT"),
])
def test_status_tables_parse_with_ntc_templates(twin, leaf, dialect, template, command, key):
    rows = _ntc(template, SwitchCli(twin, leaf, dialect).run(command).output)
    assert len(rows) == len(twin.interfaces(leaf))
    for row, st in zip(rows, twin.states(leaf)):
        assert row["STATUS"] == ("disabled" if not st.admin else "connected" if st.oper else "notconnect")


@pytest.mark.parametrize("leaf, dialect, parser, command", [
    ("leaf1", "nxos", "ntc:cisco_nxos_show_interface", "show interface {iface}"),
    ("leaf2", "eos", "ntc:arista_eos_show_interfaces", "show interfaces {iface}"),
])
def test_detail_views_parse_with_ntc_templates_and_match_the_twin(twin, leaf, dialect, parser, command):
    cli = SwitchCli(twin, leaf, dialect)
    for st in twin.states(leaf):
        ports = parse_interfaces(parser, cli.run(command.format(iface=st.iface)).output)
        assert list(ports) == [st.iface]
        got = ports[st.iface]
        assert (got.admin_up, got.oper_up) == (st.admin, st.oper), st
