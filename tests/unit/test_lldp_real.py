"""LLDP neighbour tables of all five dialects, read from verbatim public outputs (tests/data/real/lldp) as
EXPECTED.yaml says (values written by hand before any parser ran), and the pure name matching the checks
use. A parser that finds nothing, or an output of another shape, is never an empty table."""

from __future__ import annotations

from pathlib import Path

import pytest
from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.lldp import LldpTable, Neighbour, parse_neighbours, same_host, same_port

CORPUS = Path(__file__).parents[1] / "data" / "real" / "lldp"
EXPECTED = load_yaml((CORPUS / "EXPECTED.yaml").read_text())


def test_every_file_has_its_expectation():
    assert sorted(EXPECTED) == sorted(p.name for p in CORPUS.glob("*.txt")) and len(EXPECTED) >= 6
    assert {case["dialect"] for case in EXPECTED.values()} == {"sonic", "nxos", "eos", "cumulus", "onyx"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_dialects_lldp_parser_reads_every_neighbour(name):
    case = EXPECTED[name]
    dialect = load_switch_dialect(case["dialect"])
    assert dialect.line(dialect.lldp.command).split()[:2] == case["command"].split()[:2]
    got = parse_neighbours(dialect.lldp.parser, (CORPUS / name).read_text())
    want = [tuple(row) for row in case["neighbours"]]
    assert [(n.local, n.system, n.port_id) for n in got] == [
        (n.local, s, p) for n, (_, s, p) in zip(got, want)] and len(got) == len(want)
    assert all(same_port(n.local, local) for n, (local, _, _) in zip(got, want))


def test_an_error_or_another_shape_is_not_an_empty_table():
    sonic = load_switch_dialect("sonic").lldp.parser
    with pytest.raises(ValueError):
        parse_neighbours(sonic, "Error response from daemon: Container 3a4f9c2d1e7b is not running\n")
    nvue = load_switch_dialect("cumulus").lldp.parser
    with pytest.raises(ValueError):
        parse_neighbours(nvue, "Interface  State  Speed  MTU    Type\n---------  -----\nswp1  up  1G  9216  swp\n")


def test_names_match_across_a_vendors_short_and_long_forms_and_a_domain():
    assert same_port("Eth1/1", "Ethernet1/1") and same_port("Et3/1", "Ethernet3/1") and same_port("Ethernet 1/2", "Eth1/2")
    assert not same_port("Ethernet1/1", "Ethernet1/10") and not same_port("swp1", "swp10")
    assert same_host("gpu-new-01.cluster.local", "gpu-new-01") and not same_host("gpu-new-011", "gpu-new-01")
    table = LldpTable("leaf-3", "show lldp table", (Neighbour("Ethernet8", "gpu-new-02", "aa:bb"),
                                                    Neighbour("Ethernet16", "gpu-new-01.dc", "cc:dd")))
    assert [n.local for n in table.facing("gpu-new-01")] == ["Ethernet16"]
    assert table.describe("Ethernet8") == "gpu-new-02 aa:bb" and table.describe("Ethernet0") == "no neighbour"


def test_ours_reads_the_nxos_rows_ntc_templates_drops():
    """Why NX-OS uses our template: ntc-templates' (as installed) reads a wrapped Device ID followed by a trailing
    space as no name at all, so the neighbour of that port is unnamed (it would read as "no neighbour", or worse, as
    another row's). When this fails, ntc caught up: switch the dialect back to it."""
    from drills.faults.switch.parse import template_rows

    text = (CORPUS / "lldp-nxos-show_lldp_neighbors-2.txt").read_text()
    ntc = template_rows("ntc:cisco_nxos_show_lldp_neighbors", text)
    ours = parse_neighbours(load_switch_dialect("nxos").lldp.parser, text)
    unnamed = [r["LOCAL_INTERFACE"] for r in ntc if not r["NEIGHBOR_NAME"]]
    assert len(ours) == 15 and all(n.system for n in ours) and unnamed, unnamed
