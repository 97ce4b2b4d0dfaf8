"""perftest `ib_write_bw` / `ib_read_bw` (linux-rdma/perftest): the header (device, link type, MTU)
and the result table, in Gb/s (`--report_gbits`) or MB/s."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["BwRow", "BwResult", "parse_bw"]

_FIELD = re.compile(r"(?P<key>[A-Za-z][A-Za-z .*]*?)\s*:\s*(?P<value>\S+)")
_TABLE = re.compile(r"#bytes\s+#?iterations\s+BW peak\[(?P<unit>Gb/sec|MB/sec)\]")
_ROW = re.compile(r"^(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>\d+(?:\.\d+)?)\s+(?P<avg>\d+(?:\.\d+)?)\s+(?P<rate>\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True)
class BwRow:
    size_bytes: int
    iterations: int
    peak: float
    average: float
    msg_rate_mpps: float


@dataclass(frozen=True)
class BwResult:
    test: str  # "RDMA_Write BW Test", …
    device: str | None
    link_type: str | None  # IB | Ethernet (RoCE)
    mtu: str | None
    unit: str  # Gb/sec | MB/sec
    rows: tuple[BwRow, ...]

    @property
    def average_gbps(self) -> float:
        """The largest message size's average bandwidth, in Gb/s whatever unit was printed."""
        avg = self.rows[-1].average
        return avg if self.unit == "Gb/sec" else avg * 8 / 1000


def parse_bw(text: str) -> BwResult:
    """Header fields and every result row; ToolOutputError without a result table or rows."""
    fields: dict[str, str] = {}
    test, unit, rows = "", None, []
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("BW Test") and not test:
            test = line
        elif (t := _TABLE.search(line)):
            unit = t["unit"]
        elif unit is not None and (r := _ROW.match(line)):
            rows.append(BwRow(int(r["bytes"]), int(r["iters"]), float(r["peak"]), float(r["avg"]), float(r["rate"])))
        elif unit is None and ":" in line:
            for f in _FIELD.finditer(line):
                fields.setdefault(f["key"].strip(), f["value"])
    if unit is None or not rows:
        raise ToolOutputError("no `#bytes #iterations BW peak …` result row: the bandwidth test did not finish")
    return BwResult(test, fields.get("Device"), fields.get("Link type"), fields.get("Mtu"), unit, tuple(rows))
