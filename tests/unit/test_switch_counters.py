"""Interface counters: read from real outputs (values written by hand from the files), the twin's
counters read back through the same parsers, and the judgement of the uplink drop's effect."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

from drills.faults.switch.counters import read_counters
from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.parse import StateUnreadable
from drills.measure.nccl import judge_uplink_effect
from drills.twin.fabric import leaf_spine
from drills.twin.fabric.cli import SwitchCli
from drills.twin.fabric.topology import Fabric
from drills.twin.fabric.traffic import PACKET_BYTES, Traffic

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "switch"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def timestamp(self) -> float:
        return self.t


EXPECTED = load_yaml((REAL / "EXPECTED.yaml").read_text())
COUNTED = [(name, iface) for name, case in sorted(EXPECTED.items()) for iface in case.get("counters") or {}]


def test_every_os_has_real_counter_outputs():
    files = {name: EXPECTED[name]["dialect"] for name, _ in COUNTED}
    per_os = {d: list(files.values()).count(d) for d in ("sonic", "onyx", "cumulus", "nxos", "eos")}
    assert min(per_os.values()) >= 1 and sum(per_os.values()) >= 20, per_os


@pytest.mark.parametrize("name, iface", COUNTED)
def test_real_outputs_read_right(name, iface):
    case = EXPECTED[name]
    want = case["counters"][iface]
    text = (REAL / name).read_text(encoding="utf-8").split("\n", 1)[1]
    dialect = load_switch_dialect(case["dialect"])
    if want == "unreadable":
        with pytest.raises(StateUnreadable):
            read_counters(dialect, text, iface)
        return
    c = read_counters(dialect, text, iface)
    assert (c.rx_packets, c.tx_packets) == (want["rx_packets"], want["tx_packets"])
    for got, expected in ((c.rx_bps, want["rx_bps"]), (c.tx_bps, want["tx_bps"])):
        assert got == (None if expected is None else pytest.approx(expected, rel=1e-9, abs=1e-6))


@pytest.fixture
def fabric():
    clock = Clock()
    specs = leaf_spine(leaves=5, spines=2, downlinks=1, dialects=("sonic", "nxos", "nvue", "eos", "onyx"))
    fab = Fabric(specs, clock=clock)
    return fab, Traffic(fab), clock, [s for s in specs if s.role == "leaf"]


def _read(fab, traffic, spec, iface):
    cli = SwitchCli(fab, spec.name, spec.dialect, traffic=traffic)
    session = cli.session()
    session.mode = "enable" if spec.dialect == "onyx" else session.mode
    dialect = load_switch_dialect(spec.dialect)
    return read_counters(dialect, session.execute(dialect.command("counters", iface)[0]).output, iface)


def test_every_dialect_shows_the_twins_counters_and_they_stop_when_the_port_is_down(fabric):
    fab, traffic, clock, leaves = fabric
    traffic.carry("job", {s.name: 8 * PACKET_BYTES * 1000 for s in leaves})  # 8000 packets/s per leaf
    clock.t += 10
    for spec in leaves:
        c = _read(fab, traffic, spec, spec.uplinks[0].iface)
        assert (c.rx_packets, c.tx_packets) == (40000, 40000), spec.dialect  # half of the leaf's load each
        # NVUE prints no rate; SONiC rounds MB/s to two decimals
        assert c.bps is None or c.bps == pytest.approx(2 * 4000 * PACKET_BYTES * 8, rel=1e-3), spec.dialect
    fab.set_admin(leaves[0].name, leaves[0].uplinks[0].iface, False)
    clock.t += 10
    spec = leaves[0]
    down, other = _read(fab, traffic, spec, spec.uplinks[0].iface), _read(fab, traffic, spec, spec.uplinks[1].iface)
    assert (down.rx_packets, down.bps) == (40000, 0.0)  # counted until the shutdown, nothing since
    assert other.rx_packets == 40000 + 80000  # the whole leaf's load moved to the other uplink


def test_an_idle_uplink_carries_nothing_and_losing_it_costs_the_leaf_nothing():
    clock = Clock()
    specs = leaf_spine(leaves=2, spines=2, downlinks=1, dialects=("sonic",))
    fab = Fabric(specs, clock=clock, idle_uplinks=1)
    traffic = Traffic(fab)
    traffic.carry("job", {"leaf1": 1e9, "leaf2": 1e9})
    clock.t += 5
    idle, busy = (u.iface for u in specs[0].uplinks)
    assert traffic.counters("leaf1", idle).in_packets == 0 and traffic.counters("leaf1", busy).in_packets > 0
    before = fab.redundancy("leaf1")
    fab.set_admin("leaf1", idle, False)
    assert fab.redundancy("leaf1") == before and not fab.redundancy("leaf1").isolated


@dataclass
class Uplink:
    switch: str = "leaf-1"
    interface: str = "Ethernet240"
    carried_packets: int | None = None
    carried_bps: float | None = None
    packets_after: int | None = None


def test_effect_is_judged_from_the_counters_else_from_the_job():
    ok = judge_uplink_effect(Uplink(carried_packets=1200, carried_bps=2e11, packets_after=0))
    assert ok.passed and "200.0 Gb/s" in ok.reason and "0 packet(s) once it was down" in ok.reason
    idle = judge_uplink_effect(Uplink(carried_packets=0, carried_bps=0.0))
    assert idle.inconclusive and idle.verdict == "inconclusive"
    assert idle.reason.startswith("inconclusive: the fault had no effect: leaf-1 Ethernet240 carried no traffic")
    seen = judge_uplink_effect(Uplink(), detected=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert seen.passed and "the job saw the drop" in seen.reason
    assert judge_uplink_effect(Uplink()).inconclusive


def test_an_output_that_shows_only_another_port_is_not_read_as_the_asked_ports_counters():
    eos = load_switch_dialect("eos")
    text = (REAL / "eos-show_interfaces-7.txt").read_text(encoding="utf-8").split("\n", 1)[1]
    only_et10 = text[text.index("Ethernet10 is up"):text.index("Ethernet11 is up")]  # one real block
    assert read_counters(eos, only_et10, "Et10").rx_packets == 510740
    with pytest.raises(StateUnreadable):
        read_counters(eos, only_et10, "Ethernet1")  # a prefix of Ethernet10, not in the output
