"""Too good is as suspicious as too bad: every measured value against the physical limit of what it
measured, from the product catalogue (drills/acceptance/catalogue.yaml), never from the node.

    burn        each GPU's Gflop/s ≤ the GPU's dense TF32 tensor peak (gpu-burn -tc multiplies floats on
                tensor cores); its hottest reading ≤ the GPU's shutdown temperature (a GPU above it is off)
    nccl-node   bus bandwidth ≤ the GPU's NVLink bandwidth (PCIe when it has none)
    nccl-pair   bus bandwidth ≤ the slower node's compute NICs in total (line rate / 8, GB/s), scaled by what
                the bus-bandwidth formula counts beyond the network: n ranks on N hosts move 2(N-1)/N of the
                data over the NICs while busbw counts 2(n-1)/n (hierarchical algorithms reduce inside the node
                first), so busbw ≤ NICs × ((n-1)/n) / ((N-1)/N) — 1 for one rank per node
    rdma        each rail's ib_write_bw ≤ its port's rate (ibstat) and the catalogue's NIC rate

A value above its bound is `implausible` (no-go): the tool measured something other than the path it
names (a loopback, a cache, another machine). A bound the catalogue cannot give is recorded as absent.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.acceptance.catalogue import Expectation, Figure
from drills.acceptance.judge import CheckResult

__all__ = ["bounds", "check"]

log = logging.getLogger(__name__)

_SLACK = 1.005  # the tools round; a reading within 0.5 % of the limit is the limit


def bounds(r: CheckResult, expect: Expectation | None, peer: Expectation | None = None) -> list[tuple[str, float, float, Figure]]:
    """(what, measured, limit, the figure the limit comes from) for each bounded value of `r`."""
    if expect is None:
        return []
    m, out = r.measured, []
    if r.check == "burn":
        peak = expect.get("tflops.tf32")
        if peak is not None:
            out += [(f"GPU {i} GEMM Gflop/s", g, peak.value * 1000, peak) for i, g in enumerate(m.get("gflops_per_gpu") or ())]
        off = expect.get("thermal.shutdown_c")
        if off is not None and m.get("temp_max_c") is not None:
            out.append(("hottest GPU °C", m["temp_max_c"], off.value, off))
    elif r.check == "nccl-node" and m.get("busbw_gbs") is not None:
        link = expect.get("nvlink_gbs")
        if link is None or not link.value:
            link = expect.get("pcie_gbs")
        if link is not None:
            out.append(("bus bandwidth inside the node GB/s", m["busbw_gbs"], float(link.value), link))
    elif r.check == "nccl-pair" and m.get("busbw_gbs") is not None:
        limits = [(e.nic_aggregate_gbps(), e) for e in (expect, peer) if e is not None and e.nic_aggregate_gbps()]
        if limits:
            gbps, e = min(limits, key=lambda x: x[0])
            src = e.get("nics.aggregate_gbps") or e.get("nics.rate_gbps")
            n, hosts = m.get("ranks") or 2, max(2, len(m.get("hosts") or ()))
            factor = ((n - 1) / n) / ((hosts - 1) / hosts) if n >= hosts else 1.0
            out.append((f"bus bandwidth {r.node} ↔ {r.peer} GB/s ({e.node}'s NICs: {gbps:.0f} Gb/s, {n} ranks on "
                        f"{hosts} hosts)", m["busbw_gbs"], gbps / 8 * factor, src))
    elif r.check == "rdma":
        rate = expect.get("nics.rate_gbps")
        for hca, bw in (m.get("rail_gbps") or {}).items():
            port = (m.get("port_rate_gbps") or {}).get(hca)
            if port:
                out.append((f"rail {hca} Gb/s (port rate)", bw, float(port), Figure(port, f"ibstat {hca} Rate", "node")))
            if rate is not None:
                out.append((f"rail {hca} Gb/s (NIC rate)", bw, float(rate.value), rate))
    return out


def check(r: CheckResult, expect: Expectation | None, peer: Expectation | None = None) -> CheckResult:
    """`r` with its bounds recorded; a go above any bound becomes an `implausible` no-go."""
    found = bounds(r, expect, peer)
    if not found:
        return r
    expected = dict(r.expected)
    for what, _value, limit, fig in found:
        expected[f"max: {what}"] = {"value": round(limit, 2), "origin": fig.origin, "source": fig.source}
    r = replace(r, expected=expected)
    over = [(what, value, limit, fig) for what, value, limit, fig in found if value > limit * _SLACK]
    if not over or not r.go:
        return r
    what, value, limit, fig = over[0]
    return replace(r, go=False, failure="implausible",
                   reason=f"{r.check} on {r.node}: {what} {value:.1f} is above the physical limit {limit:.1f} "
                          f"({fig.origin}: {fig.source}); the tool did not measure the path it names")
