"""The twin's switches answer LLDP from the cabling's truth, in each dialect's real shape: the client's own
parser (drills/faults/switch/lldp.py, proven on real outputs) reads every row back; a shut port sends no
frames; LLDP off is the dialect's refusal or an empty table; a miscabled node is seen where its cable is."""

from __future__ import annotations

import pytest

from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.lldp import parse_neighbours, same_port
from drills.twin.fabric import Fabric, SwitchCli, leaf_spine
from drills.twin.fabric.lldp import NODE_NIC, miscable, neighbours

CLIENT = {"sonic": "sonic", "nxos": "nxos", "eos": "eos", "nvue": "cumulus", "onyx": "onyx"}


def _cli(dialect: str, lldp_off: bool = False):
    specs = leaf_spine(leaves=1, spines=2, dialects=(dialect,), spine_dialect="sonic", downlinks=3)
    leaf = specs[0]
    cabled = {"leaf1": {"gpu-a": leaf.interfaces[0], "gpu-b": leaf.interfaces[1]}}
    fabric = Fabric(specs)
    peers = neighbours(specs, cabled)
    return fabric, leaf, SwitchCli(fabric, "leaf1", dialect, neighbours=peers["leaf1"], lldp_off=lldp_off), peers


@pytest.mark.parametrize("dialect", sorted(CLIENT))
def test_each_dialect_prints_the_cabling_as_its_client_parser_reads_it(dialect):
    fabric, leaf, cli, _ = _cli(dialect)
    client = load_switch_dialect(CLIENT[dialect])
    out = cli.run(client.line(client.lldp.command))
    assert out.exit_status == 0, out.output
    rows = parse_neighbours(client.lldp.parser, out.output)
    got = {(n.local, n.system) for n in rows}
    want = {(leaf.interfaces[0], "gpu-a"), (leaf.interfaces[1], "gpu-b")} | {(u.iface, u.peer) for u in leaf.uplinks}
    assert {(next(i for i in leaf.interfaces if same_port(i, local)), s) for local, s in got} == want
    node = next(n for n in rows if n.system == "gpu-a")
    assert node.port_id.startswith("02:") and (node.port_descr in ("", NODE_NIC))  # lldpd: the NIC's MAC
    up = next(n for n in rows if n.system == "spine1")
    assert same_port(up.port_id, leaf.uplinks[0].peer_iface)
    fabric.set_admin("leaf1", leaf.interfaces[0], False)  # a shut port sends and hears no LLDP
    assert "gpu-a" not in {n.system for n in parse_neighbours(client.lldp.parser, cli.run(client.line(client.lldp.command)).output)}


@pytest.mark.parametrize("dialect", sorted(CLIENT))
def test_lldp_off_is_a_refusal_or_an_empty_table_never_a_neighbour(dialect):
    _, _, cli, _ = _cli(dialect, lldp_off=True)
    client = load_switch_dialect(CLIENT[dialect])
    out = cli.run(client.line(client.lldp.command))
    if out.exit_status == 0:
        assert parse_neighbours(client.lldp.parser, out.output) == []
    else:
        assert dialect in ("sonic", "nxos")


def test_the_spine_sees_the_leaf_port_back():
    _, leaf, _, peers = _cli("sonic")
    up = leaf.uplinks[0]
    assert peers[up.peer][up.peer_iface].system == "leaf1" and peers[up.peer][up.peer_iface].port_id == up.iface


def test_miscabling_moves_the_cables_not_the_annotations():
    planned = {"gpu-a": "Ethernet0", "gpu-b": "Ethernet8", "gpu-c": "Ethernet16"}
    assert miscable(planned, ["gpu-a", "gpu-b"]) == {"gpu-a": "Ethernet8", "gpu-b": "Ethernet0", "gpu-c": "Ethernet16"}
    assert miscable(planned, ["gpu-c"], ["Ethernet0", "Ethernet24"])["gpu-c"] == "Ethernet24"
    assert miscable(planned, []) == planned


# -- rail cables (per NIC) ---------------------------------------------------------------------------------------
def _rails(*defects: str):
    from drills.acceptance.port_nics import port_macs
    from drills.twin.profile import load_profile
    from drills.twin.workloads import accept_tools as T
    from drills.twin.workloads.fabric_component import _rail_cables

    profile = load_profile("expansion", defects=defects)
    cables = _rail_cables(profile)
    where = {f"{k}": (leaf, port) for leaf, c in cables.items() for k, port in c.items()}
    hcas = [(h, True, 400, "Ethernet") for h in profile.node_pools["new"].rdma_devices]
    macs = port_macs("\n".join(T.ibstat(hcas, "gpu-new-02")))
    peers = neighbours([], {}, cables)
    return profile, where, macs, peers


def test_rail_leaves_cable_each_nic_on_its_rails_leaf_and_show_the_mac_ibstat_encodes():
    profile, where, macs, peers = _rails("nic-uncabled")  # its overlay makes leaf-3/leaf-5 rail leaves
    assert [where[f"gpu-new-01/mlx5_{i}"][0] for i in range(8)] == ["leaf-3"] * 4 + ["leaf-5"] * 4
    leaf, port = where["gpu-new-02/mlx5_4"]
    assert peers[leaf][port].system == "gpu-new-02" and peers[leaf][port].port_id == macs["mlx5_4"]
    # the node's own leaf port (its annotation) is its first NIC's
    assert profile.fabric.switches["leaf-3"].downlinks["gpu-new-02"] == where["gpu-new-02/mlx5_0"][1]
    assert "gpu-new-02/mlx5_5" not in where  # nic-uncabled: in no leaf


def test_rail_swapped_trades_nic_3_and_nic_4_between_the_rail_leaves():
    _, where, macs, peers = _rails("rail-swapped")
    assert where["gpu-new-02/mlx5_3"][0] == "leaf-5" and where["gpu-new-02/mlx5_4"][0] == "leaf-3"
    assert where["gpu-new-01/mlx5_3"][0] == "leaf-3"  # the other node untouched
    leaf, port = where["gpu-new-02/mlx5_3"]
    assert peers[leaf][port].port_id == macs["mlx5_3"]
