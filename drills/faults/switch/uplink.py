# WARNING: shuts a switch port (admin down) over SSH: every link through that uplink goes dark, so
# traffic must reroute over the leaf's other uplinks (or jobs slow down, fall back to TCP, or time out).
"""Switch uplink drop: shut one interface of a switch over SSH and bring it back.

The fault contract (drills/faults/__init__.py): `plan(target, profile, switch=, interface=, transport=)`
validates the dialect and transport and names the port (the guard checks it against the allowlist);
`inject(target, plan)` checks the interface exists and is up, shuts it, reads the state back and only
then returns an `UplinkRecord` (admin down verified); `revert(target, undo, record)` brings it up and
verifies it, idempotently; `verify(target, undo, record)` reads both ends of the cable again later (the
port over its switch's session, the far end over the far switch's, when the inventory names it in `peers`
and lists that switch), so a port shut again after `no shutdown` is a failed revert. The record keeps the host key the switch presented (`host_key`, the
switch's identity in the journal): a revert refuses (UnsafeTarget, nothing sent) a switch that now
presents another key — a different device at that address — unless the target says to accept a
new key (`drills revert --accept-new-host-key`). A switch that refuses answers `InjectionFailed` / `RevertFailed` with its
own words; a switch that does not answer is `TargetUnreachable`. An error raised before the shutdown
was sent carries `changed=False` (nothing of ours on the switch: the guard closes the entry as not
injected); if anything fails after it, the port is brought back up before the error is raised, and
`changed` says whether that worked. The undo spec holds no secret: a password is only named by its
environment variable.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Any, Mapping

from drills.profile.model import SwitchConfig
from drills.core.errors import CheckFailed, DrillError, InjectionFailed, RevertFailed
from drills.faults import Plan, Reach
from drills.faults.readback import Reading, read
from drills.faults.switch.parse import PortState
from drills.faults.switch.port import abort, check_names, port_counters, port_state, settle
from drills.faults.switch.session import TRANSPORTS, HostKey, SwitchSession

__all__ = [
    "KIND",
    "PortState",
    "UplinkRecord",
    "plan",
    "inject",
    "revert",
    "inject_port",
    "revert_port",
    "show_state",
    "verify",
    "revert_spec",
]

log = logging.getLogger(__name__)

KIND = "switch-uplink"
SETTLE_S = 30.0  # cluster seconds a port may take to go oper down / up after the admin change


@dataclass(frozen=True)
class UplinkRecord:
    """Exactly what `inject` changed (JSON-serialisable via `to_dict`)."""

    switch: str
    host: str
    port: int
    dialect: str
    interface: str
    transport: str
    admin_before: str
    oper_before: str
    admin_after: str
    oper_after: str
    # ISO 8601 UTC ms (cluster time when a clock is given): when the line that applies the shutdown was sent, less
    # `clock_error_s`, the earliest the switch can have acted: a recovery is measured at most `stamp_window_s`
    # + 2 × `clock_error_s` long, never short
    injected_at: str
    # The port's traffic, from the switch's counters (None: this switch's counters could not be read):
    carried_packets: int | None = None  # packets (rx+tx) counted between the login and the shutdown
    carried_bps: float | None = None  # the rate the switch printed just before the shutdown (None: not printed)
    packets_after: int | None = None  # packets counted between two reads once the port was down
    host_key: str | None = None  # the key the switch presented at inject ("ssh-ed25519 SHA256:…"): its identity
    stamp_window_s: float | None = None  # from sending that line to the switch's answer (cluster seconds)
    clock_error_s: float | None = None  # our clock copy's bound, taken off `injected_at` (cluster seconds)
    # ISO 8601 UTC ms: when the switch was read back with the port down (plus `clock_error_s`): the latest the
    # fault can have taken effect. A switch may act late in the exchange, or only after answering (a config daemon
    # that applies what the CLI wrote); the job's lines before this are the job before the fault
    confirmed_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UplinkRecord":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def inject_port(switch_cfg: SwitchConfig, interface: str, transport: str = "exec", *,
                accept_unknown_host_keys: bool = False, connect_timeout: float = 5.0, command_timeout: float = 10.0,
                require_oper_up: bool = True, clock: Any | None = None, settle_s: float = SETTLE_S) -> UplinkRecord:
    """Shut `interface` and verify it is admin down and oper down (within `settle_s` cluster seconds,
    read back from the switch). Refuses a port that is already down (not ours to
    bring up later) and, with `require_oper_up`, one whose link is down (the drill would test nothing)."""
    check_names(switch_cfg, interface)
    opts = dict(transport=transport, accept_unknown_host_keys=accept_unknown_host_keys,
                connect_timeout=connect_timeout, command_timeout=command_timeout)
    name = switch_cfg.name
    sent = False
    try:
        with SwitchSession(switch_cfg, error=InjectionFailed, clock=clock, **opts) as session:
            first = port_counters(session, interface)
            before = port_state(session, interface, InjectionFailed)
            if not before.admin_up:
                raise InjectionFailed(f"switch {name}: {interface} is already admin down: refusing to take it over "
                                      "(revert would bring up a port someone else shut); pick another uplink")
            if require_oper_up and not before.oper_up:
                raise InjectionFailed(f"switch {name}: {interface} is admin up but its link is down: shutting it "
                                      "would test nothing; fix the link or pick another uplink")
            for check in session.dialect.commands.preflight:
                line = session.dialect.line(check.command)
                res = session.run(line)
                if not res.ok or (check.expect_empty and res.output.strip()):
                    raise InjectionFailed(f"switch {name} {check.reason} (`{line}`: {res.words})")
            command = session.dialect.command("shutdown", interface)
            last = port_counters(session, interface)
            try:
                sent = True
                res = session.run_lines(command)
                shut_at, window_s = _applied(session, res, clock)
                if not res.ok:
                    raise InjectionFailed(f"switch {name} refused to shut {interface}: {res.words!r} "
                                          f"(`{res.command}`)")
                after = settle(session, interface, InjectionFailed, up=False, clock=clock, within=settle_s)
                confirmed = (clock.timestamp() if clock is not None else time.time()) + _clock_error(clock)
                if after.admin_up:
                    raise InjectionFailed(f"switch {name} accepted `{res.command}` but still reports {interface} "
                                          "admin up: the change did not take (check the dialect and the user's rights)")
                if after.oper_up:
                    raise _NotActing(f"switch {name} accepted `{res.command}` but {interface} is still oper up "
                                     f"{settle_s:g} s later (admin down): the port did not go down, so the drill "
                                     "would test nothing; check the switch (a known SONiC defect) and its logs")
                down = port_counters(session, interface)
                still = port_counters(session, interface) if down is not None else None
            except BaseException as err:
                _restore(session, switch_cfg, interface, opts, err)
                if isinstance(err, _NotActing):
                    err.changed = True  # the switch changed its admin state: the guard reverts and verifies
                raise
    except DrillError as err:
        if not sent:
            err.changed = False  # nothing was sent to the switch: nothing of ours to undo
        raise
    record = UplinkRecord(name, switch_cfg.host, switch_cfg.port, session.dialect.name, interface, transport,
                          before.admin, before.oper, after.admin, after.oper, _iso(shut_at),
                          last.packets - first.packets if first and last else None, last.bps if last else None,
                          still.packets - down.packets if down and still else None,
                          str(session.host_key) if session.host_key else None, round(window_s, 6),
                          round(_clock_error(clock), 6), _iso(datetime.fromtimestamp(confirmed, timezone.utc)))
    log.info("switch %s: shut %s over %s (admin %s→%s, oper %s→%s)", name, interface, transport,
             before.admin, after.admin, before.oper, after.oper)
    return record


def revert_port(switch_cfg: SwitchConfig, record: UplinkRecord | str, transport: str | None = None, *,
           accept_unknown_host_keys: bool = False, connect_timeout: float = 5.0, command_timeout: float = 10.0,
           oper_timeout: float = SETTLE_S, clock: Any | None = None,
           expect_host_key: HostKey | None = None) -> PortState:
    """Bring the port up and verify it is admin up (already up is fine); then wait up to `oper_timeout`
    cluster seconds for the link itself to be oper up (one that does not come up is a RevertFailed: the
    drill must not report a pass over a fabric it left degraded). With `expect_host_key`, a switch that
    presents another key is refused before any command (UnsafeTarget)."""
    interface = record if isinstance(record, str) else record.interface
    check_names(switch_cfg, interface)
    if isinstance(record, UplinkRecord) and record.switch != switch_cfg.name:
        raise RevertFailed(f"record for switch {record.switch} given with the config of {switch_cfg.name}")
    transport = transport or (record.transport if isinstance(record, UplinkRecord) else "exec")
    name = switch_cfg.name
    with SwitchSession(switch_cfg, transport, error=RevertFailed, accept_unknown_host_keys=accept_unknown_host_keys,
                       connect_timeout=connect_timeout, command_timeout=command_timeout,
                       expect_host_key=expect_host_key) as session:
        state = port_state(session, interface, RevertFailed)
        if state.admin_up:
            log.info("switch %s: %s is already admin up (nothing to revert)", name, interface)
        else:
            res = session.run_lines(session.dialect.command("startup", interface))
            if not res.ok:
                abort(session)
                raise RevertFailed(f"switch {name} refused to bring {interface} up: {res.words!r} (`{res.command}`); "
                                   "it stays shut: fix the cause and run `drills revert`")
            state = port_state(session, interface, RevertFailed)
            if not state.admin_up:
                raise RevertFailed(f"switch {name} accepted `{res.command}` but {interface} is still admin down; "
                                   "it stays shut: bring it up by hand and run `drills revert`")
            log.info("switch %s: %s admin up again (verified)", name, interface)
        if not state.oper_up:
            state = settle(session, interface, RevertFailed, up=True, clock=clock, within=oper_timeout)
        if not state.oper_up:
            raise RevertFailed(f"switch {name}: {interface} is admin up again but still oper down {oper_timeout:g} s "
                               "later: check the link (optics, peer port) before the next drill")
    return state


def show_state(switch_cfg: SwitchConfig, interface: str, transport: str = "exec", *,
               accept_unknown_host_keys: bool = False, connect_timeout: float = 5.0,
               command_timeout: float = 10.0) -> PortState:
    """The interface's admin and oper state as the switch reports it (read-only)."""
    check_names(switch_cfg, interface)
    with SwitchSession(switch_cfg, transport, error=CheckFailed, accept_unknown_host_keys=accept_unknown_host_keys,
                       connect_timeout=connect_timeout, command_timeout=command_timeout) as session:
        return port_state(session, interface, CheckFailed)


def revert_spec(switch_cfg: SwitchConfig, interface: str, transport: str = "exec", *,
                accept_unknown_host_keys: bool = False, connect_timeout: float = 5.0,
                command_timeout: float = 10.0) -> dict[str, Any]:
    """What the journal entry must hold for `revert_entry` (written before `inject`; no secrets)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    check_names(switch_cfg, interface)  # unknown dialect or bad name: refused before the entry is written
    return {"switch": switch_cfg.model_dump(mode="json"), "interface": interface, "transport": transport,
            "accept_unknown_host_keys": accept_unknown_host_keys, "connect_timeout": connect_timeout,
            "command_timeout": command_timeout}


def plan(target, profile, *, switch: SwitchConfig, interface: str, transport: str = "exec",
         inventory: list[SwitchConfig] | tuple = ()) -> Plan:
    """Read-only: a known dialect and transport; the port the guard checks against the allowlist. Both ends of
    the cable are confirmed by LLDP on both switches first (drills/faults/switch/ends.py: a mismatch with the
    inventory, or LLDP unavailable, is a CheckFailed — precondition not met, nothing shut); the far end LLDP
    confirmed is journaled, and it is what the revert's verify reads back."""
    check_names(switch, interface)  # before anything reaches a session or the journal
    sw = profile.switches
    timeouts = dict(connect_timeout=sw.connect_timeout_s, command_timeout=sw.command_timeout_s)
    undo = revert_spec(switch, interface, transport, accept_unknown_host_keys=sw.accept_unknown_host_keys, **timeouts)
    from drills.faults.switch.ends import confirmed_far_end, far_end

    unverified = profile.fabric.opt_out() if getattr(profile, "fabric", None) is not None else None
    if unverified is None:
        undo["peer"] = confirmed_far_end(switch, interface, inventory or profile.switches.devices, sw, transport)
    else:  # the site's explicit opt-out: the inventory's far end, said so wherever it is used
        undo["peer"] = far_end(switch, interface, inventory or profile.switches.devices)
        if undo["peer"] is None:
            raise CheckFailed(f"{switch.name} {interface}: the switch inventory names no far end for it (`peers`) and "
                              f"fabric.lldp is unavailable: the cable's other end is unknown; nothing was shut")
        undo["peer"]["identity"] = unverified
    far = f"; far end {undo['peer']['name']} {undo['peer']['interface']}: {unverified}" if unverified else ""
    peer = undo["peer"]
    ends = ({"switch": switch.name, "host": switch.host, "interface": interface},
            {"switch": peer["name"], "host": (peer.get("switch") or {}).get("host") or "", "interface": peer["interface"]})
    return Plan(KIND, f"{switch.name}:{interface}",
                f"shut {interface} on switch {switch.name} ({switch.dialect}, {switch.host}:{switch.port}) over SSH "
                f"{transport}{far}", undo, Reach(ports=((switch.name, interface),)),
                spec=(switch, interface, transport, sw.accept_unknown_host_keys, timeouts), about=ends)


def inject(target, plan: Plan) -> UplinkRecord:
    """Shut the planned port and verify it (cluster time on the record when the target has a clock)."""
    switch, interface, transport, accept, timeouts = plan.spec
    clock = target.clock if target is not None else None
    return inject_port(switch, interface, transport, accept_unknown_host_keys=accept, clock=clock, **timeouts)


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Bring the port up again from the undo spec alone (after a crash too). Without an injected record
    (a crash between the entry and the shutdown's verification) the port is brought up as well: inject
    refuses ports that are already down, so up is how we found it. The record's host key must be the one
    the switch presents now (UnsafeTarget otherwise), unless `target.accept_new_host_key`; an entry
    without a record has none to compare (known_hosts still applies)."""
    cfg = SwitchConfig.model_validate(undo["switch"])
    port: UplinkRecord | str = UplinkRecord.from_dict(record) if record else undo["interface"]
    check_names(cfg, port if isinstance(port, str) else port.interface)  # a journal is input too
    expect = None
    if isinstance(port, UplinkRecord) and port.host_key and not getattr(target, "accept_new_host_key", False):
        expect = HostKey.parse(port.host_key)
    revert_port(cfg, port, undo.get("transport", "exec"), accept_unknown_host_keys=bool(undo.get("accept_unknown_host_keys")),
                connect_timeout=float(undo.get("connect_timeout", 5.0)),
                command_timeout=float(undo.get("command_timeout", 10.0)),  # wall clock: revert needs no cluster
                expect_host_key=expect)
    return "reverted"


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read both ends of the uplink again: admin and oper up on the switch (and on the far switch, when
    journaled). Read-only; the host key recorded at inject is expected unless the target accepts a new one."""
    from drills.faults.switch.ends import read_ends

    return read(KIND, f"{undo['switch']['name']}:{undo['interface']}", lambda: (read_ends(undo, record, target), ()))


# -- helpers -----------------------------------------------------------------------------------
class _NotActing(InjectionFailed):
    """The switch accepted the shutdown, went admin down, but the link stayed up."""


def _applied(session: SwitchSession, res, clock: Any | None) -> tuple[datetime, float]:
    """When the switch can first have applied the shutdown, and how long it took to answer: the window of the
    line that applies it (the dialect's `takes_effect`; one window when the lines went as one exec request).
    The window's start, not its middle: the switch acts early in it, and the rest (writing its answer, the exit
    status) stretches on a busy switch or machine, so a middle stamp lands after the fault and measures the
    recovery short, a PASS the platform may not deserve; the start can only measure it long. Less the clock's
    `error_s`: our copy of a twin's clock may run up to that far ahead of the twin's own (a busy machine's slow
    clock read), and the twin's logs, not our copy, say when the job recovered."""
    windows = res.windows
    start, end = windows[min(session.dialect.commands.applying_line("shutdown"), len(windows) - 1)]
    return datetime.fromtimestamp(start - _clock_error(clock), timezone.utc), end - start


def _clock_error(clock: Any | None) -> float:
    """How far our copy of the cluster's clock may be from the cluster's own (cluster seconds; 0 without one)."""
    return float(getattr(clock, "error_s", 0.0) or 0.0)


def _restore(session: SwitchSession, cfg: SwitchConfig, interface: str, opts: dict, cause: BaseException) -> None:
    """After a failure past the shutdown: drop half-made changes and bring the port up without trusting
    the state read (it may be what failed); inject saw it admin up, so "up" is its state before us.
    Uses a fresh login when this one is unusable. A failure here is added to the original error."""
    log.warning("switch %s: inject of %s failed after the shutdown was sent (%s); bringing it back up",
                cfg.name, interface, cause)
    startup = session.dialect.command("startup", interface)
    try:
        try:
            abort(session)
            res = session.run_lines(startup)
        except DrillError:  # this login is unusable (timed out, dropped): a fresh one
            with SwitchSession(cfg, error=RevertFailed, dialect=session.dialect, expect_host_key=session.host_key,
                               **opts) as fresh:
                res = fresh.run_lines(startup)
        if not res.ok:
            raise RevertFailed(f"the switch answered {res.words!r}")
        log.info("switch %s: %s brought back up after the failed inject", cfg.name, interface)
        if isinstance(cause, DrillError):
            cause.changed = False  # the port is as we found it
    except Exception as err:  # noqa: BLE001 - reported with the original error, never swallowed
        note = (f"; bringing {interface} back up failed too ({err}): it may still be shut, "
                "run `drills revert` or bring it up by hand")
        log.error("switch %s: %s", cfg.name, note[2:])
        if isinstance(cause, DrillError):
            cause.changed = True  # it may still be shut: the guard keeps the entry and reverts it
            if cause.args:
                cause.args = (str(cause.args[0]) + note,) + cause.args[1:]


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
