"""`ibstat` (infiniband-diags): each CA with its ports' state, physical state, rate (Gb/s) and link
layer (`InfiniBand`, or `Ethernet` for RoCE), and the adapter's Node GUID (its identity)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drills.core.errors import ToolOutputError

__all__ = ["Port", "Ca", "parse_ibstat"]

_CA = re.compile(r"^CA '(?P<name>[^']+)'")
_PORT = re.compile(r"^Port (?P<n>\d+):")
_FIELD = re.compile(r"^(?P<key>[A-Za-z ]+):\s*(?P<value>.*)$")


@dataclass(frozen=True)
class Port:
    number: int
    state: str  # Active | Down | Init | Armed
    physical_state: str  # LinkUp | Disabled | Polling | …
    rate_gbps: int | None
    link_layer: str | None  # InfiniBand | Ethernet

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"


@dataclass(frozen=True)
class Ca:
    name: str
    ca_type: str | None
    firmware: str | None
    ports: tuple[Port, ...]
    node_guid: str | None = None  # the adapter's own identity (`Node GUID: 0x…`)


def parse_ibstat(text: str) -> tuple[Ca, ...]:
    """Every CA in order; ToolOutputError when there is none."""
    cas: list[dict] = []
    port: dict | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if (ca := _CA.match(line)):
            cas.append({"name": ca["name"], "fields": {}, "ports": []})
            port = None
        elif cas and (p := _PORT.match(line)):
            port = {"number": int(p["n"])}
            cas[-1]["ports"].append(port)
        elif cas and (f := _FIELD.match(line)):
            (port if port is not None else cas[-1]["fields"])[f["key"]] = f["value"].strip()
    if not cas:
        raise ToolOutputError("no `CA '…'` block: not ibstat output (no RDMA device visible?)")
    return tuple(Ca(c["name"], c["fields"].get("CA type"), c["fields"].get("Firmware version"),
                    tuple(Port(p["number"], p.get("State", "?"), p.get("Physical state", "?"),
                               int(p["Rate"]) if p.get("Rate", "").isdigit() else None, p.get("Link layer"))
                          for p in c["ports"]), c["fields"].get("Node GUID"))
                 for c in cas)
