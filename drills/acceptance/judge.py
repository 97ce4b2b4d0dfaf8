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
from drills.acceptance.catalogue import Expectation
from drills.profile.acceptance import Requirement, Thresholds

__all__ = ["Failure", "CheckResult", "judge", "judge_gpu", "judge_dcgm", "judge_burn", "judge_nccl_node",
           "judge_nccl_pair", "judge_rdma", "judge_storage", "not_run", "RDMA_MARK", "tool_sections"]

log = logging.getLogger(__name__)

Failure = Literal["missing_gpu", "version_mismatch", "diag_failed", "thermal", "slow", "socket_fallback",
                  "port_down", "port_config", "tool_error", "not_run", "no_expectation", "product_mismatch",
                  "wrong_node", "wrong_path", "implausible", "missing_nic", "partial", "wrong_target", "gpu_unusable",
                  "warned", "changed", "node_unhealthy", "unread_error", "wrong_port"]
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
    expected: dict[str, Any] = field(default_factory=dict)  # figure → {value, origin, source} (catalogue/profile)
    evidence: dict[str, Any] = field(default_factory=dict)  # pod, spec.nodeName, hosts, GPU UUIDs, NIC GUIDs…

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


def judge(check: str, node: str, text: str, t: Thresholds, *, capacity: int, expect: Expectation | None = None,
          peer: str | None = None, need: Requirement | None = None) -> CheckResult:
    """Dispatch to the check's judge; a tool output that does not parse is a no-go (tool_error). `need` is
    the policy's requirement for the check (DCGM's level, the burn-in's length)."""
    need = need or Requirement()
    try:
        if check == "nccl-pair":
            return judge_nccl_pair(node, peer or "?", text, t)
        fn = {"gpu": lambda: judge_gpu(node, text, t, capacity, expect),
              "dcgm": lambda: judge_dcgm(node, _dcgm_diag(text), t, need.min_level),
              "burn": lambda: judge_burn(node, text, t, need.min_seconds), "nccl-node": lambda: judge_nccl_node(node, text, t),
              "rdma": lambda: judge_rdma(node, text, t, expect), "storage": lambda: judge_storage(node, text, t)}[check]
        return fn()
    except DrillError as err:  # ToolOutputError, or fio's report errors
        return _nogo(node, check, "tool_error", f"{check} on {node}: unreadable tool output: {err}", {}, {}, peer)


def _port_macs(ibstat_text: str) -> dict[str, str]:
    from drills.acceptance.port_nics import port_macs

    return port_macs(ibstat_text)


def _dcgm_diag(text: str) -> str:
    from drills.acceptance.dcgm_gpus import split

    return split(text)[0]


def judge_gpu(node: str, text: str, t: Thresholds, capacity: int, expect: Expectation | None = None) -> CheckResult:
    """The GPUs a pod sees, against the product's count from the catalogue (or the profile's explicit
    override) — the node's own nvidia.com/gpu capacity is verified too, never taken as the expectation."""
    gpus = nvidia_smi.parse_list(text)
    figure = expect.get("gpus") if expect is not None else None
    measured: dict[str, Any] = {"visible_gpus": len(gpus), "capacity": capacity,
                                "gpu_uuids": [g.uuid for g in gpus], "gpu_names": sorted({g.name for g in gpus})}
    if figure is None:
        where = ", ".join(expect.selected_by) if expect is not None and expect.selected_by else "no catalogue entry"
        return _nogo(node, "gpu", "no_expectation", f"{node}: no independent GPU count to judge {len(gpus)} visible "
                     f"GPUs against ({where}; the node's own capacity is not an expectation): label its "
                     "node.kubernetes.io/instance-type with a catalogued server, or set acceptance.server or "
                     "acceptance.expect.gpus", measured, {})
    expected = int(figure.value)
    limits: dict[str, Any] = {"gpus": expected, "gpus_from": figure.origin}
    if expect is not None and expect.conflicts:
        return _nogo(node, "gpu", "product_mismatch", f"{node}: {'; '.join(expect.conflicts)}", measured, limits)
    names = expect.value("smi_names") if expect is not None else None
    foreign = sorted({g.name for g in gpus} - set(names or ())) if names else []
    if foreign:
        return _nogo(node, "gpu", "product_mismatch", f"nvidia-smi on {node} lists {', '.join(foreign)}; a "
                     f"{expect.server or expect.gpu} carries {' or '.join(names)} ({figure.source})", measured, limits)
    warned = nvidia_smi.parse_warnings(text)
    if warned:  # nvidia-smi's own warning (infoROM corrupted: its exit code 14): unknown is not healthy
        measured["warnings"] = list(warned)
        return _nogo(node, "gpu", "warned", f"nvidia-smi on {node} warns: {warned[0]}"
                     + (f" (and {len(warned) - 1} more)" if len(warned) > 1 else "")
                     + ": a GPU the tool warns about is not accepted unexamined", measured, limits)
    lost = nvidia_smi.parse_lost(text)
    if lost:  # before counting: a lost GPU is not a missing one (it is there; the driver cannot reach it)
        measured["lost_gpus"] = [pci for pci, _ in lost]
        return _nogo(node, "gpu", "diag_failed", f"nvidia-smi on {node} cannot get a handle for GPU " + "; ".join(
            f"{pci} ({why})" for pci, why in lost) + ": the driver lost it (fallen off the bus)", measured, limits)
    mig = nvidia_smi.parse_mig(text)
    if mig:
        return _nogo(node, "gpu", "product_mismatch", f"nvidia-smi -L on {node} lists {len(mig)} MIG devices: MIG mode "
                     "splits its GPUs; a node is accepted whole (disable MIG)", dict(measured, mig_devices=len(mig)), limits)
    if len(gpus) != expected or capacity != expected:
        return _nogo(node, "gpu", "missing_gpu", f"a pod on {node} sees {len(gpus)} GPUs (nvidia-smi -L); the node "
                     f"advertises {capacity} (nvidia.com/gpu); a {expect.server or expect.gpu} has {expected} "
                     f"({figure.origin}: {figure.source})", measured, limits)
    table = nvidia_smi.parse_table(text)
    measured.update(driver=table.driver_version, cuda=table.cuda_version)
    memory = expect.get("memory_gb") if expect is not None else None
    small = [g for g in table.gpus if memory is not None and g.memory_total_mib is not None
             and g.memory_total_mib * 2**20 < memory.value * 1e9]
    if small:
        g = small[0]
        measured["memory_mib"] = [x.memory_total_mib for x in table.gpus]
        return _nogo(node, "gpu", "product_mismatch", f"GPU {g.index} of {node} has {g.memory_total_mib} MiB; a "
                     f"{expect.gpu} has {memory.value} GB ({memory.source})", measured, dict(limits, memory_gb=memory.value))
    shown = len(table.gpus) + len([i for i in table.errored if i not in {g.index for g in table.gpus}])
    if shown < len(gpus) and not table.errored:  # the table is cut or a block is missing: the rest is unread
        return _nogo(node, "gpu", "tool_error", f"nvidia-smi on {node} lists {len(gpus)} GPUs (-L) but its table shows "
                     f"{shown}: the readings of the rest are missing", dict(measured, table_gpus=shown), limits)
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
    return _go(node, "gpu", f"{len(gpus)}/{expected} GPUs visible ({expect.server or expect.gpu}); driver {table.driver_version}, CUDA "
               f"{table.cuda_version}", measured, limits)


def judge_dcgm(node: str, text: str, t: Thresholds, min_level: int | None = None) -> CheckResult:
    """DCGM's diagnostic: no test failed, and the level that really ran (from the sections whose tests ran,
    not the level asked for) is at least the policy's minimum."""
    result = dcgmi.parse_diag(text)
    ran = [x for x in result.tests if x.section != "Deployment" and x.result != "Skip"]
    sections = {x.section for x in ran}
    reached = 3 if "Stress" in sections else 2 if sections & {"Hardware", "Integration"} else 1
    ids = [d.strip() for d in (result.metadata.get("GPU Device IDs Detected") or "").split(",") if d.strip()]
    measured = {"tests": len(result.tests), "failed": [f.name for f in result.failures],
                "dcgm": result.metadata.get("DCGM Version"), "level_ran": reached, "gpus_tested": len(ids) or None}
    limits = {"level": t.dcgm_level, "failures_allowed": 0, "min_level": min_level}
    if result.failures:
        first = result.failures[0]
        note = f": {first.notes[0]}" if first.notes else ""
        return _nogo(node, "dcgm", "diag_failed", f"DCGM diagnostic level {t.dcgm_level} on {node}: "
                     f"{', '.join(f.name for f in result.failures)} failed{note}", measured, limits)
    warned = [x for x in result.tests if x.result == "Warn"]
    if warned:  # DCGM's own non-pass verdict (NVIDIA's preflight reports it with its error code): not a pass
        first = warned[0]
        note = f": {first.notes[0]}" if first.notes else ""
        return _nogo(node, "dcgm", "warned", f"DCGM diagnostic level {t.dcgm_level} on {node}: "
                     f"{', '.join(x.name for x in warned)} ended Warn{note}", dict(measured, warned=[x.name for x in warned]),
                     limits)
    if t.dcgm_level >= 2 and not ran:
        # DCGM skips what it cannot run (an unsupported GPU, a missing plugin, another process holding the GPUs):
        # only its software checks passed, and those say nothing of the GPUs
        skipped = [x.name for x in result.tests if x.section != "Deployment"]
        return _nogo(node, "dcgm", "not_run", f"DCGM diagnostic level {t.dcgm_level} on {node} ran no GPU test: "
                     + (f"{', '.join(skipped)} skipped" if skipped else "only the Deployment checks printed"),
                     measured, limits)
    if min_level is not None and reached < min_level:
        return _nogo(node, "dcgm", "not_run", f"DCGM on {node} ran level {reached} (asked: {t.dcgm_level}); the "
                     f"acceptance policy requires level ≥ {min_level}", measured, limits)
    return _go(node, "dcgm", f"DCGM level {t.dcgm_level}: {len(ran)} GPU tests ran, none failed", measured, limits)


def judge_burn(node: str, text: str, t: Thresholds, min_seconds: int | None = None) -> CheckResult:
    result = gpu_burn.parse_burn(text)
    n = result.gpus
    gflops = [result.peak_gflops(i) for i in range(n)]
    temps = [result.max_temp_c(i) for i in range(n)]
    errors = [result.errors(i) for i in range(n)]
    measured = {"gflops_min": min(gflops), "gflops_per_gpu": gflops, "temp_max_c": max(temps), "errors": sum(errors),
                "gpu_uuids": [g.uuid for g in nvidia_smi.parse_list(text)],  # gpu-burn prints nvidia-smi -L's lines
                "gpus_tested": n, "burn_s": result.seconds}
    limits = {"gemm_gflops_min": t.gemm_gflops_min, "max_temp_c": t.max_temp_c, "errors": 0, "min_seconds": min_seconds}
    if any(errors):
        bad = [i for i, e in enumerate(errors) if e]
        return _nogo(node, "burn", "diag_failed", f"gpu-burn on {node}: computation errors on GPU "
                     f"{', '.join(map(str, bad))}", measured, limits)
    idle = [i for i, g in enumerate(gflops) if g == 0.0]
    if result.init_error is not None or (idle and len(idle) == n):  # the seed's §5.1: given, held, never computed on
        said = f" (`Couldn't init a GPU test: {result.init_error}`)" if result.init_error else ""
        return _nogo(node, "burn", "gpu_unusable", f"gpu-burn on {node} could not compute on its GPUs{said}: "
                     f"{len(idle)} of {n} sat idle at 0 Gflop/s while it ran — CUDA cannot use the GPUs the pod was "
                     "given (driver/CUDA mismatch, a missing fabric manager, devices hidden)", measured, limits)
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
    if not result.finished:  # killed, cut or hung: its figures are of the part that ran
        return _nogo(node, "burn", "not_run", f"gpu-burn on {node} stopped at {result.snapshots[-1].percent:g} % of its "
                     f"{result.seconds or '?'} s run (no 100 % line, no `GPU n: OK` verdicts): the burn-in did not finish",
                     dict(measured, percent=result.snapshots[-1].percent), limits)
    if min_seconds is not None and (result.seconds or 0) < min_seconds:
        ran = "no `Burning for N seconds` line" if result.seconds is None else f"{result.seconds} s"
        return _nogo(node, "burn", "not_run", f"gpu-burn on {node} burned {ran}; the acceptance policy requires "
                     f"≥ {min_seconds} s (a shorter run never reaches the temperatures that throttle)", measured, limits)
    return _go(node, "burn", f"{n} GPUs ≥ {min(gflops):.0f} Gflop/s for {result.seconds} s, hottest {max(temps)} °C",
               measured, limits)


def judge_nccl_node(node: str, text: str, t: Thresholds) -> CheckResult:
    result = nccl_tests.parse_perf(text)
    return _nccl(node, "nccl-node", result, t.nvlink_busbw_min_gbs, None)


def judge_nccl_pair(node: str, peer: str, text: str, t: Thresholds) -> CheckResult:
    result = nccl_tests.parse_perf(text)
    return _nccl(node, "nccl-pair", result, t.pair_busbw_min_gbs, peer)


def _nccl(node: str, check: str, result: nccl_tests.PerfResult, minimum: float, peer: str | None) -> CheckResult:
    where = f"{node} ↔ {peer}" if peer else f"inside {node}"
    measured = {"busbw_gbs": result.peak_busbw, "avg_busbw_gbs": result.avg_busbw, "wrong": result.wrong,
                "transports": result.transports, "hosts": list(result.hosts), "ranks": len(result.ranks)}
    limits = {"busbw_min_gbs": minimum, "transport": "RDMA" if peer else None}
    if not result.failure and not result.finished:  # killed, hung or cut: its rows prove nothing about the rest
        last = f" after its {result.rows[-1].size_bytes} B row" if result.rows else ""
        return _nogo(node, check, "tool_error", f"all_reduce_perf {where} did not finish: no `# Avg bus bandwidth` "
                     f"summary{last}", measured, limits, peer)
    if peer and not result.failure and (path := _pair_path(node, peer, result)):
        return _nogo(node, check, path[0], f"all_reduce_perf {where}: {path[1]}", measured, limits, peer)
    if result.failure:
        return _nogo(node, check, "tool_error", f"all_reduce_perf {where} failed: {result.failure}", measured, limits,
                     peer)
    if result.socket:
        return _nogo(node, check, "socket_fallback", f"all_reduce_perf {where}: NCCL ran on NET/Socket on "
                     f"{', '.join(result.socket)} (RDMA expected)", measured, limits, peer)
    if result.wrong:
        return _nogo(node, check, "diag_failed", f"all_reduce_perf {where}: {result.wrong} wrong results", measured,
                     limits, peer)
    if result.unchecked:  # `-c 0`: `Out of bounds values : 0 OK` counted nothing
        return _nogo(node, check, "not_run", f"all_reduce_perf {where} did not check its results (#wrong N/A: run "
                     "with -c 0): a bandwidth without its correctness check is no pass", measured, limits, peer)
    if result.peak_busbw is None or result.peak_busbw < minimum:
        got = "no result row" if result.peak_busbw is None else f"{result.peak_busbw:.1f} GB/s"
        return _nogo(node, check, "slow", f"all_reduce_perf {where}: bus bandwidth {got}, below {minimum:.0f} GB/s",
                     measured, limits, peer)
    if result.warnings:  # NCCL said something went wrong (an IB async event, a retry, a CUDA failure) and went on
        measured["warnings"] = list(result.warnings)
        return _nogo(node, check, "warned", f"all_reduce_perf {where} finished, but NCCL warned: "
                     f"{result.warnings[0]}" + (f" (and {len(result.warnings) - 1} more)" if len(result.warnings) > 1
                                                else ""), measured, limits, peer)
    via = f" over {'/'.join(sorted(set(result.transports.values())))}" if result.transports else ""
    return _go(node, check, f"bus bandwidth {result.peak_busbw:.1f} GB/s {where}{via}", measured, limits, peer)


def _pair_path(node: str, peer: str, result: nccl_tests.PerfResult) -> tuple[Failure, str] | None:
    """Why the pair's output does not prove a network path between both hosts (None: it does): ranks on
    both hosts, and each host's NCCL on a network transport (IB/RoCE; Socket is judged as a fallback)."""
    hosts = set(result.hosts)
    if len(hosts) < 2:
        return "wrong_path", (f"every rank ran on {', '.join(sorted(hosts)) or 'no host'}: the pair never left "
                              "the node (NVLink/P2P inside one machine), not a network path")
    if hosts != {node, peer}:
        return "wrong_node", f"its ranks ran on {', '.join(sorted(hosts))}, not on {node} and {peer}"
    silent = [h for h in (node, peer) if h not in result.transports]
    if silent:
        return "wrong_path", (f"no NCCL network transport printed for {', '.join(silent)} (NCCL_DEBUG=INFO shows "
                              "NET/IB or NET/Socket): the path is not shown")
    return None


def judge_rdma(node: str, text: str, t: Thresholds, expect: Expectation | None = None) -> CheckResult:
    """`=== ibstat` then one `=== ib_write_bw -d HCA` section per rail; the adapters ibstat lists against the
    server's compute NIC count (catalogue), the ports' state, rate and link layer, each rail's bandwidth."""
    sections = tool_sections(text)
    cas = ibstat.parse_ibstat(sections.get("ibstat", ""))
    rails = {name.split()[-1]: body for name, body in sections.items() if name.startswith("ib_write_bw")}
    measured: dict[str, Any] = {"ports": {c.name: c.ports[0].state if c.ports else "?" for c in cas}, "rail_gbps": {},
                                "nic_guids": {c.name: c.node_guid for c in cas if c.node_guid},
                                "nic_macs": _port_macs(sections.get("ibstat", "")),
                                "port_rate_gbps": {c.name: c.ports[0].rate_gbps for c in cas if c.ports}}
    limits = {"rail_bw_min_gbps": t.rail_bw_min_gbps, "rate_gbps": t.rail_rate_gbps, "link_layer": t.link_layer}
    nics = expect.get("nics.count") if expect is not None else None
    if nics is not None:
        limits["nics"] = nics.value
        if len(cas) < int(nics.value):
            return _nogo(node, "rdma", "missing_nic", f"ibstat on {node} lists {len(cas)} RDMA adapters; a "
                         f"{expect.server} has {nics.value} compute NICs ({nics.origin}: {nics.source})", measured, limits)
    total = expect.get("nics.aggregate_gbps") if expect is not None and nics is None else None
    if total is not None:  # the product known only by its NICs' total: the ports ibstat lists must add up to it
        limits["nics_aggregate_gbps"] = total.value
        shown = sum(c.ports[0].rate_gbps or 0 for c in cas if c.ports)
        if shown < float(total.value):
            return _nogo(node, "rdma", "missing_nic", f"ibstat on {node} lists {len(cas)} RDMA adapters, {shown:g} Gb/s "
                         f"in all; a {expect.server} has {total.value} Gb/s of compute NICs ({total.origin}: "
                         f"{total.source})", measured, limits)
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
    measured["rails_tested"] = len(measured["rail_gbps"])
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


def tool_sections(text: str) -> dict[str, str]:
    """A Job log that runs several tools, split at the `=== <tool> <args>` lines its script echoes."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(RDMA_MARK):
            current = line[len(RDMA_MARK):].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}
