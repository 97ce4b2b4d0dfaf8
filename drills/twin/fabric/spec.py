"""Fabric specs from wherever they come: the twin profile's fabric section (pydantic), plain dicts,
or a generated leaf/spine of a given size with each dialect's own port names."""

from __future__ import annotations

import itertools
import logging
from typing import Any, Iterable

from drills.core.errors import InvalidProfile
from drills.twin.fabric.dialects import load_dialect
from drills.twin.fabric.topology import SwitchSpec, UplinkSpec

__all__ = ["fabric_specs", "leaf_spine", "spec_extra"]

log = logging.getLogger(__name__)


def fabric_specs(source: Any) -> list[SwitchSpec]:
    """Normalise a fabric description into SwitchSpecs.

    Accepts a list of switch dicts/objects, or anything with a `switches` list (a dict, the twin
    profile's fabric model), or a dict/object describing a generated fabric
    (`leaves`, `spines` as counts, optional `dialects`, `spine_dialect`, `uplinks_per_spine`, `downlinks`).
    """
    if hasattr(source, "model_dump") and not isinstance(source, (list, tuple)):
        source = source.model_dump()
    if isinstance(source, dict):
        if "switches" in source:
            source = _switch_list(source["switches"])
        elif isinstance(source.get("leaves"), int):
            return leaf_spine(**{k: v for k, v in source.items()
                                 if k in ("leaves", "spines", "dialects", "spine_dialect", "uplinks_per_spine", "downlinks")})
        else:
            raise InvalidProfile("fabric: give a `switches` list or `leaves`/`spines` counts")
    elif hasattr(source, "switches"):
        source = _switch_list(source.switches)
    if not isinstance(source, (list, tuple)):
        raise InvalidProfile(f"fabric: cannot read switches from a {type(source).__name__}")
    specs = [SwitchSpec.from_obj(s.model_dump() if hasattr(s, "model_dump") else s) for s in source]
    for s in specs:
        load_dialect(s.dialect)  # an unknown dialect is a profile error, reported before anything starts
    return specs


def leaf_spine(
    leaves: int = 2,
    spines: int = 2,
    dialects: Iterable[str] = ("sonic", "nxos", "nvue"),
    spine_dialect: str = "sonic",
    uplinks_per_spine: int = 1,
    downlinks: int = 4,
) -> list[SwitchSpec]:
    """A Clos fabric: leaf i uses dialects[i % n]; each leaf has `downlinks` server ports first,
    then `uplinks_per_spine` ports to every spine; spines have one port per leaf uplink."""
    if leaves < 1 or spines < 1 or uplinks_per_spine < 1:
        raise InvalidProfile("fabric: need at least one leaf, one spine and one uplink per spine")
    cycle = itertools.cycle(list(dialects))
    leaf_dialects = [next(cycle) for _ in range(leaves)]
    sd = load_dialect(spine_dialect)
    spine_ports = [[sd.port(p) for p in range(leaves * uplinks_per_spine)] for _ in range(spines)]
    out: list[SwitchSpec] = []
    leaf_specs = []
    for li, dname in enumerate(leaf_dialects):
        d = load_dialect(dname)
        ports = [d.port(p) for p in range(downlinks + spines * uplinks_per_spine)]
        ups = []
        for si in range(spines):
            for k in range(uplinks_per_spine):
                ups.append(UplinkSpec(ports[downlinks + si * uplinks_per_spine + k], f"spine{si + 1}",
                                      spine_ports[si][li * uplinks_per_spine + k]))
        leaf_specs.append(SwitchSpec(f"leaf{li + 1}", "leaf", dname, tuple(ports), tuple(ups)))
    for si in range(spines):
        out.append(SwitchSpec(f"spine{si + 1}", "spine", spine_dialect, tuple(spine_ports[si])))
    return leaf_specs + out


def spec_extra(source: Any, name: str, key: str, default: Any = None) -> Any:
    """A per-switch field the link model does not keep (e.g. `host_key: rsa`), looked up by name."""
    if hasattr(source, "model_dump") and not isinstance(source, (list, tuple)):
        source = source.model_dump()
    if isinstance(source, dict):
        source = _switch_list(source.get("switches") or [])
    elif hasattr(source, "switches"):
        source = _switch_list(source.switches)
    for s in source if isinstance(source, (list, tuple)) else ():
        get = s.get if isinstance(s, dict) else (lambda k, d=None, _s=s: getattr(_s, k, d))
        if get("name") == name:
            value = get(key)
            return default if value is None else value
    return default


def _switch_list(switches: Any) -> list:
    """The profile keys switches by name (`{leaf-1: {role: leaf}}`); a list is taken as is."""
    if isinstance(switches, dict):
        return [({"name": k, **v} if isinstance(v, dict) else v) for k, v in switches.items()]
    return list(switches)
