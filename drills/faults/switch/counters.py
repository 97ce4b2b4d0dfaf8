"""A port's traffic as the switch counts it: packet totals and the rate lines of `show interface`.

`read_counters(dialect, output, iface)` → `PortTraffic`; the uplink drill reads it before and after
the shutdown over the same login, to tell a fault that hit the job's traffic from one on an idle port
(drills/faults/switch/uplink.py). NX-OS through ntc-templates (its rate from the shortest load
interval); SONiC's portstat table, EOS's counter lines, Onyx's Rx/Tx blocks and NVUE's stats JSON are
small readers of their own (no upstream template reads their counters). Each is checked against real
outputs in tests/data/real/switch/ (EXPECTED.yaml, `counters`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Callable

from drills.faults.switch.dialect import SwitchDialect, clean_output
from drills.faults.switch.parse import StateUnreadable, _blocks, _ntc, _short

__all__ = ["PortTraffic", "read_counters", "COUNTER_PARSERS"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PortTraffic:
    """Packet totals since the last clear, and the rate the switch prints (bits/s; None: not printed)."""

    rx_packets: int
    tx_packets: int
    rx_bps: float | None = None
    tx_bps: float | None = None

    @property
    def packets(self) -> int:
        return self.rx_packets + self.tx_packets

    @property
    def bps(self) -> float | None:
        return None if self.rx_bps is None and self.tx_bps is None else (self.rx_bps or 0.0) + (self.tx_bps or 0.0)


def read_counters(dialect: SwitchDialect, output: str, iface: str) -> PortTraffic:
    """The port's counters from the dialect's counters command; StateUnreadable says what is missing."""
    if dialect.counters is None:
        raise StateUnreadable(f"dialect {dialect.name} has no counters command")
    parser = COUNTER_PARSERS.get(dialect.counters.parser)
    if parser is None:
        raise StateUnreadable(f"no counters parser named {dialect.counters.parser!r}")
    return parser(clean_output(output), iface)


def _nxos(text: str, iface: str) -> PortTraffic:
    """ntc's totals (`N input packets  N bytes`); tunnels print `N packets input, N bytes` instead (loopbacks
    the same without the comma), which the template does not read: taken from the port's block."""
    rows = [r for r in _ntc("cisco_nxos_show_interface", text) if _short(r["INTERFACE"]) == _short(iface)]
    if not rows:
        raise StateUnreadable(f"no input/output packet totals for {iface}")
    r = rows[0]
    block = _block(text, r"^\S+ is ", iface)
    rx = r["INPUT_PACKETS"] or next(iter(re.findall(r"^\s*(\d+) packets input,? ", block, re.M)), "")
    tx = r["OUTPUT_PACKETS"] or next(iter(re.findall(r"^\s*(\d+) packets output,? ", block, re.M)), "")
    if not rx or not tx:
        raise StateUnreadable(f"no input/output packet totals for {iface}")
    rates = _shortest_rates(block)
    return PortTraffic(int(rx), int(tx),
                       rates.get("input", _num(r["BANDWIDTH_INPUT_RATE"])), rates.get("output", _num(r["BANDWIDTH_OUTPUT_RATE"])))


_NXOS_RATE = re.compile(r"^\s*(\d+) (second|minute)s? (input|output) rate (\d+) bits/sec", re.M)


def _shortest_rates(text: str) -> dict[str, float]:
    """NX-OS prints a rate per load interval (30 seconds, then 300 seconds, or 1 minute on mgmt0); the
    shortest is the traffic now (ntc-templates keeps the last one printed)."""
    best: dict[str, tuple[int, float]] = {}
    for m in _NXOS_RATE.finditer(text):
        seconds = int(m[1]) * (60 if m[2] == "minute" else 1)
        if m[3] not in best or seconds < best[m[3]][0]:
            best[m[3]] = (seconds, float(m[4]))
    return {side: bps for side, (_, bps) in best.items()}


def _eos(text: str, iface: str) -> PortTraffic:
    text = _block(text, r"^\S+ is ", iface)
    rx = re.search(r"^\s*(\d+) packets input,", text, re.M)
    tx = re.search(r"^\s*(\d+) packets output,", text, re.M)
    if not rx or not tx:
        raise StateUnreadable("no `packets input` / `packets output` lines")
    rates = {m[1]: _unit(m[2], m[3]) for m in re.finditer(r"^\s*\d+ \w+ (input|output) rate ([\d.]+) (\w+)", text, re.M)}
    return PortTraffic(int(rx[1]), int(tx[1]), rates.get("input"), rates.get("output"))


_ONYX_PORT = r"^Eth\d\S*?:?\s*$"  # "Eth1/1:" (Onyx) or "Eth1/1" (MLNX-OS 3.6) opens a port's block


def _onyx(text: str, iface: str) -> PortTraffic:
    """A port block, then Rx and Tx blocks that start with the packet total: "Rx:" indented under the port
    on Onyx, "Rx" flush left on MLNX-OS 3.6; the rate lines `60 seconds ingress rate: N bits/sec, ...`
    (padded before the colon on Onyx)."""
    text = _block(text, _ONYX_PORT, iface)
    rx = re.search(r"^\s*Rx:?\s*\n\s*(\d+)\s+packets\s*$", text, re.M)
    tx = re.search(r"^\s*Tx:?\s*\n\s*(\d+)\s+packets\s*$", text, re.M)
    if not rx or not tx:
        raise StateUnreadable("no Rx/Tx packet counts")
    rates = {m[1]: float(m[2]) for m in re.finditer(r"^\s*\d+ seconds (ingress|egress) rate\s*:\s*(\d+) bits/sec", text, re.M)}
    return PortTraffic(int(rx[1]), int(tx[1]), rates.get("ingress"), rates.get("egress"))


def _nvue(text: str, iface: str) -> PortTraffic:
    """NVUE's stats object: flat (`link stats -o json`, `counters -o json`) or under the link
    (`link -o json`: "stats"; `interface` JSON: "link" → "stats"). NVUE prints no rate. Without JSON,
    NVUE's text views (`_nvue_text`)."""
    start = text.find("{")
    if start < 0:
        return _nvue_text(text, iface)
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as err:
        raise StateUnreadable(f"not valid JSON ({err.msg})") from None
    stats = _nvue_stats(data)
    if stats is None:
        raise StateUnreadable("no in-pkts / out-pkts in the counters")
    rx, tx = stats["in-pkts"], stats["out-pkts"]
    if not all(isinstance(v, int) or (isinstance(v, str) and v.isdigit()) for v in (rx, tx)):
        raise StateUnreadable(f"in-pkts / out-pkts are {rx!r} / {tx!r}, not packet counts")
    return PortTraffic(int(rx), int(tx))


_NVUE_TOTALS = re.compile(r"^\s*Total Packets\s+(\d+)\s+(\d+)\s*$", re.M)  # `counters`: Receive, Transmit


def _nvue_text(text: str, iface: str) -> PortTraffic:
    """The port's key/value view (`link`, `link stats`, the port: `in-pkts N` / `out-pkts N` rows), the
    `counters` view (`Total Packets  <rx>  <tx>`) or the all-ports `--view=counters` table (RX_OK / TX_OK
    by its header, the row of `iface` only)."""
    rx = re.findall(r"^\s*in-pkts\s+(\d+)\s*$", text, re.M)
    tx = re.findall(r"^\s*out-pkts\s+(\d+)\s*$", text, re.M)
    if len(rx) == 1 and len(tx) == 1:
        return PortTraffic(int(rx[0]), int(tx[0]))
    totals = _NVUE_TOTALS.findall(text)
    if len(totals) == 1:
        return PortTraffic(int(totals[0][0]), int(totals[0][1]))
    header = next((line.split() for line in text.splitlines() if re.match(r"Interface\s.*\bRX_OK\b.*\bTX_OK\b", line)), None)
    if header:
        row = next((line.split() for line in text.splitlines() if line.split()[:1] == [iface]), None)
        if row is None or len(row) != len(header):
            raise StateUnreadable(f"no row for {iface} under {' '.join(header)}")
        cells = dict(zip(header, row))
        if cells["RX_OK"].isdigit() and cells["TX_OK"].isdigit():
            return PortTraffic(int(cells["RX_OK"]), int(cells["TX_OK"]))
    raise StateUnreadable("no NVUE stats (JSON, in-pkts / out-pkts, Total Packets or RX_OK / TX_OK) in the output")


def _nvue_stats(data: object) -> dict | None:
    if not isinstance(data, dict):
        return None
    if "in-pkts" in data and "out-pkts" in data:
        return data
    for key in ("stats", "link"):
        found = _nvue_stats(data.get(key))
        if found is not None:
            return found
    return None


_PORTSTAT_CELL = re.compile(r"[\d.,]+ [KMG]?B/s|\S+")  # a rate is two words ("632.97 MB/s"), every other cell one


def _sonic(text: str, iface: str) -> PortTraffic:
    """portstat's table, read by its header: IFACE (Iface before 2017) STATE RX_OK RX_BPS … TX_OK TX_BPS …;
    `-a` and older releases add RX_PPS/Tx_PPS, newer ones TRIM columns. Rates are bytes/s (B/s, KB/s, MB/s);
    a cell the counters DB has not filled is N/A (a rate: not printed; a packet count: unreadable)."""
    header: list[str] | None = None
    for line in text.splitlines():
        cells = _PORTSTAT_CELL.findall(line)
        if cells and cells[0].upper() == "IFACE":
            header = [c.upper() for c in cells]
        elif header and cells and cells[0] == iface:
            if len(cells) != len(header):
                raise StateUnreadable(f"portstat row for {iface} has {len(cells)} cells under {len(header)} columns")
            row = dict(zip(header, cells))
            if "RX_OK" not in row or "TX_OK" not in row:
                raise StateUnreadable("portstat prints no RX_OK / TX_OK columns")
            if "STATE" not in row and "RX_DRP" not in row:  # intfstat (`counters rif`): the router interface's
                raise StateUnreadable(f"router-interface counters for {iface} (no STATE / RX_DRP), not the port's")
            if not _is_count(row["RX_OK"]) or not _is_count(row["TX_OK"]):
                raise StateUnreadable(f"portstat prints {row['RX_OK']} / {row['TX_OK']} packets for {iface} "
                                      f"(the counters DB has no value for it yet)")
            return PortTraffic(_int(row["RX_OK"]), _int(row["TX_OK"]), _byte_rate(row.get("RX_BPS")),
                               _byte_rate(row.get("TX_BPS")))
    raise StateUnreadable(f"no portstat row for {iface}" if header else "no portstat header (IFACE … RX_OK … TX_OK)")


COUNTER_PARSERS: dict[str, Callable[[str, str], PortTraffic]] = {
    "ntc:cisco_nxos_show_interface": _nxos,
    "eos_show_interfaces_counters": _eos,
    "onyx_show_interfaces_counters": _onyx,
    "nvue_json_counters": _nvue,
    "sonic_portstat": _sonic,
}

_UNITS = {"bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9}


def _block(text: str, header: str, iface: str) -> str:
    """The part of a multi-port output about `iface` (the whole text when it names no port). An output that
    shows only another port is refused: its counters are not `iface`'s."""
    blocks = {_same(name.rstrip(":")): body for name, body in _blocks(text, header).items()}
    if not blocks:
        return text
    if _same(iface) not in blocks:
        raise StateUnreadable(f"no block for {iface} among {', '.join(blocks)}")
    return text if len(blocks) == 1 else blocks[_same(iface)]


def _same(name: str) -> str:
    """One spelling per port: Et1 / Eth1/1 / eth1/1 / Ethernet1/1 (the `_short` form, case-folded)."""
    return _short(re.sub(r"^(?i:ethernet|eth|et)(?=\d)", "Ethernet", name)).lower()


def _unit(value: str, unit: str) -> float:
    return float(value.replace(",", "")) * _UNITS.get(unit.lower(), 1.0)


def _num(value: str | None) -> float | None:
    return float(value) if value and re.fullmatch(r"[\d.]+", value) else None


def _int(value: str) -> int:
    return int(value.replace(",", ""))


def _is_count(value: str) -> bool:
    return re.fullmatch(r"\d{1,3}(,\d{3})*|\d+", value) is not None


def _byte_rate(cell: str | None) -> float | None:
    """portstat's `653.87 MB/s` (bytes, powers of 1000) as bits/s; N/A or no column: None."""
    m = re.fullmatch(r"([\d.,]+) ([KMG]?B)/s", cell or "")
    return 8 * _unit(m[1], m[2]) if m else None
