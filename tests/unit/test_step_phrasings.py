"""One registry of steps in two languages: every step has an English and a zh-CN phrasing (fixtures/steps/zh-CN.yaml),
both bound to the same function; every zh-CN feature mirrors its English one and each of its lines is a step; a run
in one language never collects the other's scenarios."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from pytest_bdd.feature import get_features
from pytest_bdd.steps import step_function_context_registry

from drills.core.languages import counterparts, english_paths
from drills.core.selection import candidates, drill_feature_files
from fixtures.phrases import arguments, zh_phrases
from fixtures.steps.zh import english_steps, missing_phrasings, step_modules
from fixtures.steps.inference import parse_killed

REPO = Path(__file__).resolve().parents[2]
FEATURES = REPO / "features"


def _bound_steps():
    """Every step context bound to a function of fixtures.steps as imported now (English and zh-CN)."""
    modules = step_modules()
    return [ctx for ctx in list(step_function_context_registry.values())
            if any(getattr(m, ctx.step_func.__name__, None) is ctx.step_func for m in modules)]


def _match(step, bound):
    return [ctx for ctx in bound if ctx.type in (None, step.type) and ctx.parser.is_matching(step.name)]


def test_every_step_has_a_zh_phrasing():
    assert english_steps(), "no step found: the registry walk is broken"
    missing = missing_phrasings()
    assert not missing, f"{len(missing)} step(s) without a zh-CN phrasing:\n" + "\n".join(missing)


def test_a_step_without_a_zh_phrasing_is_named():
    """The check fails for the right reason: a step module's new English step, not catalogued, is named."""
    module = types.ModuleType("fixtures.steps.orphan_for_test")
    exec("from pytest_bdd import given\n@given('a step nobody translated yet')\ndef orphan():\n    pass\n",
         module.__dict__)
    (line,) = missing_phrasings([module])
    assert 'given step "a step nobody translated yet" (fixtures.steps.orphan_for_test.orphan' in line
    assert str(REPO / "fixtures" / "steps" / "zh-CN.yaml") in line


def test_the_catalogue_names_only_steps_and_keeps_their_fields():
    english = {ctx.parser.name: ctx for _, ctx in english_steps()}
    stale = sorted(set(zh_phrases()) - set(english))
    assert not stale, f"fixtures/steps/zh-CN.yaml phrases steps no step definition binds: {stale}"
    for en, zh in zh_phrases().items():
        parser = english[en].parser
        fields = getattr(getattr(parser, "parser", None), "_name_types", {})
        zh_parser = type(parser)(zh)
        assert getattr(getattr(zh_parser, "parser", None), "_name_types", {}) == fields, (en, zh)
        assert zh != en


def test_each_zh_phrasing_is_bound_to_its_english_steps_function():
    bound = _bound_steps()
    for _, ctx in english_steps():
        zh = [c for c in bound if c.parser.name == zh_phrases()[ctx.parser.name] and c.step_func is ctx.step_func]
        assert len(zh) == 1, ctx.parser.name
        assert (zh[0].type, zh[0].target_fixture, zh[0].converters) == (ctx.type, ctx.target_fixture, ctx.converters)


def _scenarios(root: Path):
    """{feature path relative to its language's root: [(tags, [(example tags, [rendered steps])])]} — the drills'
    features as their binder binds them (drill_feature_files: not the acceptance runbook, English only and run by
    `drills accept`; not another language's tree)."""
    out = {}
    for feature in get_features(drill_feature_files(root)):
        rel = str(Path(feature.filename).resolve().relative_to(root.resolve()))
        scenarios = []
        for template in feature.scenarios.values():
            contexts = [(ex.tags, ctx) for ex in template.examples for ctx in ex.as_contexts()] or [(set(), {})]
            scenarios.append((template.tags, [(tags, template.render(ctx).steps) for tags, ctx in contexts]))
        out[rel] = (feature.tags, scenarios)
    return out


def test_the_zh_features_mirror_the_english_ones_step_by_step():
    """Same files, tags, scenarios and Examples; every zh-CN line matches exactly one step definition, the very
    function its English line runs — so a drill does the same thing in either language."""
    bound = _bound_steps()
    english, chinese = _scenarios(FEATURES), _scenarios(FEATURES / "zh")
    missing, orphans = sorted(set(english) - set(chinese)), sorted(set(chinese) - set(english))
    assert not missing and not orphans, (f"features/zh/ must mirror features/: write features/zh/{{{', '.join(missing)}}} "
                                         f"(# language: zh-CN, same tags, scenarios and Examples); no English "
                                         f"feature for features/zh/{{{', '.join(orphans)}}}")
    for rel, (tags, scenarios) in english.items():
        zh_tags, zh_scenarios = chinese[rel]
        assert zh_tags == tags, rel
        assert [(t, [et for et, _ in ex]) for t, ex in zh_scenarios] == [(t, [et for et, _ in ex]) for t, ex in scenarios]
        for (_, examples), (_, zh_examples) in zip(scenarios, zh_scenarios):
            for (_, steps), (_, zh_steps) in zip(examples, zh_examples):
                assert len(zh_steps) == len(steps), rel
                for step, zh_step in zip(steps, zh_steps):
                    zh_match = _match(zh_step, bound)
                    assert len(zh_match) == 1, (f'{rel} line {zh_step.line_number}: "{zh_step.keyword} '
                                                f'{zh_step.name}" matches {len(zh_match)} step definitions')
                    (en_match,) = _match(step, bound)
                    assert zh_match[0].step_func is en_match.step_func, (step.name, zh_step.name)
                    assert zh_step.type == step.type, zh_step.name


def test_zh_scenarios_state_the_same_numbers_and_faults():
    """What is read from a scenario's own lines before the steps run: its contracts' numbers, the node-loss mode,
    the kill size — the same in both languages (the guard, the skip rules and the targets read them)."""
    from fixtures.targets import CONTRACTS, feature_value
    from fixtures.variants import KILL_STEP, LOSE_NODE_STEP

    english, chinese = _scenarios(FEATURES), _scenarios(FEATURES / "zh")
    for rel, (_, scenarios) in english.items():
        for (_, examples), (_, zh_examples) in zip(scenarios, chinese[rel][1]):
            for (_, steps), (_, zh_steps) in zip(examples, zh_examples):
                names, zh_names = tuple(s.name for s in steps), tuple(s.name for s in zh_steps)
                for key, contract in CONTRACTS.items():
                    assert feature_value(zh_names, contract) == feature_value(names, contract), (rel, key)
                for parser in (LOSE_NODE_STEP,):
                    assert [arguments(parser, n) for n in zh_names if arguments(parser, n)] == \
                           [arguments(parser, n) for n in names if arguments(parser, n)]
                kills = [parse_killed(arguments(KILL_STEP, n)["killed"], 2) for n in names if arguments(KILL_STEP, n)]
                zh_kills = [parse_killed(arguments(KILL_STEP, n)["killed"], 2) for n in zh_names
                            if arguments(KILL_STEP, n)]
                assert zh_kills == kills, rel


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=REPO, capture_output=True, text=True, timeout=120).stdout
    return [line for line in out.splitlines() if "::" in line]


def test_a_run_collects_its_own_language_only():
    en = _collected("features")
    zh = _collected("features/zh", "--drills-lang", "zh")
    assert en and all(n.startswith("features/test_drills.py::") for n in en), en
    assert zh and all(n.startswith("features/zh/test_drills_zh.py::") for n in zh), zh
    assert len(zh) == len(en) == len(candidates(FEATURES)) == len(candidates(FEATURES, "zh"))
    assert sorted(n.split("::", 1)[1] for n in zh) == sorted(c.name for c in candidates(FEATURES, "zh"))
    assert "zh" not in english_paths(FEATURES)
    assert set(counterparts(FEATURES, "zh")) == {c.name for c in candidates(FEATURES)}


@pytest.mark.parametrize("text, expected", [("2个副本中的1个", (1, None)), ("全部副本", (None, 100.0)),
                                            ("50% 的副本", (None, 50.0)), ("1 of its 2 replicas", (1, None))])
def test_the_kill_size_reads_in_either_language(text, expected):
    assert parse_killed(text, 2) == expected


def test_a_feature_path_names_its_counterpart_in_the_runs_language():
    from drills.core.errors import DrillError
    from drills.core.preflight import feature_selection

    root = FEATURES.resolve()
    assert feature_selection(["features/network"], root, "zh") == ([str(root / "zh")], [str(root / "zh" / "network")])
    assert feature_selection(["features/network"], root, "en") == ([str(root)], [str(root / "network")])
    with pytest.raises(DrillError, match="run them with --lang zh"):
        feature_selection(["features/zh/network"], root, "en")


def test_the_console_and_allure_words_exist_in_both_languages():
    """Every console sentence has its zh-CN form with the same fields (an English one filled in would be a miss)."""
    import string

    from drills.core import datafiles

    table = datafiles.load_file(REPO / "drills" / "report" / "messages.yaml")
    assert set(table["zh"]) == set(table["en"]), set(table["en"]) ^ set(table["zh"])
    fields = lambda t: {f for _, f, _, _ in string.Formatter().parse(t) if f}  # noqa: E731
    for key, text in table["en"].items():
        assert fields(table["zh"][key]) <= fields(text) | {"s"}, key
