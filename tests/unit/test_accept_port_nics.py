"""The per-NIC switch-port judge (drills/acceptance/port_nics.py): each NIC of a node, by the MAC its ibstat encodes
in the RoCE port GUID, placed by the leaves' LLDP tables (read with the dialects' own parsers) — missing, sharing a
port, or on another rail's leaf is a typed no-go naming NIC and port."""

from __future__ import annotations

from pathlib import Path

from drills.acceptance.port_nics import mac_key, place, port_macs, rail_of
from drills.faults.switch.lldp import LldpTable, parse_neighbours

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _sonic(switch: str, rows: list[tuple[str, str, str]]) -> LldpTable:
    """A SONiC `show lldp table` in lldpshow's layout (lldp-sonic-show_lldp_table-1.txt), rows (port, host, MAC)."""
    text = "\n".join(["Capability codes: (R) Router, (B) Bridge, (O) Other",
                      "LocalPort    RemoteDevice    RemotePortID       Capability    RemotePortDescr",
                      "-----------  --------------  -----------------  ------------  -----------------",
                      *(f"{p:<12} {h:<15} {m:<18} {'':<13} ens{i + 1}f0np0" for i, (p, h, m) in enumerate(rows)),
                      "--------------------------------------------------", f"Total entries displayed:  {len(rows)}"])
    return LldpTable(switch, "show lldp table", tuple(parse_neighbours("sonic_show_lldp_table", text)), text)


MACS = {f"mlx5_{i}": f"58:a2:e1:00:00:{i:02x}" for i in range(8)}


def test_the_mac_of_each_roce_port_comes_from_its_port_guid_in_a_real_ibstat():
    # written from the file before running: Port GUID 0x5aa2e1fffedae626 → 58:a2:e1:da:e6:26 (EUI-64, U/L bit)
    got = port_macs((REAL / "accept" / "ibstat-roce-one-port-down.txt").read_text())
    assert got["mlx5_0"] == "58:a2:e1:da:e6:26" and got["mlx5_1"] == "58:a2:e1:da:e6:27"
    assert mac_key("58a2.e1da.e626") == mac_key("58:A2:E1:DA:E6:26") == "58a2e1dae626"  # NX-OS/EOS vs SONiC spelling
    assert mac_key("Ethernet1/1") is None and mac_key("ens1f0np0") is None


def test_infiniband_ports_send_no_lldp_and_are_not_placed():
    ib = (REAL / "accept" / "ibstat-ib-down-polling-rate10.txt").read_text()
    assert port_macs(ib) == {}


def test_rails_follow_the_natural_order_of_the_nics():
    assert rail_of(["mlx5_10", "mlx5_2", "mlx5_0"]) == {"mlx5_0": 0, "mlx5_2": 1, "mlx5_10": 2}


def _rail_leaves(swap: bool = False, drop: str | None = None):
    a = [(f"Ethernet{4 * i}", "gpu-new-02", MACS[f"mlx5_{i}"]) for i in range(4)]
    b = [(f"Ethernet{4 * i}", "gpu-new-02", MACS[f"mlx5_{i + 4}"]) for i in range(4)]
    if swap:  # NIC 3's and NIC 4's cables traded
        a[3], b[0] = (a[3][0], "gpu-new-02", MACS["mlx5_4"]), (b[0][0], "gpu-new-02", MACS["mlx5_3"])
    tables = {"leaf-4": _sonic("leaf-4", [r for r in a if r[2] != MACS.get(drop or "")]),
              "leaf-5": _sonic("leaf-5", [r for r in b if r[2] != MACS.get(drop or "")])}
    return tables, {"leaf-4": [0, 1, 2, 3], "leaf-5": [4, 5, 6, 7]}


def test_every_nic_on_its_rails_leaf_is_placed_without_failure():
    tables, rails = _rail_leaves()
    got = place("gpu-new-02", "leaf-4", MACS, tables, rails)
    assert [(p.nic, p.leaf, p.port, p.failure) for p in got][3:5] == [("mlx5_3", "leaf-4", "Ethernet12", None),
                                                                       ("mlx5_4", "leaf-5", "Ethernet0", None)]
    assert not any(p.failure for p in got)


def test_swapped_rail_cables_are_wrong_port_naming_nic_leaf_and_port():
    tables, rails = _rail_leaves(swap=True)
    bad = {p.nic: p for p in place("gpu-new-02", "leaf-4", MACS, tables, rails) if p.failure}
    assert set(bad) == {"mlx5_3", "mlx5_4"} and {p.failure for p in bad.values()} == {"wrong_port"}
    assert bad["mlx5_3"].why.startswith("mlx5_3 (MAC 58:a2:e1:00:00:03, rail 3) is on leaf-5 Ethernet0, a leaf of "
                                        "rails 4,5,6,7 (rail 3 is leaf-4)")


def test_a_nic_seen_on_no_leaf_port_is_missing():
    tables, rails = _rail_leaves(drop="mlx5_5")
    bad = [p for p in place("gpu-new-02", "leaf-4", MACS, tables, rails) if p.failure]
    assert [(p.nic, p.failure) for p in bad] == [("mlx5_5", "missing_nic")]
    assert "is seen by LLDP on no leaf port (leaf-4, leaf-5 read)" in bad[0].why


def test_two_nics_on_one_port_in_a_real_sonic_table_are_wrong_port():
    # lldp-sonic-show_lldp_table-1.txt: two neighbours (MACs …:01 and …:02) on Ethernet0
    text = (REAL / "lldp" / "lldp-sonic-show_lldp_table-1.txt").read_text()
    table = LldpTable("leaf-4", "show lldp table", tuple(parse_neighbours("sonic_show_lldp_table", text)), text)
    macs = {"mlx5_0": "00:00:00:00:00:01", "mlx5_1": "00:00:00:00:00:02"}
    got = place("dummy", "leaf-4", macs, {"leaf-4": table}, {})
    assert [(p.nic, p.port, p.failure) for p in got] == [("mlx5_0", "Ethernet0", "wrong_port"),
                                                          ("mlx5_1", "Ethernet0", "wrong_port")]
    assert "mlx5_0 and mlx5_1 of dummy are both seen on leaf-4 Ethernet0" in got[0].why


def test_without_declared_rails_every_nic_belongs_on_the_nodes_own_leaf():
    tables, _ = _rail_leaves()
    bad = [p for p in place("gpu-new-02", "leaf-4", MACS, tables, {"leaf-4": [], "leaf-5": []}) if p.failure]
    assert [p.nic for p in bad] == ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]
    assert "is on leaf-5 Ethernet0, not gpu-new-02's leaf leaf-4" in bad[0].why


def test_a_nic_whose_mac_is_cabled_as_another_hosts_is_wrong_node():
    tables, rails = _rail_leaves()
    got = place("gpu-new-03", "leaf-4", MACS, tables, rails)  # gpu-new-03 reports gpu-new-02's NICs
    assert {p.failure for p in got} == {"wrong_node"}
    assert "whose LLDP neighbour names itself gpu-new-02, not gpu-new-03" in got[0].why
