"""One switch port over one open session: its names checked against their grammar, its admin/oper state and
counters read, waiting for it to settle after an admin change, and the dialect's abort lines. The uplink fault
(uplink.py) and the read-back of a cable's far end (ends.py) share them."""

from __future__ import annotations

import logging
import re
import time
from datetime import datetime, timezone
from typing import Any

from drills.core.errors import DrillError
from drills.faults.switch.counters import PortTraffic, read_counters
from drills.faults.switch.dialect import check_switch_name, load_switch_dialect
from drills.faults.switch.parse import PortState, StateUnreadable, read_state
from drills.faults.switch.session import SwitchSession
from drills.profile.model import SwitchConfig

__all__ = ["POLL_S", "abort", "check_names", "port_counters", "port_state", "settle"]

log = logging.getLogger(__name__)

POLL_S = 0.25  # wall seconds between two reads of a port that has not settled yet


def check_names(cfg: SwitchConfig, interface: str) -> None:
    """Switch name and interface in their grammar (InvalidName, one line) before any session opens."""
    check_switch_name(cfg.name)
    load_switch_dialect(cfg.dialect).check_interface(interface)


def settle(session: SwitchSession, interface: str, error: type[DrillError], *, up: bool, clock: Any | None,
           within: float) -> PortState:
    """Read the port until admin and oper are both `up` (or both down), or `within` cluster seconds have
    passed on the clock (the twin's is dilated); the last reading either way. Each read is a round trip
    to the switch: there is no CLI event to wait on."""
    deadline = _now(clock).timestamp() + within
    while True:
        state = port_state(session, interface, error)
        if state.admin_up == up and state.oper_up == up:
            return state
        if _now(clock).timestamp() >= deadline:
            return state
        wall = clock.wall_seconds(within) if clock is not None and hasattr(clock, "wall_seconds") else within
        time.sleep(min(POLL_S, max(wall / 20, 0.01)))


def port_counters(session: SwitchSession, interface: str) -> PortTraffic | None:
    """The port's counters, or None when this switch does not show them readably: they tell whether the
    fault had an effect (judged later), never whether the port may be shut."""
    if session.dialect.counters is None:
        return None
    command = session.dialect.command("counters", interface)[0]
    res = session.run(command)
    try:
        return read_counters(session.dialect, res.output, interface) if res.ok else None
    except StateUnreadable as why:
        log.warning("switch %s: cannot read the counters of %s from `%s` (%s)", session.cfg.name, interface, command, why)
        return None


def port_state(session: SwitchSession, interface: str, error: type[DrillError]) -> PortState:
    """Show the interface and read admin/oper; unknown interface and unreadable output are one line each."""
    command = session.dialect.command("show", interface)[0]
    res = session.run(command)
    name, dialect = session.cfg.name, session.dialect.name
    if session.dialect.is_unknown_interface(res.output):
        raise error(f"switch {name}: interface {interface} does not exist (the switch says: {res.words!r}); "
                    "check the uplinks in the switch inventory")
    if not res.ok:
        raise error(f"switch {name}: `{command}` failed: {res.words!r}; is dialect {dialect} right for this switch?")
    try:
        return read_state(session.dialect, res.output, interface)
    except StateUnreadable as why:
        first = res.output.strip().splitlines()[0][:80] if res.output.strip() else ""
        raise error(f"switch {name}: cannot read the state of {interface} from `{command}` ({why}; output began "
                    f"{first!r}): is dialect {dialect} right for this switch?") from None


def abort(session: SwitchSession) -> None:
    """Send the dialect's abort lines (leave config mode, detach staged changes); errors ignored."""
    cmds = session.dialect.commands
    try:
        if cmds.abort_while is None:
            for tokens in cmds.abort:
                session.run(session.dialect.line(tokens))
        elif session.transport == "shell":  # leave config mode one level at a time, as the prompt says
            for _ in range(8):
                if not re.search(cmds.abort_while, session.prompt):
                    break
                for tokens in cmds.abort:
                    session.run(session.dialect.line(tokens))
    except DrillError as err:
        log.debug("switch %s: abort lines failed: %s", session.cfg.name, err)


def _now(clock: Any | None) -> datetime:
    return clock.now() if clock is not None else datetime.now(timezone.utc)
