"""The acceptance port facts on every dialect, read from real switch outputs by the dialects' own `port:`
views (tests/data/real/switch and tests/data/real/switch_port; expected values written from reading each
file): speed, MTU, error counters, PFC and ECN — and the judgement of a port from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.acceptance.port_facts import PortFacts, read_facts, speed_gbps
from drills.acceptance.switch import judge_port
from drills.faults.switch.dialect import load_switch_dialect
from drills.profile.acceptance import Thresholds

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _body(path: str) -> str:
    return (REAL / path).read_text(encoding="utf-8").split("\n", 1)[1]


def _block(path: str, start: int, end: int) -> str:
    """Lines start..end (1-based, after the source line) of a file that shows several interfaces: what
    the one-port command prints."""
    return "\n".join(_body(path).splitlines()[start - 1:end])


def _facts(dialect: str, view: int, text: str, iface: str) -> PortFacts:
    return read_facts([load_switch_dialect(dialect).port[view]], [text], iface)


@pytest.mark.parametrize("dialect, text, iface, want", [
    ("nxos", lambda: _block("switch/nxos-show_interface-12.txt", 1, 50), "Ethernet2/1",
     (10.0, 9100, {"input": 0, "output": 0, "crc": 0})),
    ("eos", lambda: _block("switch/eos-show_interfaces-1.txt", 1, 22), "Ethernet1",
     (10.0, 1500, {"input": 0, "output": 0, "crc": 0})),
    ("cumulus", lambda: _body("switch/cumulus-nv_show_interface_link_-o_json-1.txt"), "swp1",
     (100.0, 9000, {"in": 0, "out": 0})),
    ("onyx", lambda: _block("switch/onyx-show_interfaces-1.txt", 63, 98), "Eth1/1", (100.0, 1500, {"packets": 0})),
])
def test_speed_mtu_and_error_counters_from_each_oss_interface_view(dialect, text, iface, want):
    got = _facts(dialect, 0, text(), iface)
    assert (got.speed_gbps, got.mtu, got.errors) == want


def test_sonic_status_row_gives_speed_and_mtu():
    got = _facts("sonic", 0, _body("switch/sonic-show_interfaces_status-1.txt"), "Ethernet0")
    assert (got.speed_gbps, got.mtu) == (100.0, 9100)


def test_nxos_error_counters_add_up_over_the_ports_lines():
    text = _block("switch/nxos-show_interface-12.txt", 1, 50).replace("0 CRC/FCS", "12 CRC/FCS").replace(
        "0 input error", "12 input error")
    assert _facts("nxos", 0, text, "Ethernet2/1").errors == {"input": 12, "output": 0, "crc": 12}


def test_sonic_ecn_from_the_lossless_wred_profile():
    assert _facts("sonic", 3, _body("switch_port/sonic-show_ecn-multi.txt"), "Ethernet0").ecn is True
    none = _body("switch_port/sonic-show_ecn-multi.txt").replace("ecn_all", "ecn_none")
    assert _facts("sonic", 3, none, "Ethernet0").ecn is False


def test_cumulus_port_roce_status_gives_pfc_priority_and_ecn():
    got = _facts("cumulus", 1, _body("switch_port/cumulus-nv_show_interface_qos_roce_status-1.txt"), "swp16")
    assert (got.pfc, got.pfc_priorities, got.ecn) == (True, (3,), True)


def test_onyx_show_roce_lossless_and_not_configured():
    on = _facts("onyx", 1, _body("switch_port/onyx-show_roce-1.txt"), "Eth1/1")
    assert (on.pfc, on.ecn) == (True, True)
    off = _facts("onyx", 1, _body("switch_port/onyx-show_roce-disabled-1.txt"), "Eth1/1")
    assert (off.pfc, off.ecn) == (False, False)


def test_nxos_pfc_oper_column_and_ecn_in_the_queuing_policy():
    # the shape `show interface priority-flow-control` prints (Port, Mode, Oper(VL bmap), RxPPP, TxPPP)
    table = ("============================================================\n"
             "Port               Mode Oper(VL bmap)  RxPPP      TxPPP     \n"
             "============================================================\n\n"
             "Ethernet1/47       Auto Off           7316       762946     \n"
             "Ethernet1/48       Auto On  (8)       7428       761362     \n")
    assert _facts("nxos", 1, table, "Ethernet1/48").pfc is True
    assert _facts("nxos", 1, table, "Ethernet1/47").pfc is False
    ipqos = ("policy-map type queuing ROCE-OUT\n  class type queuing c-out-8q-q3\n"
             "    random-detect minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn\n")
    assert _facts("nxos", 2, ipqos, "Ethernet1/48").ecn is True
    assert _facts("nxos", 2, "policy-map type queuing default-8q-out-policy\n", "Ethernet1/48").ecn is False  # default


def test_nxos_pfc_from_a_real_priority_flow_control_table():
    # a UCS fabric interconnect's NX-OS (tests/data/real/switch_port): On (8) on one backplane port, Off elsewhere
    table = _body("switch_port/nxos-show_interface_priority-flow-control-1.txt")
    got = {iface: _facts("nxos", 1, table, iface).pfc
           for iface in ("Ethernet1/1/1", "Ethernet1/1", "Ethernet1/1/2", "Ethernet1/3", "Ethernet1/48")}
    assert got == {"Ethernet1/1/1": True, "Ethernet1/1": False, "Ethernet1/1/2": False, "Ethernet1/3": False,
                   "Ethernet1/48": None}  # a port the table does not list: unknown, never healthy


def test_eos_running_config_defaults_pfc_and_ecn_off():
    assert (_facts("eos", 1, "interface Ethernet1\n   mtu 9214\n", "Ethernet1").pfc, False) == (False, False)
    cfg = ("interface Ethernet1\n   priority-flow-control on\n   priority-flow-control priority 3 no-drop\n"
           "   tx-queue 3\n      random-detect ecn minimum-threshold 500 kbytes maximum-threshold 1500 kbytes\n")
    got = _facts("eos", 1, cfg, "Ethernet1")
    assert (got.pfc, got.ecn) == (True, True)


def test_speed_words():
    assert [speed_gbps("400G"), speed_gbps("100 Gb/s"), speed_gbps("1000", "M")] == [400.0, 100.0, 1.0]


# -- the judgement ----------------------------------------------------------------------------------------------
T = Thresholds(port_speed="400G", port_mtu=9100, roce=True)
GOOD = PortFacts(400.0, 9216, {"input": 0}, True, (3,), True)


def test_a_healthy_port_with_a_larger_mtu_is_a_go():
    assert judge_port("n1", "leaf Ethernet1/1", "up", "up", GOOD, T, "nxos").go


@pytest.mark.parametrize("facts, words", [
    (PortFacts(400.0, 9216, {"input": 0}, True, (3,), False), "ECN off"),
    (PortFacts(400.0, 9216, {"input": 0}, False, None, True), "PFC off"),
    (PortFacts(100.0, 9216, {"input": 0}, True, (3,), True), "speed 100G (expected 400G)"),
    (PortFacts(400.0, 1500, {"input": 0}, True, (3,), True), "MTU 1500 (expected ≥ 9100)"),
    (PortFacts(400.0, 9216, {"crc": 7}, True, (3,), True), "error counters crc 7"),
])
def test_each_wrong_fact_is_a_port_config_no_go(facts, words):
    got = judge_port("n1", "leaf Ethernet1/1", "up", "up", facts, T, "nxos")
    assert not got.go and got.failure == "port_config" and words in got.reason


def test_a_fact_the_switch_did_not_show_is_not_healthy():
    got = judge_port("n1", "leaf Ethernet1/1", "up", "up", PortFacts(400.0, 9216, {"input": 0}, True, None, None), T, "nxos")
    assert not got.go and got.failure == "not_run" and "ECN not shown" in got.reason
