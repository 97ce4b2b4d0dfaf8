"""Both ends of a switch uplink, read back after its revert (drills/faults/readback.py).

`no shutdown` answered OK says nothing about a minute later: a config agent may shut the port again, or the
far end (the spine's port of the same cable) may be down. The near end is read over the leaf's own SSH
session; the far end over the far switch's. Which port is the far end is read from the fabric before the fault
(`confirmed_far_end`: LLDP on both switches, drills/faults/switch/lldp.py), never taken from the inventory's
`peers` alone: a stale inventory would have the verify read a port that is not on the cable. Read-only:
`show` lines only.
"""

from __future__ import annotations

import logging

from drills.core.errors import CheckFailed
from drills.faults.readback import Observation
from drills.faults.switch.session import HostKey, SwitchSession
from drills.faults.switch.port import check_names, port_state
from drills.profile.model import SwitchConfig

__all__ = ["read_ends", "far_end", "confirmed_far_end"]

log = logging.getLogger(__name__)


def read_ends(undo: dict, record: dict | None = None, target=None) -> list[Observation]:
    """Both ends of the journaled uplink as their switches report them now (the far end when it is known)."""
    cfg = SwitchConfig.model_validate(undo["switch"])
    expect = None
    if record and record.get("host_key") and not getattr(target, "accept_new_host_key", False):
        expect = HostKey.parse(record["host_key"])
    seen = [_read_end(cfg, undo["interface"], undo, expect)]
    far = undo.get("peer")
    if far and far.get("switch"):
        seen.append(_read_end(SwitchConfig.model_validate(far["switch"]), far["interface"], undo, None))
    elif far:
        seen.append(Observation(f"{far['name']} {far['interface']} (far end)", "not read: the far switch is not in the "
                                "switch inventory", "switch inventory", True))
    return seen


def _read_end(cfg: SwitchConfig, interface: str, undo: dict, expect: HostKey | None) -> Observation:
    check_names(cfg, interface)  # a journal is input too
    with SwitchSession(cfg, undo.get("transport", "exec"), error=CheckFailed,
                       accept_unknown_host_keys=bool(undo.get("accept_unknown_host_keys")),
                       connect_timeout=float(undo.get("connect_timeout", 5.0)),
                       command_timeout=float(undo.get("command_timeout", 10.0)), expect_host_key=expect) as session:
        state = port_state(session, interface, CheckFailed)
        line = session.dialect.command("show", interface)[0]
    return Observation(f"{cfg.name} {interface}", {"admin": state.admin, "oper": state.oper},
                       f"ssh {cfg.name} ({cfg.host}:{cfg.port}): `{line}`", state.admin_up and state.oper_up)


def far_end(switch: SwitchConfig, interface: str, inventory) -> dict | None:
    """The far end of `interface` as the journal keeps it: its switch's config (if in the inventory) and port."""
    named = (switch.peers or {}).get(interface)
    if not named or ":" not in named:
        return None
    name, far_iface = named.split(":", 1)
    cfg = next((s for s in inventory or () if s.name == name), None)
    if cfg is not None:
        check_names(cfg, far_iface)
    return {"name": name, "interface": far_iface, "switch": cfg.model_dump(mode="json") if cfg is not None else None}


def confirmed_far_end(switch: SwitchConfig, interface: str, inventory, sw, transport: str = "exec") -> dict:
    """The far end of `interface` as LLDP on both switches confirms it (and as the inventory's `peers` names it,
    when it does: a disagreement is LinkMismatch). Read-only, before the fault: a CheckFailed here is a precondition
    not met, and nothing is journaled or shut."""
    from drills.faults.switch.lldp import confirm_link

    check_names(switch, interface)

    def session_for(cfg: SwitchConfig) -> SwitchSession:
        return SwitchSession(cfg, transport, error=CheckFailed, accept_unknown_host_keys=sw.accept_unknown_host_keys,
                             connect_timeout=sw.connect_timeout_s, command_timeout=sw.command_timeout_s)

    far = confirm_link(switch, interface, inventory or (), session_for)
    if far.get("switch"):
        check_names(SwitchConfig.model_validate(far["switch"]), far["interface"])
    return far
