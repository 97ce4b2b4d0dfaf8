"""Judge each acceptance check: the tool's output (parsed by drills/measure/accept) against the profile's
thresholds, one `CheckResult` per (node, check). A result says go or no-go, the figures measured and the
thresholds they met or missed, and — when no-go — a typed `failure` and the sentence a reviewer reads."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from drills.core.errors import DrillError
from drills.measure.accept import dcgmi, gpu_burn, ibstat, nccl_tests, nvidia_smi, perftest
from drills.profile.acceptance import Thresholds

__all__ = ["Failure", "CheckResult", "judge", "judge_gpu", "judge_dcgm", "judge_burn", "judge_nccl_node",
           "judge_nccl_pair", "judge_rdma", "judge_storage", "not_run", "RDMA_MARK"]

log = logging.getLogger(__name__)

Failure = Literal["missing_gpu", "version_mismatch", "diag_failed", "thermal", "slow", "socket_fallback",
                  "port_down", "port_config", "tool_error", "not_run"]
RDMA_MARK = "=== "  # the rdma Job echoes `=== <tool> <args>` before each tool


@dataclass(frozen=True)
class CheckResult:
    node: str
    check: str
    go: bool
    reason: str
    measured: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None
    peer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _go(node: str, check: str, reason: str, measured: dict, thresholds: dict, peer: str | None = None) -> CheckResult:
    return CheckResult(node, check, True, reason, measured, thresholds, None, peer)


def _nogo(node: str, check: str, failure: Failure, reason: str, measured: dict, thresholds: dict,
          peer: str | None = None) -> CheckResult:
    return CheckResult(node, check, False, reason, measured, thresholds, failure, peer)


def not_run(node: str, check: str, why: str, peer: str | None = None) -> CheckResult:
    """A check that produced nothing to judge (its Job failed to start, timed out): a no-go, never a pass."""
    return _nogo(node, check, "not_run", why, {}, {}, peer)


def judge(check: str, node: str, text: str, t: Thresholds, *, capacity: int, peer: str | None = None) -> CheckResult:
    """Dispatch to the check's judge; a tool output that does not parse is a no-go (tool_error)."""
    try:
        if check == "nccl-pair":
            return judge_nccl_pair(node, peer or "?", text, t)
        fn = {"gpu": lambda: judge_gpu(node, text, t, capacity), "dcgm": lambda: judge_dcgm(node, text, t),
              "burn": lambda: judge_burn(node, text, t), "nccl-node": lambda: judge_nccl_node(node, text, t),
              "rdma": lambda: judge_rdma(node, text, t), "storage": lambda: judge_storage(node, text, t)}[check]
        return fn()
    except DrillError as err:  # ToolOutputError, or fio's report errors
        return _nogo(node, check, "tool_error", f"{check} on {node}: unreadable tool output: {err}", {}, {}, peer)


def judge_gpu(node: str, text: str, t: Thresholds, capacity: int) -> CheckResult:
    gpus = nvidia_smi.parse_list(text)
    expected = t.gpus if t.gpus is not None else capacity
    measured: dict[str, Any] = {"visible_gpus": len(gpus), "capacity": capacity}
    limits: dict[str, Any] = {"gpus": expected}
    if len(gpus) != expected or len(gpus) != capacity:
        return _nogo(node, "gpu", "missing_gpu", f"a pod on {node} sees {len(gpus)} GPUs (nvidia-smi -L); the node "
                     f"advertises {capacity} (nvidia.com/gpu) and {expected} are expected", measured, limits)
    table = nvidia_smi.parse_table(text)
    measured.update(driver=table.driver_version, cuda=table.cuda_version)
    if table.errored:  # listed by -L, but the driver cannot read it (fallen off the bus, GSP timeout, …)
        measured["errored_gpus"] = list(table.errored)
        return _nogo(node, "gpu", "diag_failed", f"nvidia-smi on {node} shows ERR! for GPU "
                     f"{', '.join(map(str, table.errored))}: the driver cannot read it", measured, limits)
    wrong = [(what, got, want) for what, got, want in (("driver", table.driver_version, t.driver_version),
                                                       ("CUDA", table.cuda_version, t.cuda_version))
             if want is not None and got != want]
    limits.update(driver=t.driver_version, cuda=t.cuda_version)
    if wrong:
        words = "; ".join(f"{what} {got}, the profile pins {want}" for what, got, want in wrong)
        return _nogo(node, "gpu", "version_mismatch", f"{node}: {words}", measured, limits)
    return _go(node, "gpu", f"{len(gpus)}/{capacity} GPUs visible; driver {table.driver_version}, CUDA "
               f"{table.cuda_version}", measured, limits)


def judge_dcgm(node: str, text: str, t: Thresholds) -> CheckResult:
    result = dcgmi.parse_diag(text)
    measured = {"tests": len(result.tests), "failed": [f.name for f in result.failures],
                "dcgm": result.metadata.get("DCGM Version")}
    limits = {"level": t.dcgm_level, "failures_allowed": 0}
    if result.failures:
        first = result.failures[0]
        note = f": {first.notes[0]}" if first.notes else ""
        return _nogo(node, "dcgm", "diag_failed", f"DCGM diagnostic level {t.dcgm_level} on {node}: "
                     f"{', '.join(f.name for f in result.failures)} failed{note}", measured, limits)
    ran = [x for x in result.tests if x.section != "Deployment" and x.result != "Skip"]
    if t.dcgm_level >= 2 and not ran:
        # DCGM skips what it cannot run (an unsupported GPU, a missing plugin, another process holding the GPUs):
        # only its software checks passed, and those say nothing of the GPUs
        skipped = [x.name for x in result.tests if x.section != "Deployment"]
        return _nogo(node, "dcgm", "not_run", f"DCGM diagnostic level {t.dcgm_level} on {node} ran no GPU test: "
                     + (f"{', '.join(skipped)} skipped" if skipped else "only the Deployment checks printed"),
                     measured, limits)
    return _go(node, "dcgm", f"DCGM level {t.dcgm_level}: {len(ran)} GPU tests ran, none failed", measured, limits)


def judge_burn(node: str, text: str, t: Thresholds) -> CheckResult:
    result = gpu_burn.parse_burn(text)
    n = result.gpus
    gflops = [result.peak_gflops(i) for i in range(n)]
    temps = [result.max_temp_c(i) for i in range(n)]
    errors = [result.errors(i) for i in range(n)]
    measured = {"gflops_min": min(gflops), "gflops_per_gpu": gflops, "temp_max_c": max(temps), "errors": sum(errors)}
    limits = {"gemm_gflops_min": t.gemm_gflops_min, "max_temp_c": t.max_temp_c, "errors": 0}
    if any(errors):
        bad = [i for i, e in enumerate(errors) if e]
        return _nogo(node, "burn", "diag_failed", f"gpu-burn on {node}: computation errors on GPU "
                     f"{', '.join(map(str, bad))}", measured, limits)
    hot = [i for i, c in enumerate(temps) if c >= t.max_temp_c]
    if hot:
        i = hot[0]
        return _nogo(node, "burn", "thermal", f"GPU {i} of {node} reached {temps[i]} °C under the {t.burn_seconds} s "
                     f"burn-in (limit: below {t.max_temp_c} °C; it throttles) and ran at {gflops[i]:.0f} Gflop/s",
                     measured, limits)
    slow = [i for i, g in enumerate(gflops) if g < t.gemm_gflops_min]
    if slow:
        i = slow[0]
        return _nogo(node, "burn", "slow", f"GPU {i} of {node}: {gflops[i]:.0f} Gflop/s in the burn-in, below "
                     f"{t.gemm_gflops_min:.0f}", measured, limits)
    return _go(node, "burn", f"{n} GPUs ≥ {min(gflops):.0f} Gflop/s, hottest {max(temps)} °C", measured, limits)


def judge_nccl_node(node: str, text: str, t: Thresholds) -> CheckResult:
    result = nccl_tests.parse_perf(text)
    return _nccl(node, "nccl-node", result, t.nvlink_busbw_min_gbs, None)


def judge_nccl_pair(node: str, peer: str, text: str, t: Thresholds) -> CheckResult:
    result = nccl_tests.parse_perf(text)
    return _nccl(node, "nccl-pair", result, t.pair_busbw_min_gbs, peer)


def _nccl(node: str, check: str, result: nccl_tests.PerfResult, minimum: float, peer: str | None) -> CheckResult:
    where = f"{node} ↔ {peer}" if peer else f"inside {node}"
    measured = {"busbw_gbs": result.peak_busbw, "avg_busbw_gbs": result.avg_busbw, "wrong": result.wrong,
                "transports": result.transports}
    limits = {"busbw_min_gbs": minimum, "transport": "RDMA" if peer else None}
    if result.failure:
        return _nogo(node, check, "tool_error", f"all_reduce_perf {where} failed: {result.failure}", measured, limits,
                     peer)
    if result.socket:
        return _nogo(node, check, "socket_fallback", f"all_reduce_perf {where}: NCCL ran on NET/Socket on "
                     f"{', '.join(result.socket)} (RDMA expected)", measured, limits, peer)
    if result.wrong:
        return _nogo(node, check, "diag_failed", f"all_reduce_perf {where}: {result.wrong} wrong results", measured,
                     limits, peer)
    if result.peak_busbw is None or result.peak_busbw < minimum:
        got = "no result row" if result.peak_busbw is None else f"{result.peak_busbw:.1f} GB/s"
        return _nogo(node, check, "slow", f"all_reduce_perf {where}: bus bandwidth {got}, below {minimum:.0f} GB/s",
                     measured, limits, peer)
    via = f" over {'/'.join(sorted(set(result.transports.values())))}" if result.transports else ""
    return _go(node, check, f"bus bandwidth {result.peak_busbw:.1f} GB/s {where}{via}", measured, limits, peer)


def judge_rdma(node: str, text: str, t: Thresholds) -> CheckResult:
    """`=== ibstat` then one `=== ib_write_bw -d HCA` section per rail."""
    sections = _sections(text)
    cas = ibstat.parse_ibstat(sections.get("ibstat", ""))
    rails = {name.split()[-1]: body for name, body in sections.items() if name.startswith("ib_write_bw")}
    measured: dict[str, Any] = {"ports": {c.name: c.ports[0].state if c.ports else "?" for c in cas}, "rail_gbps": {}}
    limits = {"rail_bw_min_gbps": t.rail_bw_min_gbps, "rate_gbps": t.rail_rate_gbps, "link_layer": t.link_layer}
    down = [c.name for c in cas if not c.ports or not c.ports[0].up]
    if down:
        return _nogo(node, "rdma", "port_down", f"RDMA port of {', '.join(down)} on {node} is down (ibstat: "
                     f"{', '.join(f'{c.name} {c.ports[0].state}/{c.ports[0].physical_state}' for c in cas if c.name in down and c.ports)})",
                     measured, limits)
    wrong = [c for c in cas if (t.rail_rate_gbps and c.ports[0].rate_gbps != t.rail_rate_gbps)
             or (t.link_layer and c.ports[0].link_layer != t.link_layer)]
    if wrong:
        c = wrong[0]
        return _nogo(node, "rdma", "port_config", f"{c.name} on {node}: rate {c.ports[0].rate_gbps} Gb/s, link layer "
                     f"{c.ports[0].link_layer} (expected {t.rail_rate_gbps}, {t.link_layer})", measured, limits)
    for hca, body in sorted(rails.items()):
        try:
            bw = perftest.parse_bw(body).average_gbps
        except DrillError as err:
            return _nogo(node, "rdma", "tool_error", f"ib_write_bw on {node} {hca}: {err}", measured, limits)
        measured["rail_gbps"][hca] = bw
    slow = {h: bw for h, bw in measured["rail_gbps"].items() if bw < t.rail_bw_min_gbps}
    if slow:
        hca, bw = min(slow.items(), key=lambda kv: kv[1])
        return _nogo(node, "rdma", "slow", f"rail {hca} of {node}: ib_write_bw {bw:.1f} Gb/s, below "
                     f"{t.rail_bw_min_gbps:.0f} Gb/s ({bw / (t.rail_rate_gbps or bw) * 100:.0f} % of line rate)",
                     measured, limits)
    if not rails:
        return _nogo(node, "rdma", "tool_error", f"no ib_write_bw result from {node}", measured, limits)
    return _go(node, "rdma", f"{len(cas)} ports Active; every rail ≥ {min(measured['rail_gbps'].values()):.0f} Gb/s",
               measured, limits)


def judge_storage(node: str, text: str, t: Thresholds) -> CheckResult:
    from drills.measure.fio_report import parse_fio_output

    fio = parse_fio_output(text)
    read, write = fio.read.bw_bytes_s / 1e6, fio.write.bw_bytes_s / 1e6
    measured = {"read_mb_s": round(read, 1), "write_mb_s": round(write, 1)}
    limits = {"read_mb_s_min": t.store_read_mb_s_min, "write_mb_s_min": t.store_write_mb_s_min}
    if failed := [(job, code) for job, code in zip(fio.jobs, fio.job_errors) if code]:
        # a job that hit an I/O error stopped early (fio's default): whatever it moved says nothing of the store
        words = "; ".join(f"job {job!r} ended with error {code} ({os.strerror(code)})" for job, code in failed)
        return _nogo(node, "storage", "tool_error", f"fio from {node} to the shared store: {words}",
                     dict(measured, job_errors=list(fio.job_errors)), limits)
    slow = [(w, got, lim) for w, got, lim in (("read", read, t.store_read_mb_s_min),
                                              ("write", write, t.store_write_mb_s_min)) if got < lim]
    if slow:
        words = "; ".join(f"{w} {got:.0f} MB/s, below {lim:.0f}" for w, got, lim in slow)
        return _nogo(node, "storage", "slow", f"fio from {node} to the shared store: {words}", measured, limits)
    return _go(node, "storage", f"fio from {node}: read {read:.0f} MB/s, write {write:.0f} MB/s", measured, limits)


def _sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(RDMA_MARK):
            current = line[len(RDMA_MARK):].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}
