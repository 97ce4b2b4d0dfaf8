"""Every verbatim real switch output in tests/data/real/switch/ read by the parser the drill uses for
that OS and command (ntc-templates, NVUE/Onyx JSON, our TextFSM templates), compared with the states
written by hand in EXPECTED.yaml; real error messages are recognised as errors by the dialect. (Files with
`counters` are read by the counters reader: tests/unit/test_switch_counters.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.parse import PortState, StateUnreadable, parse_interfaces, parser_for_command

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real" / "switch"
EXPECTED = load_yaml((CORPUS / "EXPECTED.yaml").read_text())


def test_every_corpus_file_has_expectations_and_a_source_line():
    files = sorted(p.name for p in CORPUS.glob("*.txt"))
    assert len(files) >= 30 and sorted(EXPECTED) == files
    for name in files:
        assert (CORPUS / name).read_text(encoding="utf-8").startswith("# source: "), name


@pytest.mark.parametrize("name", sorted(n for n, case in EXPECTED.items() if "interfaces" in case))
def test_real_output_reads_as_expected(name):
    case = EXPECTED[name]
    text = (CORPUS / name).read_text(encoding="utf-8")
    dialect = load_switch_dialect(case["dialect"])
    if case["error"]:
        assert case["error"] in dialect.error_lines(text), dialect.error_lines(text)
        return
    assert not dialect.error_lines(text.split("\n", 1)[1])
    port = next((w for w in case["command"].split() if w.startswith("swp")), None)
    parser = parser_for_command(case["dialect"], case["command"])
    if case["interfaces"] == "unreadable":  # no port in it, or no column that states admin / oper
        with pytest.raises(StateUnreadable):
            parse_interfaces(parser, text, port)
        return
    got = parse_interfaces(parser, text, port)
    want = {iface: PortState(v["admin"], v["oper"]) for iface, v in (case["interfaces"] or {}).items()}
    assert {i: got.get(i) for i in want} == want
    if not want:  # nothing stated: the parser must not invent a state
        assert all(s.admin is None and s.oper is None for s in got.values())
