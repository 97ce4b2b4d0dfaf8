"""Random targets (issue 35): the choice function against the twin's own inventory — the same seed picks the same
targets, different seeds spread over the allowlist — and a replay takes the recorded choice or refuses."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import pytest

from drills.core.errors import CheckFailed, DrillError, UnsafeTarget
from drills.core.picks import Picker, RandomPlan, choose, load_replay, parse_seed, recorded_choices
from drills.core.preflight import check_replay_allowed, random_plan
from drills.profile.model import load_target
from drills.twin.fabric import fabric_specs
from drills.twin.profile import load_profile


@pytest.fixture(scope="module")
def inventory():
    twin = load_profile("minimal")
    specs = fabric_specs([{**s.model_dump(), "name": n} for n, s in twin.fabric.switches.items()])
    return {"node": [n.name for n in twin.nodes() if n.role == "training"],
            "uplink": [f"{s.name}:{u.iface}" for s in specs if s.role == "leaf" for u in s.uplinks],
            "replica": ["gpu-infer-01/0", "gpu-infer-01/1", "gpu-infer-02/0"]}


@pytest.mark.parametrize("kind", ["node", "uplink", "replica"])
def test_same_seed_same_targets_other_seeds_spread(kind, inventory):
    pool = inventory[kind]
    assert len(pool) >= 3, pool  # the twin's inventory has a choice to make
    first = [choose(kind, pool, 1, seed, "test_drain[cordon-drain]") for seed in range(200)]
    again = [choose(kind, list(reversed(pool)), 1, seed, "test_drain[cordon-drain]") for seed in range(200)]
    assert first == again  # the same seed, the same target (whatever order the candidates came in)
    spread = Counter(c for (c,) in first)
    assert set(spread) == set(pool)  # every eligible target gets picked by some seed …
    assert min(spread.values()) >= 200 / len(pool) / 3, spread  # … and none is starved


def test_a_scenario_choice_does_not_depend_on_the_other_scenarios(inventory):
    one = choose("node", inventory["node"], 1, 7, "test_a")
    assert choose("node", inventory["node"], 1, 7, "test_a") == one
    assert {choose("node", inventory["node"], 1, 7, f"test_{i}") for i in range(40)} == {(n,) for n in inventory["node"]}


def test_count_is_capped_and_sorted(inventory):
    picked = choose("replica", inventory["replica"], 2, 3, "s")
    assert len(picked) == 2 and list(picked) == sorted(picked) and set(picked) <= set(inventory["replica"])
    assert len(choose("replica", inventory["replica"], 9, 3, "s")) == 3


def test_picker_without_random_keeps_the_first_in_the_given_order(inventory):
    notes = []
    picker = Picker(RandomPlan(), "s", lambda **kw: notes.append(kw))
    assert picker.pick("node", ["gpu-train-03", "gpu-train-01"]) == ("gpu-train-03",)
    assert notes == [] and not picker.active  # nothing random: nothing recorded


def test_picker_draws_only_what_the_allowlist_admits_and_records_it(inventory):
    notes = []
    picker = Picker(RandomPlan(seed=11), "s", lambda **kw: notes.append(kw))
    allowed = {"gpu-train-02", "gpu-train-04"}
    for seed in range(50):
        picker = Picker(RandomPlan(seed=seed), "s", lambda **kw: notes.append(kw))
        assert picker.pick("node", inventory["node"], allowed=allowed.__contains__)[0] in allowed
    assert notes[-1] == {"random": {"seed": 49, "replayed_from": None, "choices": {"node": [picker.choices["node"][0]]}}}
    with pytest.raises(CheckFailed, match="none of gpu-train-01.* is in the profile's allowlist"):
        Picker(RandomPlan(seed=1), "s").pick("node", inventory["node"], allowed=lambda _: False)


def test_replay_takes_the_recorded_choice_or_refuses(inventory):
    plan = RandomPlan(5, {"s": {"uplink": ("leaf-2:Ethernet1/32",)}}, "night-1")
    assert Picker(plan, "s").pick("uplink", inventory["uplink"]) == ("leaf-2:Ethernet1/32",)
    with pytest.raises(CheckFailed, match="replaying run night-1, its uplink leaf-2:Ethernet1/32 is not eligible now"):
        Picker(plan, "s").pick("uplink", [u for u in inventory["uplink"] if u.startswith("leaf-1")])


def test_recorded_choices_round_trip(tmp_path):
    picker = Picker(RandomPlan(seed=42), "test_x[a]")
    picker.pick("node", ["gpu-train-01", "gpu-train-02", "gpu-train-03"])
    (tmp_path / "r1").mkdir()
    line = {"scenario": "test_x[a]", "details": {"random": picker.to_record()}}
    (tmp_path / "r1" / "records.jsonl").write_text(json.dumps(line) + "\n{not json\n", encoding="utf-8")
    assert recorded_choices([line]) == (42, {"test_x[a]": {"node": picker.choices["node"]}})
    plan = load_replay(tmp_path, "r1")
    assert (plan.seed, plan.replayed_from, dict(plan.replay)) == (42, "r1", {"test_x[a]": {"node": picker.choices["node"]}})
    assert RandomPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("given, line", [
    ("-3", "--random '-3' must be a non-negative whole number"),
    ("4e2", "--random '4e2' must be a non-negative whole number"),
    ("9223372036854775808", "must be a non-negative whole number below"),
    ("seven", "fix --random"),
])
def test_bad_seed_is_one_line(given, line):
    with pytest.raises(DrillError, match=line):
        parse_seed(given)


def test_seed_forms():
    assert parse_seed(None) is None and parse_seed("0") == 0 and parse_seed("42") == 42
    assert 0 <= parse_seed("auto") < 2**32


def test_replay_refusals(tmp_path):
    opts = SimpleNamespace(random=None, replay="nope", reports_root=tmp_path)
    with pytest.raises(DrillError, match="--replay nope: no such run"):
        random_plan(opts, load_target(None))
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "records.jsonl").write_text('{"scenario": "s", "details": {}}\n', encoding="utf-8")
    with pytest.raises(DrillError, match="recorded no target choice"):
        random_plan(SimpleNamespace(random=None, replay="plain", reports_root=tmp_path), load_target(None))
    with pytest.raises(DrillError, match="--random and --replay both given"):
        random_plan(SimpleNamespace(random="1", replay="plain", reports_root=tmp_path), load_target(None))


def test_replay_refuses_a_target_no_longer_allowed():
    base = load_target(None)
    allow = base.safety.allow.model_copy(update={"nodes": ["gpu-train-0[12]"]})
    profile = base.model_copy(update={"safety": base.safety.model_copy(update={"allow": allow})})
    check_replay_allowed(RandomPlan(1, {"s": {"node": ("gpu-train-02",)}}, "r"), profile)
    with pytest.raises(UnsafeTarget, match="--replay r: scenario 's': node gpu-train-03 is not in the profile's allowlist"):
        check_replay_allowed(RandomPlan(1, {"s": {"node": ("gpu-train-03",)}}, "r"), profile)


def test_a_random_uplink_is_one_of_the_job_leaves_uplinks_and_a_named_one_still_wins():
    """The uplink drill's pick goes through leaf_uplink: the job's leaves (of the scenario's dialect) only."""
    from drills.faults.switch.target import leaf_uplink, switch_inventory
    from drills.profile.model import parse_profile

    text = """
faults: {leaf_label: topo/leaf}
switches:
  devices:
    - {name: leaf-a, host: 10.0.0.1, dialect: sonic, uplinks: [Ethernet240, Ethernet248]}
    - {name: leaf-b, host: 10.0.0.2, dialect: nxos, uplinks: [Ethernet1/31, Ethernet1/32]}
    - {name: leaf-c, host: 10.0.0.3, dialect: sonic, uplinks: [Ethernet0]}
"""
    profile = parse_profile(text)
    inv = switch_inventory(profile)
    labels = {"n1": {"topo/leaf": "leaf-a"}, "n2": {"topo/leaf": "leaf-b"}}
    seen = set()
    for seed in range(40):
        picker = Picker(RandomPlan(seed=seed), "s")
        sw, iface = leaf_uplink(profile, inv, labels, pick=lambda names: picker.pick("uplink", names)[0])
        seen.add(f"{sw.name}:{iface}")
    assert seen == {"leaf-a:Ethernet240", "leaf-a:Ethernet248", "leaf-b:Ethernet1/31", "leaf-b:Ethernet1/32"}
    sonic = {f"{s.name}:{i}" for seed in range(20) for s, i in [leaf_uplink(
        profile, inv, labels, "sonic", pick=lambda names, seed=seed: Picker(RandomPlan(seed=seed), "s").pick(
            "uplink", names)[0])]}
    assert sonic == {"leaf-a:Ethernet240", "leaf-a:Ethernet248"}  # leaf-c carries no worker of the job
    named = parse_profile(text.replace("faults: {leaf_label: topo/leaf}",
                                       "faults: {leaf_label: topo/leaf, switch: leaf-b, uplink: Ethernet1/32}"))
    sw, iface = leaf_uplink(named, switch_inventory(named), labels, pick=lambda names: names[0])
    assert (sw.name, iface) == ("leaf-b", "Ethernet1/32")
