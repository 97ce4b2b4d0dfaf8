"""GPU hardware failures as PyTorch and the NVIDIA driver print them (a part of `LogReader`): kind `gpu_error`.

- PyTorch's NCCL watchdog whose CUDA check raised (`[PG 0 Rank 12] Process group watchdog thread terminated with
  exception: CUDA error: uncorrectable ECC error encountered`; ≤ 2.1: `NCCL watchdog thread terminated with
  exception: CUDA error: unknown error`): no timeout, no NCCL WARN — the GPU (its context) failed under the job.
- The driver's Xid (`NVRM: Xid (PCI:0000:dc:00): 45, pid=…, name=python3, …`), one error per GPU and Xid (the
  same Xid on other channels of that GPU is the same failure).
- The driver's fallen-off-the-bus message, which newer drivers print over three lines without an Xid (`NVRM: The
  NVIDIA GPU 0000:b3:00.0` / `NVRM: (PCI ID: …) installed in this system has` / `NVRM: fallen off the bus and is
  not responding to commands.`): joined back into one error, one per GPU.

Real examples: tests/data/real/logs/torch-watchdog-uncorrectable-ecc-*.log, vllm-ray-worker-nccl-watchdog-*.log,
nvrm-*.log.
"""

from __future__ import annotations

import re

from drills.measure.lognccl import LogError
from drills.measure.logformats import TrainingEvent
from drills.measure.logprefix import Record

__all__ = ["GpuReading"]

_WATCHDOG_CUDA = re.compile(r"watchdog thread terminated with exception: CUDA error: \S")
_RANK_IN = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]")
_XID = re.compile(r"NVRM: Xid \((?P<pci>PCI:[^)]+)\): (?P<xid>\d+)\b")
_GPU_START = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9a-fA-F:.]+)\s*$")
_NVRM_MORE = re.compile(r"NVRM: (?P<text>.*)$")
_OFF_BUS = re.compile(r"fallen off the bus")


class GpuReading:
    """The GPU part of `LogReader` (its state lives on the reader: `_gpu_seen`, `_gpu_held`)."""

    _gpu_seen: set
    _gpu_held: tuple[str, str, int] | None  # a fallen-off-the-bus message begun: (PCI address, text, lines)

    def _gpu(self, rec: Record) -> list[TrainingEvent]:
        body, held = rec.body, self._gpu_held
        if m := _WATCHDOG_CUDA.search(body):
            ranks = list(_RANK_IN.finditer(body[: m.start()]))
            rank = int(ranks[-1].group("rank")) if ranks else rec.rank
            text = body[ranks[-1].start():].strip() if ranks else body.strip()
            return self._gpu_error(("watchdog", rank, text), text, rec, rank)
        if m := _XID.search(body):
            self._gpu_held = None
            return self._gpu_error(("xid", m.group("pci"), m.group("xid")), body[m.start():].strip(), rec, rec.rank)
        if m := _GPU_START.search(body):
            self._gpu_held = (m.group("pci"), body[body.index("NVRM:"):].strip(), 0)
            self._consumed = True
            return []
        self._gpu_held = None
        if held is not None and (m := _NVRM_MORE.search(body)):
            pci, text, lines = held
            text = f"{text} {m.group('text').strip()}"
            self._consumed = True
            if _OFF_BUS.search(body):
                return self._gpu_error(("off-bus", pci), text, rec, rec.rank)
            self._gpu_held = (pci, text, lines + 1) if lines < 2 else None
            return []
        if _OFF_BUS.search(body) and "NVRM" in body:
            return self._gpu_error(("off-bus", body.strip()), body[body.index("NVRM"):].strip(), rec, rec.rank)
        return []

    def _gpu_error(self, key: tuple, text: str, rec: Record, rank: int | None) -> list[TrainingEvent]:
        self._consumed = True
        if key in self._gpu_seen:
            return []
        self._gpu_seen.add(key)
        return self._add_error(LogError("gpu_error", text, rec.at, rec.host, rank), rec)
