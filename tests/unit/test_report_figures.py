"""Headline figures: a record without a recovery target shows a check against its limit."""

from __future__ import annotations

from rich.console import Console

from drills.core.record import Check, Record
from drills.report.figures import check_figures, headline_figures, short_scenario
from drills.report.summary import summary_sections
from drills.report.records import Run
from drills.core.runner import final_table


def _storage(checks: list[dict], verdict: str = "pass") -> Record:
    return Record.from_json({"drill": "storage-saturation", "scenario": "Saturate the checkpoint store",
                             "verdict": verdict, "recovery_s": None, "target_s": None, "severity": "critical",
                             "details": {"checks": checks}})


_INTACT = {"name": "checkpoint intact", "verdict": "pass", "measured": 5.0, "target": 5.0, "unit": "intact"}
_PROBE = {"name": "checkpoint save", "verdict": "pass", "measured": 0.0196, "target": 0.0348, "unit": "s",
          "baseline": 0.0174}
_TRAIN = {"name": "training checkpoint save", "verdict": "pass", "measured": 50.1, "target": 76.8, "unit": "s",
          "baseline": 38.4}
_BANDWIDTH = {"name": "store bandwidth", "verdict": "pass", "measured": 836.56, "target": 20.0, "unit": "MB/s"}


def test_a_record_with_a_recovery_target_shows_recovery():
    rec = Record.from_json({"drill": "gpu-node-loss", "verdict": "pass", "recovery_s": 61.0, "target_s": 900.0})
    assert headline_figures(rec) == ("15m 00s", "1m 01s")


def test_a_passing_storage_record_shows_the_catalog_headline_check_as_a_multiple_of_its_baseline():
    assert headline_figures(_storage([_INTACT, _PROBE, _TRAIN, _BANDWIDTH])) == ("≤ 2×", "1.3× save")


def test_the_first_failed_check_wins_over_the_headline():
    slow = {**_BANDWIDTH, "verdict": "fail", "measured": 12.0}
    assert headline_figures(_storage([_INTACT, _TRAIN, slow], "fail")) == ("≥ 20 MB/s", "12 MB/s")


def test_limits_read_their_direction_from_the_verdict():
    assert check_figures(Check.from_json(_BANDWIDTH)) == ("≥ 20 MB/s", "837 MB/s")
    assert check_figures(Check.from_json({**_TRAIN, "verdict": "fail", "measured": 96.0})) == ("≤ 2×", "2.5× save")
    assert check_figures(Check.from_json(_INTACT)) == ("5 intact", "5 intact")


def test_a_record_without_checks_or_target_shows_dashes():
    assert headline_figures(_storage([])) == ("—", "—")


def test_final_table_and_summary_show_the_storage_figures():
    rec = _storage([_INTACT, _PROBE, _TRAIN, _BANDWIDTH])
    console = Console(width=100, record=True)
    console.print(final_table([rec]))
    text = console.export_text()
    assert "1.3× save" in text and "≤ 2×" in text
    table = next(s["table"] for s in summary_sections([Run("r1", None, [rec])]) if s.get("table"))
    assert table["rows"][0][3:5] == ["≤ 2×", "1.3× save"]


def test_a_target_the_site_profile_set_says_so_in_the_table_and_the_summary():
    target = {"name": "training_recovery_s", "value": 600.0, "source": "profile", "feature": 900.0, "profile": 600.0}
    data = {"drill": "gpu-node-loss", "scenario": "Lose a node", "verdict": "pass", "recovery_s": 61.0,
            "target_s": 600.0, "details": {"target": target}}
    site = Record.from_json(data)
    feature = Record.from_json({**data, "target_s": 900.0,
                                "details": {"target": {**target, "value": 900.0, "source": "feature"}}})
    assert headline_figures(site) == ("10m 00s (site profile)", "1m 01s")
    assert headline_figures(feature) == ("15m 00s", "1m 01s")
    console = Console(width=120, record=True)
    console.print(final_table([site, feature], width=120))
    text = console.export_text()
    assert "10m (site profile)" in text and "15m " in text and text.count("site profile") == 1
    table = next(s["table"] for s in summary_sections([Run("r1", None, [site])]) if s.get("table"))
    assert table["rows"][0][3] == "10m 00s (site profile)"
    assert check_figures(Check.from_json({**_TRAIN, "target_source": "profile"})) == ("≤ 2× (site profile)", "1.3× save")


_OUTLINE = [f"Lose a GPU node under the fine-tuning job by {fault}"
            for fault in ("cordon-drain", "taint-noexecute", "gpu-unhealthy")]


def test_a_long_outline_scenario_keeps_its_example_value():
    short = short_scenario(_OUTLINE[1], _OUTLINE, 40)
    assert len(short) <= 40 and short.startswith("Lose") and short.endswith("taint-noexecute") and "…" in short
    assert short_scenario("short", _OUTLINE, 40) == "short"


def test_the_final_table_is_one_line_per_record_on_100_columns():
    records = [Record.from_json({"drill": "gpu-node-loss", "scenario": s, "target_s": 900, "recovery_s": 59.0,
                                 "verdict": "pass"}) for s in _OUTLINE]
    console = Console(width=100, record=True)
    console.print(final_table(records, width=100))
    lines = [line for line in console.export_text().splitlines() if "gpu-node-loss" in line]
    assert len(lines) == 3 and all(len(line) <= 100 for line in lines)
    assert all(fault in line for fault, line in zip(("cordon-drain", "taint-noexecute", "gpu-unhealthy"), lines))
