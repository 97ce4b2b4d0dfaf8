"""`dcgmi diag -r N`: the result table DCGM prints (3.x: `Pass`, `Fail - All`, `Warning`/`Info` rows, and
when GPUs disagree `Pass - GPUs: 1, 2` then `Fail - GPU: 0` on the next row; 4.x: a test's row then one
`GPUn: Pass|Fail|Skip` row per GPU). Any `Fail` is a failed test, and so is an `Error` row that no test
of its section precedes (DCGM stopping at Deployment)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["DiagTest", "DiagResult", "parse_diag", "RESULTS"]

RESULTS = ("Pass", "Fail", "Warn", "Skip")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>\w+)\s+-+\+")
_ROW = re.compile(r"^\|\s(?P<name>.{25}) \|\s(?P<value>.*?)\s*\|\s*$")
_RESULT = re.compile(r"^(?P<result>Pass|Fail|Warn|Skip)\b(?:\s*-\s*(?P<scope>.+))?$")
_PER_GPU = re.compile(r"^GPU(?P<gpu>\d+):\s*(?P<result>Pass|Fail|Warn|Skip)\b")
_NOTES = ("Warning", "Error", "Info")
_WORST = {"Skip": 0, "Pass": 1, "Warn": 2, "Fail": 3}


@dataclass(frozen=True)
class DiagTest:
    section: str  # Deployment | Integration | Hardware | Stress
    name: str
    result: str  # Pass | Fail | Warn | Skip
    scope: str = ""  # "All" (DCGM 3), or empty
    failed_gpus: tuple[int, ...] = ()  # DCGM 4's per-GPU rows that say Fail
    notes: tuple[str, ...] = ()  # the Warning/Error/Info texts under it, unwrapped


@dataclass(frozen=True)
class DiagResult:
    metadata: dict[str, str]
    tests: tuple[DiagTest, ...]

    @property
    def failures(self) -> tuple[DiagTest, ...]:
        return tuple(t for t in self.tests if t.result == "Fail")

    @property
    def passed(self) -> bool:
        return bool(self.tests) and not self.failures


def parse_diag(text: str) -> DiagResult:
    """Every test row in its section, with its notes; ToolOutputError when no table is found."""
    if "| Diagnostic" not in text or "| Result" not in text:
        raise ToolOutputError("no `Diagnostic | Result` table: not `dcgmi diag` output (did DCGM run?)")
    metadata: dict[str, str] = {}
    tests = _read_table(text, metadata)
    if not tests:
        raise ToolOutputError("`dcgmi diag` printed no test results")
    return DiagResult(metadata, tests)


def _read_table(text: str, metadata: dict[str, str] | None = None) -> tuple[DiagTest, ...]:
    """The table's rows as tests (the Metadata section's rows go to `metadata`)."""
    section = ""
    tests: list[dict] = []
    note: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if (head := _SECTION.match(line)):
            section, note = head["name"], None
            continue
        row = _ROW.match(line)
        if row is None:
            continue
        name, value = row["name"].strip(), row["value"]
        if name == "Diagnostic" and value.strip() == "Result":
            continue  # the header; DCGM 3's Hardware test is also named `Diagnostic`
        if section == "Metadata":
            if metadata is not None:
                metadata[name] = value.strip()
        elif name in _NOTES:
            note = [value]
            if name == "Error" and (not tests or tests[-1]["section"] != section):
                tests.append({"section": section, "name": name, "result": "Fail", "scope": "",
                              "failed_gpus": [], "notes": []})  # DCGM stopped before any test of this section
            if tests:
                tests[-1]["notes"].append(note)
        elif not name:
            if (gpu := _PER_GPU.match(value.strip())) and tests:
                if gpu["result"] == "Fail":
                    tests[-1]["failed_gpus"].append(int(gpu["gpu"]))
            elif note is None and tests and (res := _RESULT.match(value.strip())):
                _more_gpus(tests[-1], res["result"], res["scope"] or "")  # `Fail - GPU: 0` under `Pass - GPUs: …`
            elif note is not None:
                note.append(value)
        elif (res := _RESULT.match(value.strip())):
            note = None
            tests.append({"section": section, "name": name, "result": "", "scope": "", "failed_gpus": [],
                          "notes": []})
            _more_gpus(tests[-1], res["result"], res["scope"] or "")
    return tuple(DiagTest(t["section"], t["name"], t["result"], t["scope"], tuple(t["failed_gpus"]),
                          tuple(_unwrap(n) for n in t["notes"])) for t in tests)


def _more_gpus(test: dict, result: str, scope: str) -> None:
    """One `Result - scope` of a test: the worst result stands, and its failing GPUs are kept."""
    if result == "Fail" and scope.startswith("GPU"):
        test["failed_gpus"] += [int(g) for g in re.findall(r"\d+", scope)]
    if _WORST[result] > _WORST.get(test["result"], -1):
        test["result"], test["scope"] = result, scope


def _unwrap(parts: list[str]) -> str:
    """DCGM wraps a note at 45 columns mid-word: join the pieces as printed, trailing blanks dropped."""
    return "".join(p.rstrip() if i == len(parts) - 1 else p.ljust(45)[:45] for i, p in enumerate(parts)).strip()
