"""nccl-tests `*_perf` (NVIDIA/nccl-tests): the ranks and their hosts, the result table (size, time,
algbw, busbw, #wrong, out-of-place and in-place), `# Out of bounds values`, `# Avg bus bandwidth`, a
`Test … failure` line, NCCL's own `NCCL WARN` lines, and the NCCL transport when run with NCCL_DEBUG=INFO (read with
drills.measure.logread, as the drills do). Older nccl-tests print no `root` column and an `error` column
(the largest deviation, not a count): their wrong results show only in `Out of bounds values`. Before
nccl-tests 2.13 the tests without a reduction (all_gather, broadcast) print no `redop` column, and before
March 2019 (cbe7f65) the summary lines have no leading `#`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["PerfRow", "PerfResult", "parse_perf"]

_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+\[[^\]]*\]\s+(?P<name>.+)$")
_NUM = r"(\d+(?:\.\d+)?|N/A)"
_ROW = re.compile(rf"^(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?:(?P<redop>[a-z]+)\s+)?(?:(?P<root>-?\d+)\s+)?"
                  rf"(?P<t1>{_NUM})\s+(?P<alg1>{_NUM})\s+(?P<bus1>{_NUM})\s+(?P<w1>\S+)\s+"
                  rf"(?P<t2>{_NUM})\s+(?P<alg2>{_NUM})\s+(?P<bus2>{_NUM})\s+(?P<w2>\S+)\s*$")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<n>\d+)")  # no `#` before nccl-tests cbe7f65 (2019-03)
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<bw>\d+(?:\.\d+)?)")
# mpirun --tag-output (an MPIJob launcher's log): `[1,0]<stdout>:` before every line
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
_WARN = re.compile(r"\bNCCL WARN\b")  # `host:pid:tid [dev] file.cc:line NCCL WARN <what>` (NCCL_DEBUG ≥ WARN)
_FAIL = re.compile(r"Test (?:NCCL |CUDA )?failure (?P<where>\S+)(?: '(?P<what>[^']*)')?")


@dataclass(frozen=True)
class PerfRow:
    size_bytes: int
    busbw_out: float  # GB/s, out-of-place
    busbw_in: float  # GB/s, in-place
    wrong: int  # out-of-place + in-place #wrong
    checked: bool = True  # False: `N/A` in the #wrong (or old `error`) column — run with `-c 0`, nothing validated

    @property
    def busbw(self) -> float:
        return max(self.busbw_out, self.busbw_in)


@dataclass(frozen=True)
class PerfResult:
    ranks: tuple[tuple[int, str, str], ...]  # (rank, host, GPU name)
    rows: tuple[PerfRow, ...]
    avg_busbw: float | None  # `# Avg bus bandwidth` (absent when the run died)
    failure: str | None  # the first `Test … failure` line's place and message
    transports: dict[str, str]  # host → NCCL NET transport (IB, Socket, …) when NCCL_DEBUG=INFO
    out_of_bounds: int | None = None  # `# Out of bounds values : N OK|FAILED` (absent when the run died)
    warnings: tuple[str, ...] = ()  # NCCL's `NCCL WARN …` lines (what went wrong, even in a run that finished)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h for _, h, _ in self.ranks))

    @property
    def peak_busbw(self) -> float | None:
        return max((r.busbw for r in self.rows), default=None)

    @property
    def wrong(self) -> int:
        """Wrong results: the rows' #wrong, or the summary's out-of-bounds count when larger (old layouts)."""
        return max(sum(r.wrong for r in self.rows), self.out_of_bounds or 0)

    @property
    def unchecked(self) -> bool:
        """Rows whose results nccl-tests did not validate (`-c 0`): its `Out of bounds values : 0 OK` then
        says nothing — zero checks found zero errors."""
        return any(not r.checked for r in self.rows)

    @property
    def finished(self) -> bool:
        """The run printed its summary (`# Out of bounds values`, `# Avg bus bandwidth`): it got to the end."""
        return self.avg_busbw is not None or self.out_of_bounds is not None

    @property
    def socket(self) -> tuple[str, ...]:
        """Hosts whose NCCL went over NET/Socket (the silent fallback)."""
        return tuple(h for h, t in self.transports.items() if t == "Socket")


def parse_perf(text: str) -> PerfResult:
    """Everything the table and its header say; ToolOutputError when the text is no nccl-tests output."""
    from drills.measure.logread import read_log

    if "out-of-place" not in text and "# nThread" not in text:
        raise ToolOutputError("no `# nThread …` header or `out-of-place` table: not nccl-tests output")
    ranks, rows, avg, failure, oob, warns = [], [], None, None, None, []
    for raw in text.splitlines():
        line = _MPI_TAG.sub("", raw, count=1).strip()
        if _WARN.search(line):
            warns.append(line)
        if (r := _RANK.match(line)):
            ranks.append((int(r["rank"]), r["host"], r["name"].strip()))
        elif (row := _ROW.match(line)):
            rows.append(PerfRow(int(row["size"]), _f(row["bus1"]), _f(row["bus2"]), _i(row["w1"]) + _i(row["w2"]),
                                "N/A" not in (row["w1"], row["w2"])))
        elif (o := _OOB.match(line)):
            oob = int(o["n"])
        elif (a := _AVG.match(line)):
            avg = float(a["bw"])
        elif failure is None and (f := _FAIL.search(line)):
            failure = f"{f['where']}" + (f" {f['what'].strip(' /')}" if f["what"] else "")
    return PerfResult(tuple(ranks), tuple(rows), avg, failure, dict(read_log(text).transports), oob, tuple(warns))


def _f(value: str) -> float:
    return 0.0 if value == "N/A" else float(value)


def _i(value: str) -> int:
    return int(value) if value.lstrip("-").isdigit() else 0
