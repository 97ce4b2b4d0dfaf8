"""The product catalogue (catalogue.yaml) and each node's expectation drawn from it.

A node is judged against what its product IS — GPU count, GPU model, NVLink/PCIe bandwidth, dense GEMM
peaks, thermal limits, NICs — from the makers' datasheets, selected by the node's labels
(`node.kubernetes.io/instance-type` for the server, `nvidia.com/gpu.product` for the GPU) or by the profile
(`acceptance.server` / `acceptance.product`). The node's own `nvidia.com/gpu` capacity is something to
verify against it, never the expectation. A profile value set explicitly (`acceptance.expect`, or a
threshold such as `thresholds.gpus`) overrides the catalogue and says so in the report.

Every figure is a `Figure(value, source, origin)`: the report prints where each expectation came from.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
from dataclasses import dataclass, field
from typing import Any

from drills.core import datafiles
from drills.core.errors import InvalidProfile

__all__ = ["Figure", "Expectation", "catalogue", "expectation_for", "INSTANCE_TYPE_LABEL", "GPU_PRODUCT_LABEL"]

log = logging.getLogger(__name__)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_GPU_FIELDS = ("memory_gb", "nvlink_gbs", "pcie_gbs", "tflops_dense", "thermal", "tdp_w", "smi_names")
_SERVER_FIELDS = ("gpus", "nics")


@dataclass(frozen=True)
class Figure:
    value: Any
    source: str  # the document (catalogue) or the profile key it came from
    origin: str  # catalogue | profile

    def describe(self) -> str:
        return f"{self.value} ({self.origin}: {self.source})"


@dataclass(frozen=True)
class Expectation:
    """What one node must be: figures by name (`gpus`, `smi_names`, `tflops.tf32`, `nvlink_gbs`,
    `thermal.shutdown_c`, `nics.rate_gbps`, `nics.aggregate_gbps`, …), and how the entries were chosen."""

    node: str
    server: str | None
    gpu: str | None
    selected_by: tuple[str, ...]
    figures: dict[str, Figure] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()  # labels that name different products (the node is not what it says)

    def get(self, name: str) -> Figure | None:
        return self.figures.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        f = self.figures.get(name)
        return default if f is None else f.value

    def nic_aggregate_gbps(self) -> float | None:
        """The server's compute-fabric line rate in total (count × rate, or the source's aggregate)."""
        agg = self.value("nics.aggregate_gbps")
        if agg is not None:
            return float(agg)
        count, rate = self.value("nics.count"), self.value("nics.rate_gbps")
        return float(count * rate) if count and rate else None

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "gpu": self.gpu, "selected_by": list(self.selected_by),
                "conflicts": list(self.conflicts),
                "figures": {k: {"value": f.value, "origin": f.origin, "source": f.source} for k, f in self.figures.items()}}


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, Any]:
    """The parsed catalogue; InvalidProfile when an entry has a figure without a named source."""
    text = (importlib.resources.files("drills.acceptance") / "catalogue.yaml").read_text(encoding="utf-8")
    data = datafiles.load_text(text) or {}
    sources = data.get("sources") or {}
    for kind, fields in (("gpus", _GPU_FIELDS), ("servers", _SERVER_FIELDS)):
        for key, entry in (data.get(kind) or {}).items():
            cite = entry.get("cite") or {}
            for name in fields:
                if name in entry and cite.get(name, cite.get("*")) not in sources:
                    raise InvalidProfile(f"catalogue.yaml: {kind}.{key}.{name} names no source (cite)")
    for key, server in (data.get("servers") or {}).items():
        if server.get("gpu") not in (data.get("gpus") or {}):
            raise InvalidProfile(f"catalogue.yaml: servers.{key}.gpu {server.get('gpu')!r} is not in gpus")
    return data


def expectation_for(node: str, labels: dict[str, str], cfg) -> Expectation:
    """The node's expectation: the server (profile, else instance-type label), its GPU (server, profile,
    else the GPU product label), then the profile's explicit overrides on top."""
    data = catalogue()
    gpus, servers, sources = data.get("gpus") or {}, data.get("servers") or {}, data.get("sources") or {}
    selected: list[str] = []
    conflicts: list[str] = []
    server_key = cfg.server
    if server_key:
        if server_key not in servers:
            raise InvalidProfile(f"acceptance.server {server_key!r} is not in the catalogue "
                                 f"(known: {', '.join(sorted(servers))})")
        selected.append(f"profile acceptance.server={server_key}")
    else:
        itype = labels.get(INSTANCE_TYPE_LABEL)
        server_key = next((k for k, s in servers.items() if itype in (s.get("instance_types") or ())), None)
        if server_key:
            selected.append(f"label {INSTANCE_TYPE_LABEL}={itype}")
    label_gpu = _gpu_by_label(gpus, labels.get(GPU_PRODUCT_LABEL))
    gpu_key = cfg.product or (servers[server_key]["gpu"] if server_key else label_gpu)
    if cfg.product:
        if cfg.product not in gpus:
            raise InvalidProfile(f"acceptance.product {cfg.product!r} is not in the catalogue "
                                 f"(known: {', '.join(sorted(gpus))})")
        selected.append(f"profile acceptance.product={cfg.product}")
    elif gpu_key and not server_key:
        selected.append(f"label {GPU_PRODUCT_LABEL}={labels.get(GPU_PRODUCT_LABEL)}")
    if label_gpu and gpu_key and label_gpu != gpu_key:
        conflicts.append(f"{GPU_PRODUCT_LABEL}={labels.get(GPU_PRODUCT_LABEL)} is a {label_gpu}; the expected "
                         f"GPU is {gpu_key}")
    figures: dict[str, Figure] = {}
    if gpu_key:
        _flatten(figures, gpus[gpu_key], _GPU_FIELDS, sources, f"catalogue gpus.{gpu_key}")
    if server_key:
        _flatten(figures, servers[server_key], _SERVER_FIELDS, sources, f"catalogue servers.{server_key}")
    for name, value in (cfg.expect or {}).items():
        figures[name] = Figure(value, f"acceptance.expect.{name}", "profile")
    t = cfg.thresholds
    if t.gpus is not None:  # the older spelling of the same override
        figures["gpus"] = Figure(t.gpus, "acceptance.thresholds.gpus", "profile")
    return Expectation(node, server_key, gpu_key, tuple(selected), figures, tuple(conflicts))


def _gpu_by_label(gpus: dict, product: str | None) -> str | None:
    if not product:
        return None
    return next((k for k, g in gpus.items() if product in (g.get("labels") or ())), None)


def _flatten(out: dict[str, Figure], entry: dict, fields: tuple[str, ...], sources: dict, where: str) -> None:
    cite = entry.get("cite") or {}
    for name in fields:
        if name not in entry:
            continue
        src = f"{where} — {sources[cite.get(name, cite.get('*'))]}"
        value = entry[name]
        if isinstance(value, dict):
            key = "tflops" if name == "tflops_dense" else name
            for sub, v in value.items():
                out[f"{key}.{sub}"] = Figure(v, src, "catalogue")
        else:
            out[name] = Figure(value, src, "catalogue")
