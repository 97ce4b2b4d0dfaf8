"""What NVIDIA's dcgm-exporter (the GPU Operator's `nvidia-dcgm-exporter` DaemonSet, image 3.3.9-3.6.1) serves
on `:9400/metrics` for the GPUs of the node its pod runs on, from the twin's truth about those GPUs.

Names and types: the exporter's `etc/default-counters.csv` (NVIDIA/dcgm-exporter@00d6d344): clocks, GPU and
memory temperature, power, energy, PCIe, utilisation (GPU, memory copy, encoder, decoder), XID errors ("value of
the last XID error encountered", a gauge), framebuffer free/used, NVLink bandwidth (a counter), remapped rows.
Labels, in the exporter's order (the GPU Operator's documented sample output): `gpu`, `UUID`, `pci_bus_id`,
`device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and with the kubelet's pod-resources mapping
(`DCGM_EXPORTER_KUBERNETES=true`) `container`, `namespace`, `pod` of the GPU's owner.

What the values follow (the twin has no GPUs; these are its truth, not noise):
- owner: the live pods of the node that request `nvidia.com/gpu`, given GPU indices in creation order (the
  device plugin's allocation); an unowned GPU has no pod labels;
- broken GPUs (the node's `gpu-unhealthy` count, the highest indices, as the device plugin reports them):
  `DCGM_FI_DEV_XID_ERRORS` is the node's XID, utilisation 0;
- utilisation: a training worker's GPUs are busy while its job steps (the job's progress rate > 0) and idle
  when it stalls; an inference replica's GPU in proportion to its in-flight requests;
- temperature and power follow utilisation (idle → load figures); a `hot_gpu` node fault (profile
  `new_nodes.faults`, the `hot-gpu` defect) runs that GPU at its `hot_temp_c` under load;
- NVLink bandwidth and energy are counters integrated over twin time from the same utilisation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from drills.twin.controllers.nodeutil import (
    DCGM_FI_DEV_XID_ERRORS, GPU, GPU_XID_ANNOTATION, dcgm_critical_xids, dcgm_fields, gpu_unhealthy, is_terminal,
    parse_quantity,
)
from drills.twin.exporters.text import RawCounter
from drills.twin.workloads.accept_tools import gpu_uuid, pci_bus_id

__all__ = ["DcgmCollector", "GpuReading", "LABELS", "COUNTERS", "read_gpus"]

log = logging.getLogger(__name__)

LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
OWNER_LABELS = ("container", "namespace", "pod")

# (field, type, help) — verbatim from etc/default-counters.csv; the fields we model (all of them default-on)
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
)

# H100 SXM figures (NVIDIA's datasheet: 700 W TDP; boost SM clock 1980 MHz, HBM3 memory clock 2619 MHz)
_IDLE_W, _LOAD_W = 70.0, 690.0
_SM_IDLE, _SM_LOAD, _MEM_CLOCK = 345, 1980, 2619
_NVLINK_MIBS_AT_LOAD = 200_000.0  # per GPU, what NCCL's all-reduce drives over NVSwitch under a training step
_FB_RESERVED_MIB = 1  # nvidia-smi's "1MiB / 81559MiB" of an idle H100


@dataclass(frozen=True)
class GpuReading:
    """One GPU as the exporter sees it at one scrape."""

    index: int
    uuid: str
    owner: tuple[str, str, str] | None  # (container, namespace, pod)
    util: float  # %
    xid: int  # 0: none since boot
    temp_c: float
    fb_used_mib: int
    fb_total_mib: int


def read_gpus(node: dict, pods: Iterable[dict], busy: Callable[[dict], float], idle_c: int, load_c: int,
              hot: tuple[int, int] | None = None) -> list[GpuReading]:
    """The node's GPUs: owners by allocation, utilisation from `busy(pod)` (0..1), XIDs on the broken ones."""
    name = node["metadata"]["name"]
    capacity = int(parse_quantity(((node.get("status") or {}).get("capacity") or {}).get(GPU)))
    broken = min(capacity, gpu_unhealthy(node))
    xid = _int(((node["metadata"].get("annotations") or {}).get(GPU_XID_ANNOTATION)), 79) if broken else 0
    # DCGM's own cache (what `dcgmi test --inject` wrote, drills/twin/workloads/dcgmi.py) is what dcgm-exporter
    # reads: a GPU with an XID there reports it, whichever index it is
    cached = {gpu: fields.get(DCGM_FI_DEV_XID_ERRORS, 0) for gpu, fields in dcgm_fields(node).items()}
    critical = dcgm_critical_xids(node)
    memory = int((node["metadata"].get("labels") or {}).get("nvidia.com/gpu.memory") or 81559)
    owners: list[tuple[tuple[str, str, str], float]] = []
    live = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name and not is_terminal(p)]
    for pod in sorted(live, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])):
        load = busy(pod)
        for c in (pod.get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            want = int(parse_quantity({**(res.get("limits") or {}), **(res.get("requests") or {})}.get(GPU)))
            owners += [((c.get("name", ""), pod["metadata"].get("namespace", ""), pod["metadata"]["name"]), load)] * want
    out = []
    for i in range(capacity):
        owner, load = owners[i] if i < len(owners) else (None, 0.0)
        faulty = i >= capacity - broken and not cached  # the legacy fault marks the highest indices broken
        util = 0.0 if faulty or i in critical else round(100.0 * load, 1)
        top = hot[1] if hot and hot[0] == i else load_c
        out.append(GpuReading(i, gpu_uuid(name, i), owner, util, cached.get(i, xid if faulty else 0),
                              round(idle_c + (top - idle_c) * util / 100.0, 1),
                              int(memory * 0.92) if owner else _FB_RESERVED_MIB, memory))
    return out


class DcgmCollector(Collector):
    """One scrape of one node's exporter: `gpus()` is read when Prometheus asks; `energy` and `nvlink` are the
    counters' running totals (per GPU index), advanced by `advance(dt)` between scrapes."""

    def __init__(self, node: str, model: str, driver: str, gpus: Callable[[], list[GpuReading]],
                 totals: dict[str, dict[int, float]]):
        self.node, self.model, self.driver, self.gpus, self.totals = node, model, driver, gpus, totals

    def collect(self):
        readings = self.gpus()
        families = {f: RawCounter(f, h, LABELS + OWNER_LABELS) if t == "counter"  # dcgm-exporter's names, as they are
                    else GaugeMetricFamily(f, h, labels=LABELS + OWNER_LABELS) for f, t, h in COUNTERS}
        energy, nvlink = self.totals.setdefault("energy", {}), self.totals.setdefault("nvlink", {})
        for g in readings:
            labels = [str(g.index), g.uuid, pci_bus_id(g.index), f"nvidia{g.index}", self.model, self.node,
                      self.driver, *(g.owner or ("", "", ""))]
            load = g.util / 100.0
            values = {
                "DCGM_FI_DEV_SM_CLOCK": _SM_IDLE + (_SM_LOAD - _SM_IDLE) * (1.0 if load else 0.0),
                "DCGM_FI_DEV_MEM_CLOCK": _MEM_CLOCK,
                "DCGM_FI_DEV_MEMORY_TEMP": g.temp_c + 4,  # HBM runs a few degrees above the die sensor
                "DCGM_FI_DEV_GPU_TEMP": g.temp_c,
                "DCGM_FI_DEV_POWER_USAGE": round(_IDLE_W + (_LOAD_W - _IDLE_W) * load, 3),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy.get(g.index, 0.0),
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
                "DCGM_FI_DEV_GPU_UTIL": g.util,
                "DCGM_FI_DEV_MEM_COPY_UTIL": round(g.util * 0.45, 1),
                "DCGM_FI_DEV_ENC_UTIL": 0, "DCGM_FI_DEV_DEC_UTIL": 0,
                "DCGM_FI_DEV_XID_ERRORS": g.xid,
                "DCGM_FI_DEV_FB_FREE": g.fb_total_mib - g.fb_used_mib,
                "DCGM_FI_DEV_FB_USED": g.fb_used_mib,
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": nvlink.get(g.index, 0.0),
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            }
            for field, value in values.items():
                families[field].add_metric(labels, value)  # no owner: empty values, which Prometheus drops
        return list(families.values())

    def advance(self, readings: list[GpuReading], dt: float) -> None:
        """Integrate the counters over `dt` twin seconds at these readings' load."""
        energy, nvlink = self.totals.setdefault("energy", {}), self.totals.setdefault("nvlink", {})
        for g in readings:
            load = g.util / 100.0
            energy[g.index] = energy.get(g.index, 0.0) + (_IDLE_W + (_LOAD_W - _IDLE_W) * load) * dt * 1000.0
            nvlink[g.index] = nvlink.get(g.index, 0.0) + _NVLINK_MIBS_AT_LOAD * load * dt


def _int(text: Any, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except (TypeError, ValueError):
        return default
