"""The uplink drill confirms both ends of the cable it will cut by LLDP before anything is journaled or shut
(over SSH to the twin's switches, no cluster): on a healthy fabric the far end LLDP confirms on both switches is
journaled, and it is the one the revert's verify reads back; an inventory whose `peers` name another far end
(defect stale-uplink-peers) or a fabric without LLDP (lldp-disabled) is a precondition not met, naming what was
read, and no switch saw a change."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drills.core.record import Category, category_of_error
from drills.faults.switch import uplink
from drills.faults.switch.lldp import LinkMismatch, LldpUnavailable
from drills.profile.model import SwitchConfig, load_target
from drills.twin.fabric import leaf_spine, start_fabric
from drills.twin.fabric.state import _peers
from drills.validate.local import switch_checks

pytestmark = pytest.mark.slow

DIALECTS = ("sonic", "nxos", "nvue", "eos", "onyx")


def _faults(defect: str) -> dict:
    """The fabric port faults a twin defect file sets (this module applies them to its own switches)."""
    path = Path(__file__).parents[2] / "drills/twin/defects" / f"{defect}.yaml"
    return yaml.safe_load(path.read_text())["overlay"]["fabric"]["port_faults"]


STALE = _faults("stale-uplink-peers")  # {stale_peers: true}: the inventory's `peers` rotated by one uplink
OFF = _faults("lldp-disabled")  # {lldp_off: true}


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    spec = leaf_spine(leaves=5, spines=2, downlinks=1, dialects=DIALECTS, spine_dialect="nxos")
    handle = start_fabric(spec, tmp_path_factory.mktemp("fabric"), downlinks={"leaf1": {"gpu-a": spec[0].interfaces[0]}})
    yield handle
    handle.stop()


def _inventory(handle, stale: bool = False) -> list[SwitchConfig]:
    """The inventory the twin wrote; `stale`: with its `peers` as defect stale-uplink-peers writes them."""
    entries = yaml.safe_load(handle.inventory_file.read_text())["switches"]
    if stale:
        entries = [{**e, "peers": _peers(handle.fabric.spec(e["name"]).uplinks, True)} for e in entries]
    return [SwitchConfig.model_validate(e) for e in entries]


def _no_change(handle) -> bool:
    return not any(w in line for cli in (s.cli for s in handle.servers.values()) for line in cli.command_log()
                   for w in ("shutdown", "link state", "shut"))


@pytest.mark.parametrize("leaf", ["leaf1", "leaf2", "leaf3", "leaf4", "leaf5"])
def test_the_far_end_journaled_is_the_one_lldp_confirms_on_both_switches(fab, leaf):
    handle, profile = fab, load_target(None)
    inv = _inventory(handle)
    cfg = next(c for c in inv if c.name == leaf)
    truth = handle.fabric.spec(leaf).uplinks[0]
    plan = uplink.plan(None, profile, switch=cfg, interface=truth.iface, inventory=inv)
    peer = plan.undo["peer"]
    assert (peer["name"], peer["interface"]) == (truth.peer, truth.peer_iface) and peer["switch"]["name"] == truth.peer
    assert peer["lldp"]["near"]["source"].startswith(f"ssh {leaf}: ") and peer["lldp"]["far"]["system"] == leaf
    assert _no_change(handle)


def test_a_stale_inventory_far_end_is_a_precondition_not_met_naming_both(fab):
    handle, profile = fab, load_target(None)
    inv = _inventory(handle, stale=STALE["stale_peers"])
    for leaf in ("leaf1", "leaf2", "leaf3", "leaf4", "leaf5"):
        truth = handle.fabric.spec(leaf).uplinks[0]
        claimed = next(c for c in inv if c.name == leaf).peers[truth.iface]
        assert claimed != f"{truth.peer}:{truth.peer_iface}"
        with pytest.raises(LinkMismatch) as err:
            uplink.plan(None, profile, switch=next(c for c in inv if c.name == leaf), interface=truth.iface,
                        inventory=inv)
        why = str(err.value)
        assert f"inventory says it is cabled to {claimed.replace(':', ' ')}" in why, why
        assert f"LLDP on both ends says {truth.peer} {truth.peer_iface}" in why and "nothing was shut" in why
        assert category_of_error(err.value, injected=False) is Category.PRECONDITION_NOT_MET
    assert _no_change(handle)


def test_a_far_switch_outside_the_inventory_is_journaled_as_lldp_names_it(fab):
    """A site's inventory of leaves only: the far end is the one LLDP names (the verify says it cannot read it)."""
    handle, profile = fab, load_target(None)
    leaves = [c for c in _inventory(handle) if c.name.startswith("leaf")]
    truth = handle.fabric.spec("leaf2").uplinks[0]
    plan = uplink.plan(None, profile, switch=next(c for c in leaves if c.name == "leaf2"), interface=truth.iface,
                       inventory=leaves)
    peer = plan.undo["peer"]
    assert (peer["name"], peer["switch"]) == (truth.peer, None) and peer["interface"] == truth.peer_iface
    assert _no_change(handle)


def test_without_lldp_the_uplink_is_not_cut(fab):
    """Defect lldp-disabled, switched on for this test on the module's switches (what `lldp_off` sets at start)."""
    handle, profile = fab, load_target(None)
    inv = _inventory(handle)
    for server in handle.servers.values():
        server.cli.lldp_off = OFF["lldp_off"]
    for leaf in ("leaf1", "leaf2", "leaf4"):  # SONiC and NX-OS refuse; EOS prints an empty table
        truth = handle.fabric.spec(leaf).uplinks[0]
        with pytest.raises((LldpUnavailable, LinkMismatch)) as err:
            uplink.plan(None, profile, switch=next(c for c in inv if c.name == leaf), interface=truth.iface,
                        inventory=inv)
        assert ("LLDP is not available" in str(err.value)) == (leaf != "leaf4"), str(err.value)
        assert "no neighbour" in str(err.value) or leaf != "leaf4"
    twin_info = {"switches": [c.model_dump(mode="json") for c in inv if c.name == "leaf1"]}
    (check,) = switch_checks(profile, twin_info)  # `drills validate` says so before any drill
    assert not check.ok and "LLDP is not available" in check.detail, check
    for server in handle.servers.values():
        server.cli.lldp_off = False
    (check,) = switch_checks(profile, twin_info)
    assert check.ok and "far ends seen by LLDP (spine1 " in check.detail, check
    assert _no_change(handle)


def test_a_site_without_lldp_opts_out_explicitly_and_the_plan_says_the_far_end_is_the_inventorys(fab):
    """`fabric.lldp: unavailable` (with its reason): the switches are not asked for LLDP (they run none); the far end
    journaled is the inventory's `peers`, marked as such in the undo spec and the plan's sentence (the drill's record
    carries the same words; its verdict still needs the fault's effect on the job). Without the opt-out the same
    fabric refuses (test above); with it and no `peers`, nothing is shut either."""
    from drills.core.errors import CheckFailed
    from drills.profile.model import FabricConfig

    handle = fab
    profile = load_target(None)
    profile = profile.model_copy(update={"fabric": FabricConfig(lldp="unavailable", lldp_reason="vendor image without lldpd")})
    inv = _inventory(handle)
    for server in handle.servers.values():
        server.cli.lldp_off = OFF["lldp_off"]
    try:
        truth = handle.fabric.spec("leaf1").uplinks[0]
        plan = uplink.plan(None, profile, switch=next(c for c in inv if c.name == "leaf1"), interface=truth.iface,
                           inventory=inv)
        peer = plan.undo["peer"]
        assert (peer["name"], peer["interface"]) == (truth.peer, truth.peer_iface) and "lldp" not in peer
        words = ("port identity from the inventory, not verified by the fabric (fabric.lldp: unavailable — vendor "
                 "image without lldpd)")
        assert peer["identity"] == words and plan.description.endswith(f"{truth.peer_iface}: {words}")
        bare = [c.model_copy(update={"peers": {}}) if c.name == "leaf1" else c for c in inv]
        with pytest.raises(CheckFailed, match="names no far end for it"):
            uplink.plan(None, profile, switch=next(c for c in bare if c.name == "leaf1"), interface=truth.iface,
                        inventory=bare)
        with pytest.raises(ValueError, match="needs fabric.lldp_reason"):
            FabricConfig(lldp="unavailable")
        twin_info = {"switches": [c.model_dump(mode="json") for c in inv if c.name == "leaf1"]}
        (check,) = switch_checks(profile, twin_info)  # `drills validate` says the same, without asking for LLDP
        assert check.ok and f"far ends from the inventory ({truth.iface} → {truth.peer}:{truth.peer_iface}, " \
            in check.detail and check.detail.endswith(f"): {words}"), check
    finally:
        for server in handle.servers.values():
            server.cli.lldp_off = False
    assert _no_change(handle)
