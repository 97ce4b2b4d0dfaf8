"""gpu-burn (wilicc/gpu-burn): a GEMM burn-in whose progress lines give, per GPU, the Gflop/s of the
last interval, the error count and the temperature — `proc'd: N (X Gflop/s) - … errors: 0 - 0 temps: 56 C - 73 C`.
Error counts restart at every `Summary at:`; the final `GPU n: FAULTY` verdict is sticky (gpu_burn-drv.cpp)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["BurnSnapshot", "BurnResult", "parse_burn"]

_LINE = re.compile(r"^(?P<pct>\d+(?:\.\d+)?)%\s+proc'd:\s*(?P<procd>.*?)\s+errors:\s*(?P<errors>.*?)\s+temps:\s*(?P<temps>.*?)\s*$")
_GFLOPS = re.compile(r"-?\d+ \((?P<g>\d+(?:\.\d+)?) Gflop/s\)")
_ERRORS = re.compile(r"(?P<n>-?\d+)(?:\s+\((?P<flag>[A-Z!]+)\))?")
_TEMP = re.compile(r"(?P<t>\d+) C")
_VERDICT = re.compile(r"^GPU (?P<gpu>\d+): (?P<word>OK|FAULTY)\s*$")


_BURNING = re.compile(r"^Burning for (?P<s>\d+) seconds\.")
# gpu_burn-drv.cpp when a GPU's CUDA/cuBLAS context cannot be made: `Couldn't init a GPU test: Error in "init": …`
_INIT_FAILED = re.compile(r"^Couldn't init a GPU test: (?P<why>.+)$")


@dataclass(frozen=True)
class BurnSnapshot:
    percent: float
    gflops: tuple[float, ...]  # per GPU, this interval
    errors: tuple[int, ...]
    temps_c: tuple[int, ...]
    died: tuple[bool, ...]  # "(DIED!)" after a GPU's error count


@dataclass(frozen=True)
class BurnResult:
    snapshots: tuple[BurnSnapshot, ...]
    verdicts: dict[int, str]  # the final "Tested N GPUs" lines, when the run got there: gpu → OK | FAULTY
    seconds: int | None = None  # `Burning for N seconds.`: the run length gpu-burn itself announced
    init_error: str | None = None  # `Couldn't init a GPU test: …`: CUDA could not be used on a GPU it was given

    @property
    def finished(self) -> bool:
        """The burn ran to its end: a progress line at 100 % or the final `GPU n: OK|FAULTY` verdicts."""
        return self.snapshots[-1].percent >= 100.0 or bool(self.verdicts)

    @property
    def gpus(self) -> int:
        return len(self.snapshots[-1].gflops)

    def peak_gflops(self, gpu: int) -> float:
        return max(s.gflops[gpu] for s in self.snapshots)

    def max_temp_c(self, gpu: int) -> int:
        return max(s.temps_c[gpu] for s in self.snapshots)

    def errors(self, gpu: int) -> int:
        """The most errors any line showed (gpu-burn resets its counts at each summary, so the last line
        alone can read 0 for a GPU that erred before); at least 1 when it died or was called FAULTY."""
        worst = max(abs(s.errors[gpu]) for s in self.snapshots)
        bad = any(s.died[gpu] for s in self.snapshots) or self.verdicts.get(gpu) == "FAULTY"
        return max(worst, 1) if bad else worst


def parse_burn(text: str) -> BurnResult:
    """Every progress line in order; ToolOutputError when there is none (the burn never reported)."""
    snaps = []
    verdicts: dict[int, str] = {}
    seconds = init_error = None
    for raw in text.splitlines():
        line = raw.strip()
        if seconds is None and (b := _BURNING.match(line)):
            seconds = int(b["s"])
        elif init_error is None and (f := _INIT_FAILED.match(line)):
            init_error = f["why"].strip()
        elif (m := _LINE.match(line)):
            errors = [(int(e["n"]), e["flag"] == "DIED!") for e in _ERRORS.finditer(m["errors"])]
            snaps.append(BurnSnapshot(float(m["pct"]), tuple(float(g["g"]) for g in _GFLOPS.finditer(m["procd"])),
                                      tuple(n for n, _ in errors), tuple(int(t["t"]) for t in _TEMP.finditer(m["temps"])),
                                      tuple(d for _, d in errors)))
        elif (v := _VERDICT.match(line)):
            verdicts[int(v["gpu"])] = v["word"]
    if not snaps:
        raise ToolOutputError("no gpu-burn progress line (`N%  proc'd: … Gflop/s … temps: … C`): the burn never ran")
    return BurnResult(tuple(snaps), verdicts, seconds, init_error)
