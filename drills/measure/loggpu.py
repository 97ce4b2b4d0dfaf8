"""GPU hardware failures as PyTorch and the NVIDIA driver print them (a part of `LogReader`): kind `gpu_error`.

- PyTorch's NCCL watchdog whose CUDA check raised (`[PG 0 Rank 12] Process group watchdog thread terminated with
  exception: CUDA error: uncorrectable ECC error encountered`; ≤ 2.1: `NCCL watchdog thread terminated with
  exception: CUDA error: unknown error`): no timeout, no NCCL WARN — the GPU (its context) failed under the job.
- The driver's Xid (`NVRM: Xid (PCI:0000:dc:00): 45, pid=…, name=python3, …`), one error per GPU and Xid (the
  same Xid on other channels of that GPU is the same failure).
- The driver's fallen-off-the-bus message, which newer drivers print over three lines without an Xid (`NVRM: The
  NVIDIA GPU 0000:b3:00.0` / `NVRM: (PCI ID: …) installed in this system has` / `NVRM: fallen off the bus and is
  not responding to commands.`): joined back into one error, one per GPU. Xid 79 and the driver's own `NVRM: GPU
  0000:06:00.0: GPU has fallen off the bus.` after it are the same lost GPU: one error (the PCI address is
  compared without its function, `PCI:0000:06:00` = `0000:06:00.0`).
- The driver failing to bring a GPU up at all (`NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)`,
  `rm_init_adapter failed, device minor number 5`): the GPU is unusable, one error per GPU.
- PyTorch's CUDA error of a failed GPU outside a traceback and outside the watchdog (`RuntimeError: CUDA error:
  uncorrectable ECC error encountered` as a bare line, under rich's traceback box, or as a UI quoted the message;
  PyTorch 1.x `cuda runtime error (39) : uncorrectable ECC error encountered at …`): the errors CUDA returns for a
  GPU that failed (`_GPU_CUDA_ERRORS`), not for a kernel bug. Inside a traceback the traceback reader reports it.
  Other frameworks word the same CUDA error their way: caffe2's glog check `Check failed: error == cudaSuccess
  unspecified launch failure` (nine threads' FATAL lines glued on one line are one failure).
- NVML unable to reach a GPU (`nvidia-smi`: `Unable to determine the device handle for GPU0000:03:00.0: Unknown Error`,
  `…: GPU is lost. Reboot the system to recover this GPU`): the GPU is gone from the driver's view — lost, as after Xid 79.
- The driver asking for the GPU to be reset (`NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required
  [NV_ERR_RESET_REQUIRED] …`, an RM status code): the GPU is unusable until reset, whatever the job printed.

Real examples: tests/data/real/logs/torch-watchdog-uncorrectable-ecc-*.log, vllm-ray-worker-nccl-watchdog-*.log,
nvrm-*.log, torch-bare-runtimeerror-cuda-uncorrectable-ecc-no-traceback.log, torch-1.x-cuda-runtime-error-39-*.log.
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
_NVRM_GPU = re.compile(r"NVRM: GPU (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?): ")
_NVML_NO_HANDLE = re.compile(r"Unable to determine the device handle for GPU ?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                             r"[0-9A-Fa-f]{2}\.\d)")
_RESET_REQUIRED = re.compile(r"NVRM: .*\[NV_ERR_RESET_REQUIRED\]")  # the RM status code, not the sentence
_INIT_FAILED = re.compile(r"NVRM: GPU (?P<pci>[0-9a-fA-F:.]+): (?:RmInitAdapter failed!|rm_init_adapter failed)")
# what CUDA returns to a process whose GPU failed (NVIDIA's Xid catalogue maps the hardware Xids to these), as PyTorch
# words it (`CUDA error: …`, 1.x `cuda runtime error (N) : …`); an illegal address or a device assert is a kernel bug
_GPU_CUDA_ERRORS = ("uncorrectable ECC error encountered", "unspecified launch failure", "unknown error",
                    "uncorrectable NVLink error detected during the execution", "GPU is lost")
_CUDA_GPU_FAILURE = re.compile(r"(?:(?:CUDA error|cuda runtime error \(\d+\)) ?: |error == cudaSuccess )(?:" +
                               "|".join(map(re.escape, _GPU_CUDA_ERRORS)) + ")")


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
            pci, xid = _pci(m.group("pci")), m.group("xid")
            key = ("lost", pci) if xid == "79" else ("xid", pci, xid)  # Xid 79: the GPU fell off the bus
            return self._gpu_error(key, body[m.start():].strip(), rec, rec.rank)
        if m := _INIT_FAILED.search(body):
            return self._gpu_error(("init", _pci(m.group("pci"))), body[m.start():].strip(), rec, rec.rank)
        if m := _NVML_NO_HANDLE.search(body):
            return self._gpu_error(("lost", _pci(m.group("pci"))), body[m.start():].strip(), rec, rec.rank)
        if m := _RESET_REQUIRED.search(body):
            return self._gpu_error(("reset", rec.host), body[body.index("NVRM:"):].strip(), rec, rec.rank)
        if (m := _CUDA_GPU_FAILURE.search(body)) and not getattr(self, "_in_traceback", False):
            return self._gpu_error(("cuda", rec.rank, m.group(0)), body.strip(), rec, rec.rank)
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
                return self._gpu_error(("lost", _pci(pci)), text, rec, rec.rank)
            self._gpu_held = (pci, text, lines + 1) if lines < 2 else None
            return []
        if _OFF_BUS.search(body) and "NVRM" in body:
            m = _NVRM_GPU.search(body)
            return self._gpu_error(("lost", _pci(m.group("pci")) if m else body.strip()),
                                   body[body.index("NVRM"):].strip(), rec, rec.rank)
        return []

    def _gpu_error(self, key: tuple, text: str, rec: Record, rank: int | None) -> list[TrainingEvent]:
        self._consumed = True
        if key in self._gpu_seen:
            return []
        self._gpu_seen.add(key)
        return self._add_error(LogError("gpu_error", text, rec.at, rec.host, rank), rec)


def _pci(address: str) -> str:
    """One GPU's PCI address as the driver's lines spell it in several ways (`PCI:0000:06:00`, `0000:06:00.0`)."""
    address = address.lower().removeprefix("pci:")
    return address.rsplit(".", 1)[0] if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", address) else address
