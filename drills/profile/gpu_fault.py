"""The profile's `faults.gpu_fault`: how a GPU fault is injected on this site and what its platform must do.

A GPU is failed the way DCGM documents for testing its consumers: `dcgmi test --inject` writes a field value
(by default DCGM_FI_DEV_XID_ERRORS = 79, "GPU has fallen off the bus") into the cache of the node's DCGM host
engine (drills/faults/gpu_xid.py). From there the platform must carry it: the exporter reports it, the GPU is
marked unhealthy (allocatable `nvidia.com/gpu` drops, or a health agent's taint or condition), and the node is
cordoned and drained — by the site's remediation (`remediation: site`) or, on a site that has none, by the drill
(`remediation: drill`, journaled and reverted like any drain). A real target must set this section (the DCGM
pod's namespace and labels are the site's); the twin uses the defaults (the GPU Operator's names).

The XID field is event-driven (DCGM writes it when the driver reports an XID), so an injected value stays the latest
until the revert; a polled field such as 311 (double-bit ECC, read from NVML every collection) can be overwritten by
DCGM's next sample — injection tooling re-injects those every second — so 230 is the default.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from drills.core.grammar import DnsLabel, LabelKey, Selector, Text
from drills.profile.base import Seconds, Strict

__all__ = ["GpuFault", "XID_FIELD", "ECC_DBE_FIELD"]

log = logging.getLogger(__name__)

XID_FIELD = 230  # DCGM_FI_DEV_XID_ERRORS (NVIDIA/DCGM dcgmlib/dcgm_fields.h: DCGM_FI_DEV_XID_ERROR 230)
ECC_DBE_FIELD = 311  # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (same header): volatile double-bit ECC errors


class GpuFault(Strict):
    """Where DCGM and its exporter run on a GPU node, what to inject, and how the platform must answer."""

    dcgm_namespace: DnsLabel = "gpu-operator"
    dcgm_selector: Selector = "app=nvidia-dcgm"  # the host engine (nv-hostengine); `dcgmi` runs in its pod
    dcgm_container: DnsLabel | None = "nvidia-dcgm-ctr"  # None: the pod's only (or first) container
    exporter_namespace: DnsLabel = "gpu-operator"
    exporter_selector: Selector = "app=nvidia-dcgm-exporter"
    field: Literal[230, 311] = XID_FIELD  # the XID field, or volatile double-bit ECC errors
    value: int = Field(79, ge=1, le=1_000_000)  # XID 79: fallen off the bus; for 311 a count of DBE errors
    gpu: int | None = Field(None, ge=0, le=63)  # a named GPU id; None: chosen at random (the seed is recorded)
    seed: int | None = Field(None, ge=0, le=2 ** 32 - 1)  # the choice's seed; None: drawn and recorded
    # what "marked unhealthy" reads as on this site, besides allocatable nvidia.com/gpu dropping below capacity
    unhealthy_taints: list[LabelKey] = ["nvidia.com/gpu.unhealthy"]
    unhealthy_conditions: list[Text] = ["GPUHealthy=False"]  # TYPE=STATUS of a node condition a health agent sets
    # an exporter that serves the GPU's metric must show the value within this (dcgm-exporter collects every 30 s)
    export_within_s: Seconds = 90.0
    mark_within_s: Seconds = 300.0  # cluster seconds from the injection to the GPU marked unhealthy (a health agent polls)
    remediation: Literal["site", "drill"] = "drill"  # who cordons and drains the node once its GPU is unhealthy
    remediate_within_s: Seconds = 600.0  # cluster seconds from the mark to the node cordoned and its job pods gone
