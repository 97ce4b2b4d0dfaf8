"""Which GPUs the DCGM diagnostic ran on: `dcgmi discovery -l`, run in the same Job as `dcgmi diag`.

`dcgmi diag` prints no host name and no GPU UUID (its Metadata names the DCGM version, the driver and the
PCI *device* ids, the same for every GPU of a model), so a diag table alone is bound to the node only by the
pod's `spec.nodeName` — and a host engine reached over `--host` (a remote nv-hostengine, a stale socket
mount) answers for another machine's GPUs. The Job therefore prints `dcgmi discovery -l` first (the host
engine's GPU list: GPU ID, Name, PCI Bus ID, Device UUID per GPU), under the `=== <tool>` markers the rdma and
storage Jobs use, and the run compares those UUIDs with the ones the node's gpu check (`nvidia-smi -L`)
recorded (drills/acceptance/identity.py `cross_check`): another set is `wrong_node`, naming the node whose
GPUs they are when this run saw them.

Format (tests/data/real/accept/dcgmi-discovery-l-*.txt, DCGM 3/4): `N GPUs found.` then a box per GPU whose
continuation rows carry `PCI Bus ID: …` and `Device UUID: GPU-…`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from drills.acceptance.judge import CheckResult, RDMA_MARK, tool_sections

__all__ = ["DiscoveredGpu", "parse_discovery", "split", "record", "DISCOVERY", "DIAG"]

log = logging.getLogger(__name__)

DISCOVERY = "dcgmi discovery"  # the section whose marker line starts with this
DIAG = "dcgmi diag"

_ROW = re.compile(r"^\|\s*(?P<id>\d*)\s*\|\s*(?P<key>Name|PCI Bus ID|Device UUID):\s*(?P<value>.*?)\s*\|\s*$")


@dataclass(frozen=True)
class DiscoveredGpu:
    gpu_id: int
    name: str = ""
    pci_bus_id: str = ""
    uuid: str = ""


def parse_discovery(text: str) -> list[DiscoveredGpu]:
    """The GPUs of a `dcgmi discovery -l` table, in its order; [] when no GPU row is shown."""
    gpus: list[dict] = []
    for line in text.splitlines():
        m = _ROW.match(line.strip())
        if not m:
            continue
        if m["id"]:
            gpus.append({"gpu_id": int(m["id"])})
        elif not gpus:
            continue  # a continuation row before any GPU row: not this table
        key = {"Name": "name", "PCI Bus ID": "pci_bus_id", "Device UUID": "uuid"}[m["key"]]
        gpus[-1][key] = m["value"]
    return [DiscoveredGpu(**g) for g in gpus]


def split(text: str) -> tuple[str, str | None]:
    """(the diag's text, the discovery's text or None) of a dcgm Job's log. A log without markers is the
    diag alone (a profile whose dcgm command runs `dcgmi diag` only): its GPUs are then not named."""
    if not any(line.startswith(RDMA_MARK) for line in text.splitlines()):
        return text, None
    sections = tool_sections(text)
    diag = next((body for name, body in sections.items() if name.startswith(DIAG)), "")
    found = next((body for name, body in sections.items() if name.startswith(DISCOVERY)), None)
    return diag, found


def record(r: CheckResult, text: str) -> CheckResult:
    """The dcgm result with the UUIDs its host engine listed (`measured.dcgm_gpu_uuids`), for the run's
    identity cross-check; a GO whose log names no GPU is `not_run` (its evidence cannot be bound to GPUs)."""
    if r.check != "dcgm":
        return r
    _, found = split(text)
    gpus = parse_discovery(found) if found is not None else []
    uuids = [g.uuid for g in gpus if g.uuid]
    r = replace(r, measured={**r.measured, "dcgm_gpu_uuids": uuids})
    if r.go and not uuids:
        why = ("printed no GPU UUID" if found is not None else
               "was not run in the diagnostic's Job (its log has no `=== dcgmi discovery -l` section)")
        return replace(r, go=False, failure="not_run",
                       reason=f"DCGM on {r.node}: `dcgmi discovery -l` {why}; `dcgmi diag` names no host and no GPU, "
                              "so its results are not bound to this node's GPUs")
    return r
