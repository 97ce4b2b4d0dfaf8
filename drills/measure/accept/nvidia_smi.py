"""`nvidia-smi -L` (which GPUs a pod sees), the default `nvidia-smi` table (driver, CUDA, per-GPU
temperature and power) and the CSV queries (`--query-gpu=utilization.gpu`, `--query-compute-apps=pid,used_memory`,
`--format=csv`: a header naming each field with its unit, then one row per GPU or per compute process — no row
at all when no process holds a GPU), as printed by the NVIDIA driver's tool."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["Gpu", "GpuReading", "SmiTable", "parse_warnings", "parse_list", "parse_table", "parse_mig", "parse_lost", "parse_utilization",
           "parse_compute_apps", "UTILIZATION_QUERY", "COMPUTE_APPS_QUERY"]

UTILIZATION_QUERY = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv"]
COMPUTE_APPS_QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"]

# a GPU the driver lost (fallen off the bus, Xid 79): nvidia-smi prints this instead of its table/list entry,
# with or without a space before the address (`for GPU0000:07:00.0: Unknown Error`, `…: GPU is lost. Reboot …`)
_LOST = re.compile(r"Unable to determine the device handle for GPU ?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                   r"[0-9A-Fa-f]{2}\.\d): (?P<why>.+?)\s*$")
# nvidia-smi's own warnings, on a line of their own after its output (`WARNING: infoROM is corrupted at gpu
# 0000:67:00.0`, its exit code 14 — the man page's RETURN VALUE)
_WARNING = re.compile(r"^WARNING:\s*(?P<what>.+?)\s*$")
_LIST = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$")
# drivers before 410 print no `CUDA Version`
_HEADER = re.compile(r"NVIDIA-SMI (?P<smi>\S+)\s+Driver Version: (?P<driver>\S+)(?:\s+CUDA Version: (?P<cuda>\S+))?")
_GPU_ROW = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s+\|")
_MIG = re.compile(r"^MIG \S+\s+Device\s+\d+: \(UUID: (?P<uuid>MIG-[^)]+)\)")
_MEMORY = re.compile(r"\|\s*\d+MiB\s*/\s*(?P<total>\d+)MiB\s*\|")
_STATE_ROW = re.compile(r"^\|\s*(?:\S+)\s+(?P<temp>\d+)C\s+(?P<perf>P\d+)\s+(?P<power>\d+)W\s*/\s*(?P<cap>\d+)W\s*\|")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    temperature_c: int
    perf_state: str
    power_w: int
    power_cap_w: int
    memory_total_mib: int | None = None  # the table's `used / total` memory cell


@dataclass(frozen=True)
class SmiTable:
    driver_version: str
    cuda_version: str | None  # None: a driver before 410 does not print it
    gpus: tuple[GpuReading, ...]  # the GPUs whose readings nvidia-smi could print
    errored: tuple[int, ...] = ()  # GPUs whose block reads `ERR!` (lost to the driver: Xid 79, 119, …)

    @property
    def hottest_c(self) -> int | None:
        return max((g.temperature_c for g in self.gpus), default=None)


def parse_lost(text: str) -> tuple[tuple[str, str], ...]:
    """(PCI address, nvidia-smi's words) of every GPU it could not get a handle for: present, but lost to the driver."""
    return tuple((m["pci"], m["why"]) for line in text.splitlines() if (m := _LOST.search(line)))


def parse_warnings(text: str) -> tuple[str, ...]:
    """Every `WARNING: …` line nvidia-smi printed (its own words, whole)."""
    return tuple(m.group(0).strip() for line in text.splitlines() if (m := _WARNING.match(line.strip())))


def parse_list(text: str) -> tuple[Gpu, ...]:
    """Every `GPU i: NAME (UUID: …)` line; an output without any (a pod that sees no GPU) is empty."""
    return tuple(Gpu(int(m["index"]), m["name"], m["uuid"]) for line in text.splitlines()
                 if (m := _LIST.match(line.strip())))


def parse_mig(text: str) -> tuple[str, ...]:
    """The MIG devices `nvidia-smi -L` lists under the GPUs (MIG mode on): their UUIDs."""
    return tuple(m["uuid"] for line in text.splitlines() if (m := _MIG.match(line.strip())))


def parse_table(text: str) -> SmiTable:
    """The header's driver and CUDA versions, one reading per GPU block, and the GPUs shown as `ERR!`;
    ToolOutputError without a header."""
    header = _HEADER.search(text)
    if header is None:
        raise ToolOutputError("no `NVIDIA-SMI … Driver Version` header: not nvidia-smi's table")
    gpus: list[GpuReading] = []
    errored: list[int] = []
    pending: tuple[int, str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if (row := _GPU_ROW.match(line)) and "MiB" not in line:
            pending = (int(row["index"]), row["name"].strip())
            if "ERR!" in line:
                errored.append(pending[0])
        elif pending is not None and "ERR!" in line and line.startswith("|"):
            if pending[0] not in errored:
                errored.append(pending[0])  # its state row: `|ERR!  ERR! ERR!    ERR! / ERR! |`
            pending = None
        elif pending is not None and (state := _STATE_ROW.match(line)):
            mem = _MEMORY.search(line)
            gpus.append(GpuReading(pending[0], pending[1], int(state["temp"]), state["perf"], int(state["power"]),
                                   int(state["cap"]), int(mem["total"]) if mem else None))
            pending = None
    return SmiTable(header["driver"], header["cuda"], tuple(gpus), tuple(errored))


def parse_utilization(text: str) -> tuple[int, ...]:
    """`--query-gpu=utilization.gpu --format=csv`: each GPU's utilisation in % (header `utilization.gpu [%]`,
    rows `97 %`); ToolOutputError without that header or with a row that is not a percentage (`[N/A]`, an error)."""
    rows = _csv(text, "utilization.gpu [%]")
    try:
        return tuple(int(row[0].removesuffix("%").strip()) for row in rows)
    except ValueError:
        raise ToolOutputError(f"utilization.gpu: a row is not a percentage ({rows!r})") from None


def parse_compute_apps(text: str) -> tuple[tuple[int, int | None], ...]:
    """`--query-compute-apps=pid,used_memory --format=csv`: (pid, MiB) per compute process holding a GPU (header
    `pid, used_gpu_memory [MiB]`; MiB None where the driver prints `[N/A]`); empty when none does."""
    out = []
    for row in _csv(text, "pid, used_gpu_memory [MiB]"):
        if len(row) != 2 or not row[0].isdigit():
            raise ToolOutputError(f"compute apps: not a `pid, used_gpu_memory` row: {', '.join(row)!r}")
        mib = row[1].removesuffix("MiB").strip()
        out.append((int(row[0]), int(mib) if mib.isdigit() else None))
    return tuple(out)


def _csv(text: str, header: str) -> list[list[str]]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != header:
        raise ToolOutputError(f"no `{header}` header: not nvidia-smi's --format=csv answer "
                              f"({lines[0][:80] if lines else 'empty'!r})")
    return [[cell.strip() for cell in line.split(",")] for line in lines[1:]]
