"""What the fabric itself says is cabled where: a switch's LLDP neighbours, read over the same sessions.

A node label, a node annotation or the switch inventory's `peers` is what someone wrote down; LLDP is what
the two ends of a cable tell each other. This module reads a switch's neighbour table (the dialect's
`lldp:` command: ntc-templates for NX-OS and EOS, our TextFSM templates for SONiC, Cumulus NVUE and Onyx)
into `Neighbour` rows keyed by the switch's own port names, so a drill can confirm that the port it cuts or
judges faces the object it judges. A switch that does not answer LLDP (disabled, an error, an output no
template reads) is `LldpUnavailable`: unknown, never "as labelled".

`confirm_link` is the uplink drill's use (both ends of one cable, read on both switches); the acceptance
port check uses `read_lldp` and `LldpTable.facing` (drills/acceptance/switch.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from drills.core.errors import CheckFailed
from drills.faults.switch.dialect import SwitchDialect

__all__ = ["Neighbour", "LldpTable", "LldpUnavailable", "LinkMismatch", "parse_neighbours", "read_lldp",
           "same_host", "same_port", "confirm_link"]

log = logging.getLogger(__name__)


class LldpUnavailable(CheckFailed):
    """The switch gave no LLDP table (LLDP off, the command refused, an output no template reads)."""


class LinkMismatch(CheckFailed):
    """LLDP on the two ends of a link disagrees with the inventory, or with each other."""


@dataclass(frozen=True)
class Neighbour:
    """One LLDP neighbour of a switch port: `local` in the switch's full port name, the neighbour's System
    Name, and its Port ID and Port Description as it sent them (a server's lldpd sends its NIC's MAC)."""

    local: str
    system: str
    port_id: str
    port_descr: str = ""

    def names_port(self, iface: str) -> bool:
        """Whether the neighbour's Port ID or Port Description is `iface` (Eth1/1 and Ethernet1/1 alike)."""
        return same_port(self.port_id, iface) or (bool(self.port_descr) and same_port(self.port_descr, iface))

    def to_dict(self) -> dict[str, str]:
        return {"local": self.local, "system": self.system, "port_id": self.port_id, "port_descr": self.port_descr}


@dataclass(frozen=True)
class LldpTable:
    """A switch's neighbour table as read in this run, with where it was read (`source`) and the raw text."""

    switch: str
    command: str
    neighbours: tuple[Neighbour, ...]
    output: str = ""

    @property
    def source(self) -> str:
        return f"ssh {self.switch}: `{self.command}`"

    def on(self, iface: str) -> list[Neighbour]:
        return [n for n in self.neighbours if same_port(n.local, iface)]

    def facing(self, host: str) -> list[Neighbour]:
        """The rows whose neighbour is `host` (its System Name, or that name with a domain)."""
        return [n for n in self.neighbours if same_host(n.system, host)]

    def describe(self, iface: str) -> str:
        rows = self.on(iface)
        return " and ".join(f"{n.system} {n.port_id}" for n in rows) if rows else "no neighbour"


def parse_neighbours(parser: str, text: str) -> list[Neighbour]:
    """Every neighbour row of `text` (`parser` is the dialect's `lldp.parser`); ValueError when the parser
    does not read the text (an output of another shape, an error the dialect did not recognise)."""
    from drills.faults.switch.parse import StateUnreadable, template_rows

    try:
        rows = template_rows(parser, text)
    except StateUnreadable as err:
        raise ValueError(str(err)) from None
    out = []
    for row in rows:
        system = (row.get("NEIGHBOR_NAME") or "").strip()
        if not system:
            continue  # a port block without a neighbour (Onyx)
        out.append(Neighbour(_full(row["LOCAL_INTERFACE"]), system, (row.get("NEIGHBOR_INTERFACE") or "").strip(),
                             (row.get("NEIGHBOR_DESCRIPTION") or "").strip()))
    return out


def read_lldp(session) -> LldpTable:
    """The switch's LLDP neighbour table over an open `SwitchSession`; LldpUnavailable says why not."""
    dialect: SwitchDialect = session.dialect
    name = session.cfg.name
    if dialect.lldp is None:
        raise LldpUnavailable(f"switch {name}: the {dialect.name} dialect names no LLDP command")
    line = dialect.line(dialect.lldp.command)
    res = session.run(line)
    if not res.ok:
        raise LldpUnavailable(f"switch {name}: `{line}` failed ({res.words!r}): LLDP is not available there")
    try:
        rows = parse_neighbours(dialect.lldp.parser, res.output)
    except ValueError as err:
        first = res.output.strip().splitlines()[0][:80] if res.output.strip() else ""
        raise LldpUnavailable(f"switch {name}: `{line}` is not an LLDP table ({err}; output began {first!r})") from None
    log.debug("switch %s: %d LLDP neighbours", name, len(rows))
    return LldpTable(name, line, tuple(rows), res.output)


def same_host(system: str, host: str) -> bool:
    """An LLDP System Name names `host` when it is the name, or the name followed by a domain."""
    a, b = system.strip().lower(), host.strip().lower()
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def same_port(a: str, b: str) -> bool:
    """Whether two port names name one port: Eth1/1, Ethernet1/1 and `Ethernet 1/1`; Et1 and Ethernet1."""
    return _key(a) == _key(b)


def confirm_link(near_cfg, iface: str, inventory, session_for) -> dict:
    """Both ends of the cable at `near_cfg` `iface`, as LLDP on both switches says: the far switch and port
    that the near port's neighbour names, confirmed by the far switch's own table naming the near port back.
    `session_for(cfg)` opens a read-only session. The inventory's `peers`, when it names the far end, must
    agree. Returns the far end as the journal keeps it, with the LLDP sources; LinkMismatch / LldpUnavailable
    (both CheckFailed: nothing was injected) otherwise."""
    with session_for(near_cfg) as s:
        near = read_lldp(s)
        rows = near.on(iface)
        state = _port_state(s, iface) if not rows else ""
    where = f"{near_cfg.name} {iface}"
    if len(rows) != 1:
        raise LinkMismatch(f"LLDP on {near_cfg.name} shows {near.describe(iface)} on {iface}{state} ({near.source}): "
                           "the far end of the uplink is not confirmed; nothing was shut")
    seen = rows[0]
    far_cfg = next((c for c in inventory or () if same_host(seen.system, c.name)), None)
    named = (near_cfg.peers or {}).get(iface)
    claimed = tuple(named.split(":", 1)) if named and ":" in named else None
    out: dict = {"lldp": {"near": {**seen.to_dict(), "source": near.source}}}
    if far_cfg is None:
        if claimed and not same_host(seen.system, claimed[0]):
            raise LinkMismatch(f"{where}: the switch inventory says it is cabled to {claimed[0]} {claimed[1]}, LLDP "
                               f"says {seen.system} {seen.port_id} ({near.source}); nothing was shut")
        # a site's inventory may list its leaves only: the far end is then the one LLDP names, journaled as such,
        # and the revert's verify says it could not read it (drills/faults/switch/ends.py)
        out.update(name=seen.system, interface=seen.port_id, switch=None)
        return out
    with session_for(far_cfg) as s:
        far = read_lldp(s)
    back = [n for n in far.neighbours if same_host(n.system, near_cfg.name) and n.names_port(iface)]
    if len(back) != 1:
        shown = ", ".join(f"{n.local} → {n.system} {n.port_id}" for n in far.facing(near_cfg.name)) or "none"
        raise LinkMismatch(f"{where}: LLDP there names {far_cfg.name} {seen.port_id}, but {far_cfg.name}'s LLDP "
                           f"shows no port whose neighbour is {near_cfg.name} {iface} (its rows for "
                           f"{near_cfg.name}: {shown}; {far.source}): the two ends disagree; nothing was shut")
    far_iface = back[0].local
    if claimed and not (same_host(far_cfg.name, claimed[0]) and same_port(far_iface, claimed[1])):
        raise LinkMismatch(f"{where}: the switch inventory says it is cabled to {claimed[0]} {claimed[1]}, LLDP on "
                           f"both ends says {far_cfg.name} {far_iface} ({near.source}; {far.source}): the inventory "
                           "is stale or the cable moved; nothing was shut")
    out.update(name=far_cfg.name, interface=far_iface, switch=far_cfg.model_dump(mode="json"))  # what verify reads
    out["lldp"]["far"] = {**back[0].to_dict(), "source": far.source}
    return out


# -- helpers -----------------------------------------------------------------------------------
def _port_state(session, iface: str) -> str:
    """Why a port may show no neighbour, in words: `, which is admin down` (a dead link carries no LLDP)."""
    from drills.faults.switch.parse import StateUnreadable, read_state

    res = session.run(session.dialect.command("show", iface)[0])
    try:
        st = read_state(session.dialect, res.output, iface) if res.ok else None
    except StateUnreadable:
        st = None
    if st is None or (st.admin_up and st.oper_up):
        return ""
    return f", which is admin {st.admin} and oper {st.oper}"


_SHORT = re.compile(r"^(?:ethernet|eth|et)\s*(\d.*)$", re.I)


def _key(name: str) -> str:
    m = _SHORT.match(name.strip())
    return f"ethernet{m.group(1).replace(' ', '')}".lower() if m else name.strip().lower()


def _full(local: str) -> str:
    """A port name as the switch's own grammar spells it: NX-OS `Eth1/1` and EOS `Et1` → Ethernet…; Onyx's
    `Ethernet 1/1` (its LLDP block header) → Eth1/1, the name its other views use."""
    local = local.strip()
    m = re.match(r"^Ethernet\s+(\d+/\d+(?:/\d+)?)$", local)
    if m:
        return f"Eth{m.group(1)}"
    m = re.match(r"^(?:Eth|Et)(\d.*)$", local)
    return f"Ethernet{m.group(1)}" if m else local
