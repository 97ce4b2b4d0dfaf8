"""The acceptance port check on every switch dialect the drills speak, over SSH to the twin's switches:
a healthy RoCE port (up, 400G, jumbo MTU, no errors, PFC and ECN on) is a GO on SONiC, NX-OS, EOS, Cumulus
NVUE and Onyx alike — before, anything but SONiC was `not_run` ("implemented for SONiC only") — and the
port that lost its lossless config is a no-go naming PFC (and ECN where the OS shows it per port). The port
is judged only once the leaf's LLDP shows the node on it: a node cabled elsewhere is `wrong_port` naming both
ports, and a switch without LLDP leaves the check `not_run` (the annotation alone is not evidence)."""

from __future__ import annotations

import pytest
import yaml

from drills.acceptance.switch import check_ports
from drills.profile.model import SwitchConfig, load_target
from drills.twin.fabric import leaf_spine, start_fabric

pytestmark = pytest.mark.slow

# leaf6 is a second Onyx: Onyx's RoCE (`show roce`) is switch-wide, so its lossy port gets a switch of its own
DIALECTS = ("sonic", "nxos", "nvue", "eos", "onyx", "onyx")
LOSSY_LEAVES = ("leaf1", "leaf2", "leaf3", "leaf4", "leaf6")


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    spec = leaf_spine(leaves=6, spines=2, downlinks=2, dialects=DIALECTS)
    lossy = {(s.name, s.interfaces[1]) for s in spec if s.name in LOSSY_LEAVES}  # without PFC and ECN
    # the cabling's truth: node `<leaf>-ok` on the first port, `<leaf>-lossy` on the second (what LLDP shows)
    cabled = {s.name: {f"{s.name}-ok": s.interfaces[0], f"{s.name}-lossy": s.interfaces[1]} for s in spec
              if s.role == "leaf"}
    handle = start_fabric(spec, tmp_path_factory.mktemp("fabric"), lossy_ports=lossy, downlinks=cabled)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def no_lldp(tmp_path_factory):
    spec = leaf_spine(leaves=2, spines=1, downlinks=1, dialects=("sonic", "eos"))
    cabled = {s.name: {f"{s.name}-ok": s.interfaces[0]} for s in spec if s.role == "leaf"}
    handle = start_fabric(spec, tmp_path_factory.mktemp("nolldp"), downlinks=cabled, lldp_off=True)
    yield handle
    handle.stop()


def _inventory(fab) -> list[SwitchConfig]:
    entries = yaml.safe_load(fab.inventory_file.read_text())["switches"]
    return [SwitchConfig.model_validate(e) for e in entries]


def test_a_healthy_roce_port_is_a_go_and_a_lossy_one_a_no_go_on_every_dialect(fab):
    profile = load_target(None)
    t = profile.acceptance.thresholds.model_copy(update={"port_mtu": 9100})
    ports, dialect_of = {}, {}
    for leaf in fab.fabric.leaves():
        ok, lossy = fab.fabric.interfaces(leaf)[:2]
        ports[f"{leaf}-ok"] = (leaf, ok)
        ports[f"{leaf}-lossy"] = (leaf, lossy)
        dialect_of[leaf] = fab.entry(leaf)["dialect"]
    raw: dict = {}
    results = {r.node: r for r in check_ports(profile, _inventory(fab), ports, t, raw)}
    assert set(dialect_of.values()) == {"sonic", "nxos", "nvue", "eos", "onyx"}
    for leaf, dialect in dialect_of.items():
        good, bad = results[f"{leaf}-ok"], results[f"{leaf}-lossy"]
        if leaf not in LOSSY_LEAVES:  # the Onyx without a lossy port: both ports are lossless
            assert good.go and bad.go, (good.reason, bad.reason)
            continue
        if leaf == "leaf6":  # switch-wide RoCE not configured: no port of this Onyx can pass
            good = results["leaf5-ok"]
        assert good.go, (dialect, good.reason)
        assert good.measured["speed_gbps"] == 400 and good.measured["mtu"] >= 9100 and good.measured["pfc"]
        assert good.measured["ecn"] and sum(good.measured["errors"].values()) == 0 and good.measured["errors"]
        assert not bad.go and bad.failure == "port_config" and "PFC" in bad.reason, (dialect, bad.reason)
        assert (f"{leaf}-ok", "switch-port", None) in raw  # the switch's own words, for the report


def test_a_port_whose_lldp_shows_another_node_is_wrong_port_naming_both_on_every_dialect(fab):
    """The annotation swapped (`<leaf>-ok` annotated with the lossy node's port): LLDP on the leaf shows the node
    on its real port, so the check names both ports and judges neither; before, it judged the annotated port."""
    profile = load_target(None)
    t = profile.acceptance.thresholds.model_copy(update={"port_mtu": 9100})
    ports = {}
    for leaf in ("leaf1", "leaf2", "leaf3", "leaf4", "leaf5"):
        ok, lossy = fab.fabric.interfaces(leaf)[:2]
        ports[f"{leaf}-ok"] = (leaf, lossy)  # stale: names the port of the other node
        ports[f"{leaf}-elsewhere"] = (leaf, fab.fabric.interfaces(leaf)[2])  # an uplink; the node is on no port
    results = {r.node: r for r in check_ports(profile, _inventory(fab), ports, t, {})}
    for leaf in ("leaf1", "leaf2", "leaf3", "leaf4", "leaf5"):
        ok, lossy = fab.fabric.interfaces(leaf)[:2]
        r = results[f"{leaf}-ok"]
        assert not r.go and r.failure == "wrong_port", (leaf, r.reason)
        assert f"names {leaf} {lossy}" in r.reason and f"{leaf}-lossy" in r.reason and "speed_gbps" not in r.measured
        assert [row["local"] for row in r.measured["lldp_facing_node"]] == [ok] and r.evidence["lldp_source"]
        gone = results[f"{leaf}-elsewhere"]  # the annotated port faces a spine, the node is nowhere on the leaf
        assert not gone.go and gone.failure == "wrong_port" and "faces spine1" in gone.reason, gone.reason


def test_without_lldp_the_port_check_says_so_and_never_trusts_the_annotation(no_lldp):
    profile = load_target(None)
    t = profile.acceptance.thresholds.model_copy(update={"port_mtu": 9100, "roce": False})
    ports = {f"{leaf}-ok": (leaf, no_lldp.fabric.interfaces(leaf)[0]) for leaf in ("leaf1", "leaf2")}
    results = {r.node: r for r in check_ports(profile, _inventory(no_lldp), ports, t, {})}
    sonic, eos = results["leaf1-ok"], results["leaf2-ok"]
    assert not sonic.go and sonic.failure == "not_run" and "LLDP not available" in sonic.reason, sonic.reason
    assert not eos.go and eos.failure == "not_run" and "shows no neighbour" in eos.reason, eos.reason  # no rows
