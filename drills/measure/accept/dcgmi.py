"""`dcgmi diag -r N`: the result table DCGM prints (3.x: `Pass`, `Fail - All`, `Warning`/`Info` rows;
4.x: a test's row then one `GPUn: Pass|Fail|Skip` row per GPU). Any `Fail` is a failed test."""

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
    section, metadata = "", {}
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
        if name in ("Diagnostic",):
            continue
        if section == "Metadata":
            metadata[name] = value.strip()
        elif name in _NOTES:
            note = [value]
            if tests:
                tests[-1]["notes"].append(note)
        elif not name:
            if (gpu := _PER_GPU.match(value.strip())) and tests:
                if gpu["result"] == "Fail":
                    tests[-1]["failed_gpus"].append(int(gpu["gpu"]))
            elif note is not None:
                note.append(value)
        elif (res := _RESULT.match(value.strip())):
            note = None
            tests.append({"section": section, "name": name, "result": res["result"], "scope": res["scope"] or "",
                          "failed_gpus": [], "notes": []})
    if not tests:
        raise ToolOutputError("`dcgmi diag` printed no test results")
    return DiagResult(metadata, tuple(DiagTest(t["section"], t["name"], t["result"], t["scope"],
                                               tuple(t["failed_gpus"]), tuple(_unwrap(n) for n in t["notes"]))
                                      for t in tests))


def _unwrap(parts: list[str]) -> str:
    """DCGM wraps a note at 45 columns mid-word: join the pieces as printed, trailing blanks dropped."""
    return "".join(p.rstrip() if i == len(parts) - 1 else p.ljust(45)[:45] for i, p in enumerate(parts)).strip()
