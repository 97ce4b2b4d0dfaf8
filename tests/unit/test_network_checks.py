"""The network drill's pure parts: throughput baseline and sustained recovery (interpolated between step
lines), NCCL transport / job-health / throughput verdicts, and picking the uplink of the job's leaf."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from drills.measure.nccl import (TransportSeen, UplinkRecovery, judge_job_health, judge_throughput, judge_transport,
                                 with_nccl_cause)
from drills.measure.throughput import Sample, baseline, find_recovery, overlay
from drills.profile.model import SwitchConfig, parse_profile
from drills.core.errors import CheckFailed, InvalidProfile
from drills.faults.switch.target import leaf_uplink, switch_inventory
from drills.verdicts.timeline import Timeline, judge_recovery

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RDMA = ("mlx5_0:1/RoCE", "mlx5_1:1/RoCE")


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def line(t: float, step: int, factor: float, worker: str = "w0") -> Sample:
    return Sample(at(t), step, 256.0 * factor, 1.0 / factor, worker)


def piecewise(changes: list[tuple[float, float]], until: float, every: int = 10, worker: str = "w0") -> list[Sample]:
    """Step lines every `every` steps of a job whose rate (steps/s = factor) changes at the given times."""
    out, t, step = [], 0.0, 0.0
    changes = sorted(changes)
    while t < until:
        factor = next(f for start, f in reversed(changes) if start <= t)
        nxt = min([c for c, _ in changes if c > t] + [until])
        to_line = (every - step % every) or every
        if t + to_line / factor <= nxt:
            t += to_line / factor
            step = round(step + to_line)
            out.append(line(t, int(step), factor, worker))
        else:
            step += (nxt - t) * factor
            t = nxt
    return out


def test_baseline_is_the_mean_of_the_lines_before_the_fault():
    samples = [line(t, int(t), 1.0) for t in range(0, 300, 10)] + [line(305, 305, 0.3)]
    assert baseline(samples, at(300)) == pytest.approx(256.0)
    assert baseline([line(5, 5, 0.5)], at(300)) == pytest.approx(128.0)  # too few recent lines: the last ones
    assert baseline(samples, at(0)) is None


def test_recovery_is_interpolated_between_the_slow_and_the_fast_line():
    # healthy, fault at 100 (0.3), rerouted at 115 (0.6), rebalanced at 220 (0.95): restored exactly at 220
    samples = piecewise([(0, 1.0), (100, 0.3), (115, 0.6), (220, 0.95)], until=600)
    rec = find_recovery(samples, at(100), 256.0, 0.9, 60.0)
    assert rec is not None and rec.interpolated
    assert abs((rec.at - at(220)).total_seconds()) < 0.01
    assert rec.first_line > rec.at and rec.sustained_mean == pytest.approx(256 * 0.95)


def test_recovery_waits_for_the_sustain_window_and_ignores_a_short_rise():
    samples = piecewise([(0, 1.0), (100, 0.5), (200, 1.0), (230, 0.5), (300, 1.0)], until=340)
    assert find_recovery(samples, at(100), 256.0, 0.9, 60.0) is None  # back at 300, window not over yet
    more = piecewise([(0, 1.0), (100, 0.5), (200, 1.0), (230, 0.5), (300, 1.0)], until=600)
    rec = find_recovery(more, at(100), 256.0, 0.9, 60.0)
    assert rec is not None and abs((rec.at - at(300)).total_seconds()) < 0.01


def test_a_new_worker_recovers_at_its_first_line_and_never_recovering_is_none():
    old = piecewise([(0, 1.0), (100, 0.01)], until=200)
    new = [line(700 + i * 10, 6001 + i * 10, 1.0, "w-new") for i in range(20)]
    rec = find_recovery(old + new, at(100), 256.0, 0.9, 60.0)
    assert rec is not None and rec.at == at(700) and not rec.interpolated
    assert find_recovery(piecewise([(0, 1.0), (100, 0.2)], until=1000), at(100), 256.0, 0.9, 60.0) is None


def test_overlay_is_relative_to_the_fault_and_one_point_per_instant():
    samples = [line(90, 90, 1.0, "a"), line(90, 90, 1.0, "b"), line(110, 100, 0.5, "a")]
    assert overlay(samples, at(100)) == [(-10.0, 256.0), (10.0, 128.0)]


def _rec(**kw) -> UplinkRecovery:
    base = dict(timeline=Timeline(injected=at(100), recovered=at(220)), path="rerouted",
                before={"w0": TransportSeen("w0", at(0), "IB", RDMA), "w1": TransportSeen("w1", at(0), "IB", RDMA)},
                after=(), warnings=2, timeouts=0, warn_lines=(), restarts=0, baseline=256.0, recovered=243.0,
                unit="samples/s", ratio=0.9, sustain_s=60.0, resumed_step=None, latest_checkpoint=None, ended=None)
    return UplinkRecovery(**{**base, **kw})


def test_transport_verdicts():
    ok = judge_transport(_rec())
    assert ok.passed and "NET/IB (mlx5_0:1/RoCE, mlx5_1:1/RoCE)" in ok.reason
    fell = judge_transport(_rec(after=(TransportSeen("w0", at(100.5), "Socket", ("eth0:10.0.0.1<0>",)),)))
    assert not fell.passed and "fell back to NET/Socket 0.5s after the fault on w0" in fell.reason
    reinit = judge_transport(_rec(after=(TransportSeen("w0-new", at(900), "Socket", (), after_restart=True),)))
    assert not reinit.passed and "at its re-init after the restart" in reinit.reason
    before = judge_transport(_rec(before={"w0": TransportSeen("w0", at(0), "Socket", ())}))
    assert not before.passed and "already on NET/Socket before the fault" in before.reason
    assert not judge_transport(_rec(before={})).passed


def test_job_health_verdicts():
    assert judge_job_health(_rec()).passed
    restarted = judge_job_health(_rec(path="restarted", timeouts=2, restarts=1, resumed_step=6000, latest_checkpoint=6000))
    assert restarted.passed and restarted.reason.startswith("restarted after an NCCL timeout: resumed from step 6000")
    stale = judge_job_health(_rec(path="restarted", timeouts=2, resumed_step=4000, latest_checkpoint=6000))
    assert not stale.passed and "stale checkpoint" in stale.reason
    never = judge_job_health(_rec(path="restarted", timeouts=2))
    assert not never.passed and "never resumed" in never.reason
    ended = judge_job_health(_rec(path="restarted", ended="Volcano job phase Failed"))
    assert not ended.passed and "the job ended" in ended.reason
    assert "neither rerouted nor restarted" in judge_job_health(_rec(path=None)).reason


def test_throughput_verdicts():
    ok = judge_throughput(_rec(), 0.9)
    assert ok.passed and ok.measured == pytest.approx(94.9) and "95% of the 256.0 samples/s baseline" in ok.reason
    low = judge_throughput(_rec(recovered=200.0), 0.9)
    assert not low.passed and "below the required 90%" in low.reason
    assert "never got back to 90%" in judge_throughput(_rec(recovered=None), 0.9).reason


PROFILE = """
faults: {leaf_label: topo/leaf}
switches:
  devices:
    - {name: leaf-a, host: 10.0.0.1, dialect: sonic, uplinks: [Ethernet240, Ethernet248]}
    - {name: leaf-b, host: 10.0.0.2, dialect: nxos, uplinks: [Ethernet1/31]}
"""


def test_leaf_uplink_of_the_job():
    profile = parse_profile(PROFILE)
    inv = switch_inventory(profile)
    labels = {"n1": {"topo/leaf": "leaf-a"}, "n2": {"topo/leaf": "leaf-b"}}
    assert [(s.name, i) for s, i in [leaf_uplink(profile, inv, labels)]] == [("leaf-a", "Ethernet240")]
    sw, iface = leaf_uplink(profile, inv, labels, dialect="nxos")
    assert (sw.name, iface) == ("leaf-b", "Ethernet1/31")
    with pytest.raises(CheckFailed, match="no leaf carrying the job speaks eos"):
        leaf_uplink(profile, inv, labels, dialect="eos")
    with pytest.raises(CheckFailed, match="node n2 has no topo/leaf label"):
        leaf_uplink(profile, inv, {"n1": labels["n1"], "n2": {}})
    with pytest.raises(CheckFailed, match="leaf-z is not in the switch inventory"):
        leaf_uplink(profile, inv, {"n1": {"topo/leaf": "leaf-z"}})


def test_named_switch_and_uplink_and_the_twin_inventory():
    profile = parse_profile(PROFILE.replace("faults: {leaf_label: topo/leaf}",
                                            "faults: {switch: leaf-b, uplink: Ethernet1/31}"))
    sw, iface = leaf_uplink(profile, switch_inventory(profile), {})
    assert (sw.name, iface) == ("leaf-b", "Ethernet1/31")
    bad = parse_profile(PROFILE.replace("faults: {leaf_label: topo/leaf}", "faults: {switch: leaf-b, uplink: Eth9}"))
    with pytest.raises(InvalidProfile, match="faults.uplink Eth9 is not an uplink of leaf-b"):
        leaf_uplink(bad, switch_inventory(bad), {})
    twin = parse_profile("name: twin")
    entries = [{"name": "leaf-1", "host": "127.0.0.1", "port": 2222, "dialect": "sonic", "uplinks": ["Ethernet240"]}]
    assert switch_inventory(twin, {"switches": entries}) == [SwitchConfig.model_validate(entries[0])]
    with pytest.raises(InvalidProfile, match="no switch inventory"):
        switch_inventory(twin, {})


def test_a_fallback_after_recovery_names_the_stability_window():
    late = judge_transport(_rec(after=(TransportSeen("w0", at(310), "Socket", ()),), window_s=300.0))
    assert not late.passed
    assert "fell back to NET/Socket 3m30s after the fault, 1m30s after throughput had recovered (inside the 5m " \
           "stability window) on w0" in late.reason
    assert "watched through the 5m stability window" in judge_transport(_rec(window_s=300.0)).reason


def test_a_failed_recovery_names_the_nccl_timeouts_that_caused_it():
    rec = _rec(timeline=Timeline(injected=at(100)), path="restarted", timeouts=4, restarts=1,
               warn_lines=("w0: NET/IB : mlx5_0:1 no route to any peer",))
    failed = with_nccl_cause(judge_recovery(rec.timeline, 900.0), rec)
    assert not failed.passed and "NCCL timed out 4 time(s) and the job restarted 1 time(s)" in failed.reason
    assert "(first: w0: NET/IB : mlx5_0:1 no route to any peer)" in failed.reason
    passed = judge_recovery(Timeline(injected=at(100), recovered=at(200)), 900.0)
    assert with_nccl_cause(passed, rec) == passed  # a pass is not reworded
