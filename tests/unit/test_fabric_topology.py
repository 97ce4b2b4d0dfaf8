"""The fabric's link-state model: redundancy, oper state across cables, events, validation."""

from __future__ import annotations

import asyncio
import threading

import pytest

from drills.core.errors import InvalidProfile
from drills.twin.fabric import Fabric, UnknownInterface, fabric_specs, leaf_spine

SPECS = [
    {"name": "spine1", "role": "spine", "dialect": "nxos", "interfaces": ["Ethernet1/1", "Ethernet1/2"]},
    {"name": "spine2", "role": "spine", "dialect": "nxos", "interfaces": ["Ethernet1/1", "Ethernet1/2"]},
    {
        "name": "leaf1", "role": "leaf", "dialect": "sonic",
        "interfaces": ["Ethernet0", "Ethernet8", "Ethernet16"],
        "uplinks": [
            {"iface": "Ethernet8", "peer": "spine1", "peer_iface": "Ethernet1/1"},
            {"iface": "Ethernet16", "peer": "spine2", "peer_iface": "Ethernet1/1"},
        ],
    },
    {
        "name": "leaf2", "role": "leaf", "dialect": "nvue", "interfaces": ["swp1", "swp2"],
        "uplinks": [{"iface": "swp2", "peer": "spine1", "peer_iface": "Ethernet1/2"}],
    },
]


def test_all_up_at_start():
    f = Fabric(SPECS)
    assert f.leaves() == ["leaf1", "leaf2"]
    assert f.leaf_uplinks_up("leaf1") == 2
    st = f.iface_state("leaf1", "Ethernet8")
    assert (st.admin, st.oper, st.peer) == (True, True, ("spine1", "Ethernet1/1"))


def test_shutting_one_uplink_degrades_then_isolates():
    f = Fabric(SPECS)
    ev = f.set_admin("leaf1", "Ethernet8", False)
    assert (ev.switch, ev.iface, ev.admin, ev.oper, ev.uplink) == ("leaf1", "Ethernet8", False, False, True)
    assert (ev.redundancy.up, ev.redundancy.total, ev.redundancy.degraded, ev.isolated) == (1, 2, True, False)
    ev = f.set_admin("leaf1", "Ethernet16", False)
    assert ev.isolated and f.leaf_uplinks_up("leaf1") == 0


def test_spine_side_shutdown_takes_the_cable_down_for_the_leaf():
    f = Fabric(SPECS)
    ev = f.set_admin("spine1", "Ethernet1/2", False)
    assert ev.leaf == "leaf2" and ev.isolated
    leaf_end = f.iface_state("leaf2", "swp2")
    assert (leaf_end.admin, leaf_end.oper) == (True, False)
    f.set_admin("spine1", "Ethernet1/2", True)
    assert f.iface_state("leaf2", "swp2").oper


def test_server_port_change_has_no_redundancy_and_no_change_no_event():
    f = Fabric(SPECS)
    seen = []
    f.on_change(seen.append)
    ev = f.set_admin("leaf1", "Ethernet0", False)
    assert not ev.uplink and ev.redundancy.up == 2  # still the leaf's view, uplinks untouched
    assert f.set_admin("leaf1", "Ethernet0", False) is None
    assert [e.seq for e in seen] == [ev.seq]


def test_unknown_names_raise_unknown_interface():
    f = Fabric(SPECS)
    with pytest.raises(UnknownInterface, match="no interface 'Ethernet99'"):
        f.set_admin("leaf1", "Ethernet99", False)
    with pytest.raises(UnknownInterface, match="no switch named 'leafX'"):
        f.iface_state("leafX", "Ethernet0")
    assert not f.has_iface("leaf1", "swp1")


def test_unsubscribe_stops_delivery():
    f = Fabric(SPECS)
    seen = []
    off = f.on_change(seen.append)
    f.set_admin("leaf1", "Ethernet8", False)
    off()
    f.set_admin("leaf1", "Ethernet8", True)
    assert len(seen) == 1


def test_loop_subscription_runs_on_the_loop_thread():
    f = Fabric(SPECS)

    async def main():
        loop = asyncio.get_running_loop()
        got: asyncio.Queue = asyncio.Queue()
        f.on_change(lambda ev: got.put_nowait((ev, threading.get_ident())), loop=loop)
        await asyncio.to_thread(f.set_admin, "leaf1", "Ethernet8", False, "test")
        ev, thread = await asyncio.wait_for(got.get(), 5)
        return ev, thread, threading.get_ident()

    ev, cb_thread, loop_thread = asyncio.run(main())
    assert cb_thread == loop_thread
    assert ev.source == "test" and ev.redundancy.up == 1


def test_a_failing_subscriber_does_not_break_the_change():
    f = Fabric(SPECS)
    f.on_change(lambda ev: 1 / 0)
    assert f.set_admin("leaf1", "Ethernet8", False) is not None
    assert not f.iface_state("leaf1", "Ethernet8").admin


def test_concurrent_toggles_keep_sequence_and_state_consistent():
    f = Fabric(SPECS)
    seqs = []
    f.on_change(lambda ev: seqs.append(ev.seq))

    def flap(iface):
        for i in range(200):
            f.set_admin("leaf1", iface, i % 2 == 1)

    threads = [threading.Thread(target=flap, args=(i,)) for i in ("Ethernet8", "Ethernet16", "Ethernet0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seqs == list(range(1, 601))  # every flip is one event, delivered in order
    assert f.leaf_uplinks_up("leaf1") == 2


@pytest.mark.parametrize(
    "bad, message",
    [
        (SPECS + [SPECS[0]], "declared twice"),
        ([{**SPECS[0], "role": "core"}] + SPECS[1:], "role 'core'"),
        ([SPECS[0], SPECS[1], {**SPECS[2], "uplinks": [{"iface": "Ethernet8", "peer": "leaf2", "peer_iface": "swp1"}]}, SPECS[3]],
         "not a spine"),
        ([SPECS[0], SPECS[1], {**SPECS[2], "uplinks": [{"iface": "Ethernet9", "peer": "spine1", "peer_iface": "Ethernet1/1"}]}, SPECS[3]],
         "no interface 'Ethernet9'"),
        ([SPECS[0], SPECS[1], SPECS[2], {**SPECS[3], "uplinks": [{"iface": "swp2", "peer": "spine1", "peer_iface": "Ethernet1/1"}]}],
         "reuses a cabled port"),
    ],
)
def test_invalid_specs_are_one_clear_line(bad, message):
    with pytest.raises(InvalidProfile, match=message):
        Fabric(bad)


def test_leaf_spine_generator_wires_every_leaf_to_every_spine():
    specs = leaf_spine(leaves=3, spines=2, downlinks=2)
    f = Fabric(specs)
    assert [s.dialect for s in specs[:3]] == ["sonic", "nxos", "nvue"]
    assert specs[0].interfaces[:3] == ("Ethernet0", "Ethernet8", "Ethernet16")
    assert specs[1].uplinks[0].iface == "Ethernet1/3" and specs[2].uplinks[1].iface == "swp4"
    assert all(f.redundancy(leaf).total == 2 for leaf in f.leaves())
    assert f.iface_state("spine2", specs[2].uplinks[1].peer_iface).peer == ("leaf3", "swp4")


def test_fabric_specs_adapter_accepts_dicts_counts_and_models():
    from pydantic import BaseModel

    class Uplink(BaseModel):
        iface: str
        peer: str
        peer_iface: str

    class Switch(BaseModel):
        name: str
        role: str
        dialect: str
        interfaces: list[str]
        uplinks: list[Uplink] = []

    class FabricSection(BaseModel):
        switches: list[Switch]

    model = FabricSection(switches=[Switch(**s) for s in SPECS])
    assert fabric_specs(model) == fabric_specs({"switches": SPECS}) == fabric_specs(SPECS)
    assert len(fabric_specs({"leaves": 2, "spines": 1})) == 3
    with pytest.raises(InvalidProfile, match="unknown switch dialect 'junos'"):
        fabric_specs([{**SPECS[0], "dialect": "junos"}])


def test_the_twin_profile_fabric_plugs_in():
    from drills.twin.profile import load_profile

    profile = load_profile("minimal")
    f = Fabric(fabric_specs(profile.fabric))
    assert set(f.leaves()) == set(profile.fabric.leaves)
    assert all(f.redundancy(leaf).total == profile.fabric.uplinks_per_leaf for leaf in f.leaves())
