"""junit.xml says what the records say: each testcase rewritten from its record after the run.

pytest's JUnit XML knows what pytest saw; a drill's outcome is its record (drills.core.record), decided
after every revert. So once a run has ended (and the lanes' files are merged, drills.core.lanes), every
testcase that has a record gets its result from the one table (drills.core.outcomes): no child for a pass,
`<failure>` or `<error>` (message: the verdict word, the category and the reason; type: the category), or
`<skipped>`; pytest's own result elements of that testcase are replaced, its output kept. The suite's
`failures`, `errors` and `skipped` counts are recounted. A record finds its testcase by its pytest node id,
mangled as pytest's junitxml does (`classname` + `name`), so two scenarios of the same name never mix; a
testcase without a record (a scenario that never ran) is left as pytest wrote it.
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from drills.core import outcomes
from drills.core.outcomes import JunitResult
from drills.core.record import Record
from drills.report.text import labels

__all__ = ["rewrite_junit", "junit_key"]

log = logging.getLogger(__name__)

_RESULTS = ("failure", "error", "skipped")


def junit_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) pytest's junitxml writes for `nodeid` (its own mangling, so both always agree)."""
    from _pytest.junitxml import mangle_test_address

    names = mangle_test_address(nodeid)
    return ".".join(names[:-1]), names[-1]


def rewrite_junit(path: Path, records: list[Record]) -> int:
    """Rewrite `path` in place from `records`; returns how many testcases had a record."""
    path = Path(path)
    by_key = {junit_key(r.nodeid): r for r in records if r.nodeid}
    if not by_key or not path.exists():
        return 0
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError) as err:  # the records stay the truth; a file we cannot read is left alone
        log.warning("%s not rewritten from the records: %s", path, err)
        return 0
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    matched = 0
    for suite in suites:
        for case in suite.findall("testcase"):
            record = by_key.get((case.get("classname", ""), case.get("name", "")))
            if record is None:
                continue
            _rewrite_case(case, record)
            matched += 1
        for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            suite.set(key, str(sum(1 for case in suite.findall("testcase") if case.find(tag) is not None)))
    if matched < len(by_key):
        log.warning("%s: %d record(s) without a testcase", path, len(by_key) - matched)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
    return matched


def _rewrite_case(case: ET.Element, record: Record) -> None:
    row = outcomes.of(record)
    for child in [c for c in case if c.tag in _RESULTS]:
        case.remove(child)
    if row.junit is JunitResult.PASS:
        return
    category = record.category.value if record.category is not None else record.verdict.value
    element = ET.Element(row.junit.value, {"message": f"{labels('en')[row.word]} [{category}]: {record.reason}",
                                           "type": category})
    element.text = record.reason
    case.insert(0, element)  # before system-out/err, where pytest puts its own
