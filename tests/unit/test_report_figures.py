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


_DEFAULT_RUN = [  # (drill, scenario, Example) of the default run on the minimal twin
    ("storage-saturation", "Saturate the checkpoint store with fio under the fine-tuning job", None),
    ("inference-pod-kill", "The inference Deployment loses 1 of its 2 replicas under load", {"killed": "1 of its 2 replicas"}),
    ("inference-pod-kill", "The inference Deployment loses all its replicas under load", {"killed": "all its replicas"}),
    ("inference-pod-kill", "Evict every replica as a node drain does, under load", None),
    ("inference-pod-kill", "Cordon and drain the GPU node serving a replica, under load", None),
    ("gpu-node-loss", "Lose a GPU node under the fine-tuning job by cordon-drain", {"fault": "cordon-drain"}),
    ("gpu-node-loss", "Lose a GPU node under the fine-tuning job by taint-noexecute", {"fault": "taint-noexecute"}),
    ("switch-uplink", "Drop one uplink of the leaf carrying the fine-tuning job", None),
    ("switch-uplink", "Drop an uplink of the sonic leaf over an SSH exec session", {"dialect": "sonic", "transport": "exec"}),
    ("switch-uplink", "Drop an uplink of the nxos leaf over an SSH shell session", {"dialect": "nxos", "transport": "shell"}),
    ("switch-uplink", "Drop an uplink of the nxos leaf over an SSH exec session", {"dialect": "nxos", "transport": "exec"}),
]


def test_every_row_of_the_default_run_is_identifiable_at_80_columns():
    records = [Record.from_json({"drill": d, "scenario": s, "target_s": 900, "recovery_s": 59.0, "verdict": "pass",
                                 "details": {"example": e} if e else {}}) for d, s, e in _DEFAULT_RUN]
    console = Console(width=80, record=True)
    console.print(final_table(records, width=80))
    rows = [line for line in console.export_text().splitlines() if "PASS" in line]
    assert len(rows) == len(records) and all(len(line) <= 80 for line in rows)
    cells = [line.split("│")[2].strip() for line in rows]
    assert len(set(cells)) == len(cells), cells  # no two rows read the same
    for (_, _, example), cell in zip(_DEFAULT_RUN, cells):
        assert example is None or all(v in cell for v in example.values()), (example, cell)


def test_what_the_target_does_not_run_is_one_line():
    from pathlib import Path

    from drills.cli.run import skip_summary

    skipped = [{"test": f"test_drop[{os_}-{t}]", "reason": f"no {os_} switch in the inventory"}
               for os_ in ("eos", "cumulus") for t in ("shell", "exec")]
    line = skip_summary(skipped, Path("reports/r1"))
    assert "\n" not in line and line.startswith("skipped on this target: 4 Examples (eos-shell, eos-exec, cumulus-shell")
    assert "no eos switch in the inventory (and 1 other reason)" in line and "reports/r1/skipped.jsonl" in line
