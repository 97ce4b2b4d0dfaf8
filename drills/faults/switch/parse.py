"""Reading a switch's answer: maintained parsers first (ntc-templates / TextFSM for NX-OS and EOS, NVUE's
own JSON for Cumulus), our own TextFSM templates (`templates/`) where none exists upstream (SONiC,
Onyx, NX-OS err-disabled, NVUE text tables), then a small interpretation of the vendor's words into
admin / oper state.

`parse_interfaces(parser, text, iface=)` → {name: PortState} for every interface the output shows
(a state the output does not state is None); an output in which the parser finds no interface at all
raises `StateUnreadable` (never a silent {}). `read_state(dialect, output, iface)` is the injector's
read of one port: both states must be known, else `StateUnreadable` says what is missing.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import textfsm

from drills.faults.switch.dialect import SwitchDialect, clean_output

__all__ = ["PortState", "StateUnreadable", "PARSERS", "parse_interfaces", "read_state", "parser_for_command",
           "template_rows"]

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class PortState:
    """One interface as the switch reports it: "up", "down", or None where the output does not say.
    `alias` is the port's other name where the OS prints one (SONiC alias naming mode)."""

    admin: str | None
    oper: str | None
    alias: str | None = None

    @property
    def admin_up(self) -> bool:
        return self.admin == "up"

    @property
    def oper_up(self) -> bool:
        return self.oper == "up"

    def __eq__(self, other: object) -> bool:  # the alias is a label, not state
        return isinstance(other, PortState) and (self.admin, self.oper) == (other.admin, other.oper)

    def __hash__(self) -> int:
        return hash((self.admin, self.oper))


class StateUnreadable(ValueError):
    """The output does not have the shape the parser expects (the message says what is missing)."""


def parse_interfaces(parser: str, text: str, iface: str | None = None) -> dict[str, PortState]:
    """Every interface `text` shows, by name. `iface` names the port for outputs that do not print it
    (NVUE `nv show interface <port> link`). Raises StateUnreadable when the parser rejects the text or
    finds no interface in it (an output of another shape: a {} would read as "nothing to report")."""
    if parser not in PARSERS:
        raise StateUnreadable(f"no parser named {parser!r} (known: {', '.join(sorted(PARSERS))})")
    ports = PARSERS[parser](_strip_source(clean_output(text)), iface)
    if not ports:
        raise StateUnreadable(f"{parser} finds no interface in this output" + (f" (no row for {iface})" if iface else ""))
    return ports


def read_state(dialect: SwitchDialect, output: str, iface: str) -> PortState:
    """Admin and oper state of `iface` from the dialect's show command output (by name or alias)."""
    ports = parse_interfaces(dialect.state, output, iface)
    state = ports.get(iface) or next((s for s in ports.values() if s.alias == iface), None) \
        or next((s for name, s in ports.items() if _short(name) == _short(iface)), None)
    if state is None:
        raise StateUnreadable(f"no row for {iface} (the output shows {', '.join(ports) or 'no interface'})")
    missing = [w for w, v in (("admin", state.admin), ("oper", state.oper)) if v not in ("up", "down")]
    if missing:
        raise StateUnreadable(f"the output does not state the {' and '.join(missing)} state of {iface}")
    return state


def parser_for_command(dialect: str, command: str) -> str:
    """Which parser reads `command`'s output on `dialect` (the corpus tests' map from command to parser)."""
    words = command.split()
    text = " ".join(w for w in words if not w.startswith(("Ethernet", "Eth", "swp", "fortyGigE")) and "/" not in w)
    table = {
        "nxos": [("show interface status err-disabled", "nxos_show_interface_status_err_disabled"),
                 ("show interface brief", "ntc:cisco_nxos_show_interface_brief"),
                 ("show interface status", "ntc:cisco_nxos_show_interface_status"),
                 ("show interface", "ntc:cisco_nxos_show_interface")],
        "eos": [("show interfaces status", "ntc:arista_eos_show_interfaces_status"),
                ("show interfaces", "ntc:arista_eos_show_interfaces")],
        "cumulus": [("nv show interface --view=carrier-stats", "nvue_show_interface_carrier_stats"),
                    ("nv show interface carrier-stats", "nvue_show_interface_carrier_stats"),  # 5.11+ spelling
                    ("nv show interface link protodown-reason", "nvue_show_interface_link"),
                    ("nv show interface link -o json", "nvue_json_link"),
                    ("nv show interface -o json", "nvue_json_link"),
                    ("nv show interface link", "nvue_show_interface_link"),
                    ("nv show interface status", "nvue_show_interface"),
                    ("nv show interface", "nvue_show_interface")],
        "sonic": [("show interface", "sonic_show_interfaces_status")],
        "onyx": [("| json-print", "onyx_json"),
                 ("show interfaces ethernet status", "onyx_show_interfaces_ethernet_status"),
                 ("show interfaces ethernet", "onyx_show_interfaces_ethernet"),
                 ("show interfaces", "onyx_show_interfaces_ethernet")],
    }
    one_port = any(w.startswith(("swp",)) for w in words)
    for prefix, parser in table.get(dialect, []):
        if prefix.startswith("|") and prefix in command:
            return parser
        # whole words: `nv show interface link-tracking` is the all-ports table, not the port's `link` view
        if any(t == prefix or t.startswith(prefix + " ") for t in (text, text.replace("interfaces", "interface"))):
            if parser == "nvue_show_interface" and one_port and text == "nv show interface":
                return "nvue_show_interface_link"  # `nv show interface swp1`: the one-port key/value view
            return parser
    raise StateUnreadable(f"no parser for {dialect} `{command}`")


def template_rows(template: str, text: str) -> list[dict[str, str]]:
    """The rows a TextFSM template reads from `text`: `ntc:<name>` (ntc-templates) or one of ours (templates/);
    StateUnreadable when there is no such template or it rejects the text."""
    path = _ntc_path(template[4:]) if template.startswith("ntc:") else TEMPLATES / f"{template}.textfsm"
    if not path.is_file():
        raise StateUnreadable(f"no template named {template!r}")
    return _fsm(path, _strip_source(clean_output(text)))


# -- parsers -----------------------------------------------------------------------------------
def _ntc(template: str, text: str) -> list[dict[str, str]]:
    return _fsm(_ntc_path(template), text)


def _own(template: str, text: str) -> list[dict[str, str]]:
    return _fsm(TEMPLATES / f"{template}.textfsm", text)


def _fsm(path: Path, text: str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as fh:
        fsm = textfsm.TextFSM(fh)
    try:
        rows = fsm.ParseText(text if text.endswith("\n") else text + "\n")
    except textfsm.TextFSMError as err:
        raise StateUnreadable(f"{path.stem} does not read this output ({str(err).splitlines()[0][:120]})") from None
    return [dict(zip(fsm.header, row)) for row in rows]


@functools.lru_cache(maxsize=None)
def _ntc_path(template: str) -> Path:
    import ntc_templates

    return Path(ntc_templates.__file__).parent / "templates" / f"{template}.textfsm"


def _nxos_show_interface(text: str, _iface: str | None) -> dict[str, PortState]:
    """ntc's fields, read as NX-OS means them: ADMIN_STATE is the admin state only when the block has an
    `admin state is` line, or `Admin State:` on tunnels (otherwise the template took the SVI's line protocol
    into it)."""
    blocks = _blocks(text, r"^\S+\s+is\s+")
    out = {}
    for row in _ntc("cisco_nxos_show_interface", text):
        name, link = row["INTERFACE"], row["LINK_STATUS"].lower()
        stated = re.search(r"^\s*admin state(?:\s+is\s+|\s*:\s*)(up|down)\b", blocks.get(name, ""), re.M | re.I)
        admin = "down" if "administratively down" in link else (stated.group(1).lower() if stated else None)
        # `Vlan1 is administratively down (Administratively down), line protocol is down`: down on both sides
        oper = "down" if link.startswith("administratively down") else _first_word(link)
        out[name] = PortState(admin, oper)
    return out


def _eos_show_interfaces(text: str, _iface: str | None) -> dict[str, PortState]:
    """`<name> is <up|down|administratively down>, line protocol is <state> (<status>)`: the first part
    is the admin side (down but not administratively: admin up), the line protocol the oper state."""
    try:
        rows = _ntc("arista_eos_show_interfaces", text)
    except StateUnreadable as why:  # a body line the template does not know (SVI/Vxlan variants): headers only
        log.debug("%s; reading the header lines only", why)
        rows = [{"INTERFACE": m[1], "LINK_STATUS": m[2], "PROTOCOL_STATUS": m[3]}
                for m in re.finditer(r"^(\S+) is (.+?), line protocol is (\S+)", text, re.M)]
    out = {}
    for row in rows:
        link, proto = row["LINK_STATUS"].lower(), row["PROTOCOL_STATUS"].lower()
        admin = "down" if "administratively" in link or "disabled" in link else "up"
        out[row["INTERFACE"]] = PortState(admin, "up" if _first_word(proto) == "up" else "down")
    return out


# Status-table words → (admin, oper); a word that does not say the admin side leaves it None.
# NX-OS truncates words to the column width (notconnec, xcvrAbsen, channelDo): matched by prefix.
_STATUS_WORDS = {"connected": ("up", "up"), "up": ("up", "up"), "disabled": ("down", "down")}
_DOWN_WORDS = ("notconnect", "xcvrabsent", "sfpabsent", "inactive", "err-disabled", "errdisabled", "linkflaperr",
               "channeldown",
               "down", "nooperMembers".lower(), "suspended", "monitoring", "nolink", "adminfail")


def _status_word(word: str) -> tuple[str | None, str | None]:
    w = word.strip().lower()
    if w in _STATUS_WORDS:
        return _STATUS_WORDS[w]
    if len(w) >= 4 and any(full.startswith(w) or w.startswith(full) for full in _DOWN_WORDS):
        return None, "down"
    return None, None


def _status_table(template: str, own: bool = False) -> Callable[[str, str | None], dict[str, PortState]]:
    def parse(text: str, _iface: str | None) -> dict[str, PortState]:
        rows = _own(template, text) if own else _ntc(template, text)
        return {r["PORT"]: PortState(*_status_word(r["STATUS"])) for r in rows}
    return parse


_NXOS_TUNNEL_TABLE = re.compile(r"^Interface\s+Name\s+Status\s+Reason\b", re.M)


def _nxos_status(text: str, _iface: str | None) -> dict[str, PortState]:
    """`show interface status`: ntc's template reads the port table; the tunnel table NX-OS prints after it
    (Interface / Name / Status / Reason / Reason description), which that template rejects, is cut off and
    read by ours. A tunnel's Reason `admin down` states its admin side. A tunnel table ours rejects costs
    the tunnel rows only (logged), never the port table's."""
    cut = _NXOS_TUNNEL_TABLE.search(text)
    ports = _status_table("cisco_nxos_show_interface_status")(text[:cut.start()] if cut else text, None)
    if cut:
        try:
            ports.update(_nxos_tunnels(text[cut.start():]))
        except StateUnreadable as why:
            log.warning("%s; reading the port table only", why)
    return ports


def _nxos_tunnels(table: str) -> dict[str, PortState]:
    """Name and Reason hold spaces ("Test Tun43  down  Link not connected"), so the template takes the first
    Status word after the port; a row is kept only if that word stands under the header's `Status` (an
    unknown status word would otherwise let a later "connected" in the Reason pass for the status)."""
    column = table.index("Status")
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    out = {}
    for r in _own("nxos_show_interface_status_tunnel", table):
        at = re.match(rf"{re.escape(r['PORT'])}\s+{re.escape(r['NAME'])}\s+", lines[r["PORT"]]).end()
        if abs(at - column) > 2:
            log.warning("NX-OS tunnel row %s: no status word under Status; row skipped", r["PORT"])
            continue
        admin, oper = _status_word(r["STATUS"])
        if re.match(r"admin(istratively)?\s*down\b", r["REASON"], re.I):
            admin, oper = "down", "down"
        out[r["PORT"]] = PortState(admin, oper)
    return out


def _nxos_brief(text: str, _iface: str | None) -> dict[str, PortState]:
    """`show interface brief` (ntc's template): Status up/down, and a Reason that says why a port is down;
    only `Administratively down` states the admin side of a down port (`Link not connected`, `XCVR not
    inserted`, a bare `Admin` on SVIs do not)."""
    out = {}
    for r in _ntc("cisco_nxos_show_interface_brief", text):
        status, reason = r["STATUS"].lower(), r["REASON"].lower()
        admin = "up" if status == "up" else ("down" if reason.startswith("administratively down") else None)
        out[r["INTERFACE"]] = PortState(admin, status if status in ("up", "down") else None)
    return out


def _sonic_status(text: str, _iface: str | None) -> dict[str, PortState]:
    return {r["INTERFACE"]: PortState(_updown(r["ADMIN"]), _updown(r["OPER"]),
                                      None if r["ALIAS"] in ("", "N/A") else r["ALIAS"])
            for r in _own("sonic_show_interfaces_status", text)}


def _onyx_text(text: str, _iface: str | None) -> dict[str, PortState]:
    return {r["INTERFACE"]: PortState(_onyx_word(r["ADMIN"]), _onyx_word(r["OPER"]))
            for r in _own("onyx_show_interfaces_ethernet", text)}


def _onyx_status(text: str, _iface: str | None) -> dict[str, PortState]:
    """`show interfaces ethernet status`: Port / Operational state / Speed / Negotiation (no admin column)."""
    return {r["INTERFACE"]: PortState(None, _onyx_word(r["OPER"]))
            for r in _own("onyx_show_interfaces_ethernet_status", text)}


def _onyx_json(text: str, _iface: str | None) -> dict[str, PortState]:
    """`| json-print`: a list of objects named by "header", or {name: [object]} (status view)."""
    data = _json(text)
    items = [(d.get("header"), d) for d in data] if isinstance(data, list) else \
        [(k, (v[0] if isinstance(v, list) and v else v)) for k, v in data.items()]
    return {name: PortState(_onyx_word(obj.get("Admin state")),
                            _onyx_word(obj.get("Operational state") or obj.get("State")))
            for name, obj in items if name and isinstance(obj, dict)}


def _nvue_json_link(text: str, iface: str | None) -> dict[str, PortState]:
    """`nv show interface <port> link -o json` (or the port's whole object, which nests `link`):
    admin-status / oper-status, else the operational `state` ({"up": {}})."""
    data = _json(text)
    if not isinstance(data, dict):
        raise StateUnreadable("NVUE JSON is not an object")
    link = data.get("link") if isinstance(data.get("link"), dict) else data
    admin = link.get("admin-status")
    oper = link.get("oper-status")
    if admin is None and isinstance(link.get("state"), dict) and len(link["state"]) == 1:
        admin = next(iter(link["state"]))
    if iface is None:
        raise StateUnreadable("NVUE link JSON does not name its port: give the interface")
    return {iface: PortState(_updown(admin), _updown(oper))}


def _nvue_table(template: str) -> Callable[[str, str | None], dict[str, PortState]]:
    def parse(text: str, _iface: str | None) -> dict[str, PortState]:
        return {r["INTERFACE"]: PortState(_updown(r.get("ADMIN")), _updown(r.get("OPER")))
                for r in _own(template, text)}
    return parse


_NVUE_KEY_TABLE = re.compile(r"^\s*operational(\s+applied)?\s*\n-{3,}", re.M)


def _nvue_link_text(text: str, iface: str | None) -> dict[str, PortState]:
    """The port's key / operational / applied table: its admin-status and oper-status rows. A table of the
    port without them (`link protodown-reason`) shows the port and states nothing; any other text is
    unreadable."""
    if iface is None:
        raise StateUnreadable("NVUE's port view does not name its port: give the interface")
    rows = [r for r in _own("nvue_show_interface_link", text) if r["ADMIN"] or r["OPER"]]
    if rows:
        return {iface: PortState(_updown(rows[0]["ADMIN"]), _updown(rows[0]["OPER"]))}
    if _NVUE_KEY_TABLE.search(text):
        return {iface: PortState(None, None)}
    raise StateUnreadable(f"no NVUE key / operational table for {iface}")


PARSERS: dict[str, Callable[[str, str | None], dict[str, PortState]]] = {
    "ntc:cisco_nxos_show_interface": _nxos_show_interface,
    "ntc:cisco_nxos_show_interface_status": _nxos_status,
    "ntc:cisco_nxos_show_interface_brief": _nxos_brief,
    "ntc:arista_eos_show_interfaces": _eos_show_interfaces,
    "ntc:arista_eos_show_interfaces_status": _status_table("arista_eos_show_interfaces_status"),
    "nxos_show_interface_status_err_disabled": _status_table("nxos_show_interface_status_err_disabled", own=True),
    "sonic_show_interfaces_status": _sonic_status,
    "onyx_show_interfaces_ethernet": _onyx_text,
    "onyx_show_interfaces_ethernet_status": _onyx_status,
    "onyx_json": _onyx_json,
    "nvue_json_link": _nvue_json_link,
    "nvue_show_interface": _nvue_table("nvue_show_interface"),
    "nvue_show_interface_carrier_stats": _nvue_table("nvue_show_interface_carrier_stats"),
    "nvue_show_interface_link": _nvue_link_text,
}


# -- helpers -----------------------------------------------------------------------------------
def _strip_source(text: str) -> str:
    """Corpus files begin with `# source: ...`; a switch never prints that."""
    return text.split("\n", 1)[1] if text.startswith("# source:") else text


def _json(text: str):
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise StateUnreadable("no JSON in the output")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as err:
        raise StateUnreadable(f"not valid JSON ({err.msg} at line {err.lineno})") from None


def _blocks(text: str, header: str) -> dict[str, str]:
    """Text per interface: from its header line to the next header."""
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if re.match(header, line):
            name = line.split()[0]
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def _first_word(text: str) -> str | None:
    w = text.strip().split(" ")[0].strip(",") if text.strip() else ""
    return w if w in ("up", "down") else None


def _updown(value: str | None) -> str | None:
    w = (value or "").strip().lower()
    return w if w in ("up", "down") else None


def _onyx_word(value: str | None) -> str | None:
    w = (value or "").strip().lower()
    return {"enabled": "up", "disabled": "down", "up": "up", "down": "down"}.get(w)


def _short(name: str) -> str:
    """Eth1/1 and Ethernet1/1, Et1 and Ethernet1 are one port (status tables print the short form)."""
    m = re.match(r"^(?:Ethernet|Eth|Et)(\d.*)$", name)
    return f"Ethernet{m.group(1)}" if m else name
