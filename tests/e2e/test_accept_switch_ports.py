"""The acceptance port check on every switch dialect the drills speak, over SSH to the twin's switches:
a healthy RoCE port (up, 400G, jumbo MTU, no errors, PFC and ECN on) is a GO on SONiC, NX-OS, EOS, Cumulus
NVUE and Onyx alike — before, anything but SONiC was `not_run` ("implemented for SONiC only") — and the
port that lost its lossless config is a no-go naming PFC (and ECN where the OS shows it per port)."""

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
    handle = start_fabric(spec, tmp_path_factory.mktemp("fabric"), lossy_ports=lossy)
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
