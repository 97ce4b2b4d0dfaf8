"""What a switch says about one port, on any dialect: speed, MTU, error counters, PFC and ECN.

Each switch dialect (drills/faults/switch/dialects/*.yaml, `port:`) lists the read-only views to run and,
per fact, a regex whose group `v` holds the value — behaviour as data, so a new OS is a YAML entry. This
module only turns the matched words into typed facts; a fact no view matched stays None (unknown, never
healthy). Words for on/off are the vendors' own: NX-OS `On`/`Off`, SONiC `3,4`/`N/A`, NVUE `yes`/`-`,
Onyx `enabled`/`N/A`, ECN `ecn_all`/`ecn, absolute`/`ECN` versus `ecn_none`/`-`. Both lists are closed: a
word in neither (a mode this reader was never shown) is unknown, not "on" — the port is then `not_run`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

__all__ = ["PortFacts", "read_facts", "speed_gbps"]

log = logging.getLogger(__name__)

_OFF = {"off", "n/a", "na", "none", "ecn_none", "disabled", "no", "-", "false", "lossy"}
_ON = {"on", "enabled", "enable", "yes", "true", "lossless", "ecn"}


@dataclass(frozen=True)
class PortFacts:
    speed_gbps: float | None = None
    mtu: int | None = None
    errors: dict[str, int] = field(default_factory=dict)  # counter → its total over the port's views
    pfc: bool | None = None
    pfc_priorities: tuple[int, ...] | None = None
    ecn: bool | None = None

    def to_dict(self) -> dict:
        return {"speed_gbps": self.speed_gbps, "mtu": self.mtu, "errors": dict(self.errors), "pfc": self.pfc,
                "pfc_priorities": list(self.pfc_priorities) if self.pfc_priorities is not None else None,
                "ecn": self.ecn}


def read_facts(views, outputs: list[str], iface: str) -> PortFacts:
    """The facts of `iface` from each view's output (same order as `views`)."""
    speed = mtu = pfc = ecn = None
    prios: tuple[int, ...] | None = None
    errors: dict[str, int] = {}
    for view, text in zip(views, outputs):
        for name, pattern in view.fields.items():
            rx = re.compile(pattern.replace("{iface}", re.escape(iface)), re.M | re.I)
            found = list(rx.finditer(text))
            if not found and name not in view.defaults:
                continue
            m = found[0] if found else None
            value = m["v"].strip() if m is not None else view.defaults[name]
            if name == "speed" and speed is None:
                speed = speed_gbps(value, (m.groupdict().get("u") if m is not None else None) or "G")
            elif name == "mtu" and mtu is None:
                mtu = int(value)
            elif name.startswith("errors."):
                key = name.split(".", 1)[1]
                errors[key] = errors.get(key, 0) + (sum(int(x["v"]) for x in found) if found else int(value))
            elif name == "pfc" and pfc is None:
                pfc, prios = _pfc(value)
            elif name == "ecn" and ecn is None:
                ecn = _ecn(value)
    return PortFacts(speed, mtu, errors, pfc, prios, ecn)


def speed_gbps(value: str, unit: str = "G") -> float | None:
    """`400`, `400G`, `100 Gb/s`, `1000Mb/s` → Gb/s."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([GMT])?", value, re.I)
    if m is None:
        return None
    scale = {"G": 1.0, "M": 0.001, "T": 1000.0}[(m.group(2) or unit[:1] or "G").upper()]
    return float(m.group(1)) * scale


def _pfc(value: str) -> tuple[bool | None, tuple[int, ...] | None]:
    if re.fullmatch(r"\d(,\d)*", value):
        return True, tuple(int(p) for p in value.split(","))
    return _word(value), None


def _ecn(value: str) -> bool | None:
    """`ecn_all`/`ecn_green` (SONiC's WRED modes), `ecn, absolute` (NVUE, Onyx) are on; `ecn_none` is off."""
    word = value.lower().strip()
    if word != "ecn_none" and (word.startswith("ecn_") or word.startswith("ecn,")):
        return True
    return _word(word)


def _word(value: str) -> bool | None:
    word = value.lower().strip()
    return True if word in _ON else False if word in _OFF else None
