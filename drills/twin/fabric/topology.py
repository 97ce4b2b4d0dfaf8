"""The fabric's link state: leaf/spine switches, their interfaces and uplinks, admin and oper state.

Pure and thread-safe: the switches' SSH sessions (threads) change it, the twin's asyncio
workloads subscribe to it (`on_change(cb, loop=loop)` hops onto the loop thread-safely) to decide
between a reroute (the leaf still has uplinks) and an NCCL timeout (the leaf is isolated).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from drills.core.errors import InvalidProfile

__all__ = [
    "ROLES",
    "UplinkSpec",
    "SwitchSpec",
    "IfaceState",
    "LeafRedundancy",
    "FabricEvent",
    "Fabric",
    "UnknownInterface",
]

log = logging.getLogger(__name__)

ROLES = ("leaf", "spine")


class UnknownInterface(KeyError):
    """A switch or interface name the fabric does not have (the CLI turns it into the switch's words)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain sentence
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class UplinkSpec:
    """One leaf→spine cable: `iface` on the leaf, `peer_iface` on the spine `peer`."""

    iface: str
    peer: str
    peer_iface: str


@dataclass(frozen=True)
class SwitchSpec:
    """A switch as the profile describes it; uplinks are declared on leaves only."""

    name: str
    role: str
    dialect: str
    interfaces: tuple[str, ...]
    uplinks: tuple[UplinkSpec, ...] = ()

    @classmethod
    def from_obj(cls, obj: Any) -> "SwitchSpec":
        """Build from a dict, a dataclass or a pydantic model with the same field names."""
        if isinstance(obj, SwitchSpec):
            return obj
        get = obj.get if isinstance(obj, dict) else (lambda k, d=None: getattr(obj, k, d))
        ups = []
        for u in get("uplinks", None) or ():
            if isinstance(u, UplinkSpec):
                ups.append(u)
            else:
                ug = u.get if isinstance(u, dict) else (lambda k, d=None, _u=u: getattr(_u, k, d))
                ups.append(UplinkSpec(str(ug("iface")), str(ug("peer")), str(ug("peer_iface"))))
        return cls(
            name=str(get("name")),
            role=str(get("role", "leaf")),
            dialect=str(get("dialect", "sonic")),
            interfaces=tuple(str(i) for i in (get("interfaces", None) or ())),
            uplinks=tuple(ups),
        )


@dataclass(frozen=True)
class IfaceState:
    """`admin`: what the operator set; `oper`: whether the link actually carries traffic."""

    switch: str
    iface: str
    admin: bool
    oper: bool
    peer: tuple[str, str] | None = None  # (switch, iface) at the other end of a fabric cable


@dataclass(frozen=True)
class LeafRedundancy:
    """How many of a leaf's uplinks carry traffic; `isolated` when none does."""

    leaf: str
    up: int
    total: int

    @property
    def isolated(self) -> bool:
        return self.up == 0

    @property
    def degraded(self) -> bool:
        return 0 < self.up < self.total


@dataclass(frozen=True)
class FabricEvent:
    """One interface changed admin state; `redundancy` is the affected leaf after the change."""

    seq: int
    at: float
    switch: str
    iface: str
    admin: bool
    oper: bool
    uplink: bool
    redundancy: LeafRedundancy | None = None
    source: str = ""

    @property
    def leaf(self) -> str | None:
        return self.redundancy.leaf if self.redundancy else None

    @property
    def isolated(self) -> bool:
        return bool(self.redundancy and self.redundancy.isolated)


@dataclass
class _Iface:
    admin: bool = True
    peer: tuple[str, str] | None = None


@dataclass
class _Switch:
    spec: SwitchSpec
    ifaces: dict[str, _Iface] = field(default_factory=dict)


class Fabric:
    """The link-state model. All methods are safe to call from any thread."""

    def __init__(self, switch_specs: Iterable[Any], clock: Any | None = None, oper_stays_up: bool = False,
                 idle_uplinks: int = 0) -> None:
        specs = [SwitchSpec.from_obj(s) for s in switch_specs]
        self._switches = _build(specs)
        self._clock = clock
        self.oper_stays_up = oper_stays_up  # defect port-stays-oper-up: admin down does not take the link down
        # defect idle-uplink: each leaf's first `idle_uplinks` uplinks are cabled and up but outside the ECMP
        # group (no BGP session): they carry nothing, and losing one costs the leaf nothing
        self.idle_uplinks = idle_uplinks
        self._lock = threading.RLock()
        self._subs: list[Callable[[FabricEvent], None]] = []
        self._seq = 0

    # -- reading -----------------------------------------------------------------------------
    @property
    def switch_names(self) -> list[str]:
        return list(self._switches)

    def spec(self, switch: str) -> SwitchSpec:
        return self._switch(switch).spec

    def leaves(self) -> list[str]:
        return [n for n, s in self._switches.items() if s.spec.role == "leaf"]

    def has_iface(self, switch: str, iface: str) -> bool:
        sw = self._switches.get(switch)
        return sw is not None and iface in sw.ifaces

    def interfaces(self, switch: str) -> list[str]:
        return list(self._switch(switch).ifaces)

    def iface_state(self, switch: str, iface: str) -> IfaceState:
        with self._lock:
            return self._state(switch, iface)

    def states(self, switch: str) -> list[IfaceState]:
        with self._lock:
            return [self._state(switch, i) for i in self._switch(switch).ifaces]

    def now(self) -> float:
        return self._clock.timestamp() if self._clock is not None else time.time()

    @property
    def changes(self) -> int:
        """How many admin changes the fabric has taken so far (a reader compares two of these)."""
        return self._seq

    @property
    def scale(self) -> float:
        """Twin seconds per wall second of the fabric's clock (1 without one)."""
        return float(getattr(self._clock, "scale", 1.0) or 1.0)

    def pause(self, cluster_seconds: float) -> None:
        """Block the calling thread for `cluster_seconds` of the fabric's clock (a slow control plane)."""
        time.sleep(cluster_seconds / float(getattr(self._clock, "scale", 1.0) or 1.0))

    def lock(self) -> threading.RLock:
        """The fabric's lock, for readers that must see link state and their own derived state at once."""
        return self._lock

    def active_uplinks(self, leaf: str) -> list[str]:
        """The leaf's uplinks in its ECMP group (all but the idle ones), whatever their state."""
        sw = self._switch(leaf)
        ups = [u.iface for u in sw.spec.uplinks] if sw.spec.role == "leaf" else []
        return ups[min(self.idle_uplinks, max(len(ups) - 1, 0)):]  # one uplink always carries the leaf

    def leaf_uplinks_up(self, leaf: str) -> int:
        return self.redundancy(leaf).up

    def redundancy(self, leaf: str) -> LeafRedundancy:
        with self._lock:
            return self._redundancy(leaf)

    def snapshot(self) -> dict:
        """Plain data for ground truth and debugging: per switch, iface → {admin, oper}."""
        with self._lock:
            out: dict[str, dict] = {}
            for name, sw in self._switches.items():
                states = (self._state(name, i) for i in sw.ifaces)
                out[name] = {st.iface: {"admin": st.admin, "oper": st.oper} for st in states}
            return out

    # -- changing ----------------------------------------------------------------------------
    def set_admin(self, switch: str, iface: str, up: bool, source: str = "") -> FabricEvent | None:
        """Set an interface's admin state; returns the event, or None when nothing changed."""
        with self._lock:
            entry = self._iface(switch, iface)
            if entry.admin == bool(up):
                return None
            entry.admin = bool(up)
            self._seq += 1
            st = self._state(switch, iface)
            leaf = self._leaf_of(switch, iface)
            event = FabricEvent(
                seq=self._seq,
                at=self.now(),
                switch=switch,
                iface=iface,
                admin=st.admin,
                oper=st.oper,
                uplink=entry.peer is not None,
                redundancy=self._redundancy(leaf) if leaf else None,
                source=source,
            )
            log.info("fabric: %s %s admin %s (%s)", switch, iface, "up" if up else "down",
                     f"{event.redundancy.leaf} {event.redundancy.up}/{event.redundancy.total} uplinks up"
                     if event.redundancy else "not an uplink")
            # Dispatch under the lock so subscribers see events in order; callbacks must not block.
            for cb in list(self._subs):
                try:
                    cb(event)
                except Exception:  # a broken subscriber must not break the switch's CLI session
                    log.exception("fabric subscriber %r failed on %s", cb, event)
            return event

    def on_change(
        self, callback: Callable[[FabricEvent], None], loop: asyncio.AbstractEventLoop | None = None
    ) -> Callable[[], None]:
        """Subscribe; with `loop`, the callback runs on that loop (via call_soon_threadsafe).

        Returns an unsubscribe function.
        """
        cb = callback
        if loop is not None:
            def cb(event: FabricEvent, _cb=callback, _loop=loop) -> None:
                if not _loop.is_closed():
                    _loop.call_soon_threadsafe(_cb, event)
        with self._lock:
            self._subs.append(cb)

        def unsubscribe() -> None:
            with self._lock:
                if cb in self._subs:
                    self._subs.remove(cb)

        return unsubscribe

    # -- helpers -----------------------------------------------------------------------------
    def _switch(self, switch: str) -> _Switch:
        try:
            return self._switches[switch]
        except KeyError:
            raise UnknownInterface(f"no switch named {switch!r} in the fabric") from None

    def _iface(self, switch: str, iface: str) -> _Iface:
        sw = self._switch(switch)
        try:
            return sw.ifaces[iface]
        except KeyError:
            raise UnknownInterface(f"switch {switch!r} has no interface {iface!r}") from None

    def _state(self, switch: str, iface: str) -> IfaceState:
        entry = self._iface(switch, iface)
        oper = entry.admin or self.oper_stays_up
        if entry.peer is not None:  # a cable is up only when both ends are enabled
            oper = oper and (self._iface(*entry.peer).admin or self.oper_stays_up)
        return IfaceState(switch, iface, entry.admin, oper, entry.peer)

    def _leaf_of(self, switch: str, iface: str) -> str | None:
        sw = self._switch(switch)
        if sw.spec.role == "leaf":
            return switch
        peer = sw.ifaces[iface].peer
        if peer is not None and self._switches[peer[0]].spec.role == "leaf":
            return peer[0]
        return None

    def _redundancy(self, leaf: str) -> LeafRedundancy:
        sw = self._switch(leaf)
        if sw.spec.role != "leaf":
            raise UnknownInterface(f"switch {leaf!r} is a {sw.spec.role}, not a leaf")
        ups = self.active_uplinks(leaf)
        return LeafRedundancy(leaf, sum(1 for i in ups if self._state(leaf, i).oper), len(ups))


def _build(specs: list[SwitchSpec]) -> dict[str, _Switch]:
    """Validate specs and wire both ends of every uplink; one clear InvalidProfile line on error."""
    switches: dict[str, _Switch] = {}
    for s in specs:
        if not s.name:
            raise InvalidProfile("fabric: a switch has no name")
        if s.name in switches:
            raise InvalidProfile(f"fabric: switch {s.name!r} is declared twice")
        if s.role not in ROLES:
            raise InvalidProfile(f"fabric: switch {s.name!r} has role {s.role!r}; use one of {', '.join(ROLES)}")
        if len(set(s.interfaces)) != len(s.interfaces):
            raise InvalidProfile(f"fabric: switch {s.name!r} lists an interface twice")
        switches[s.name] = _Switch(s, {i: _Iface() for i in s.interfaces})
    for s in specs:
        if s.uplinks and s.role != "leaf":
            raise InvalidProfile(f"fabric: uplinks are declared on leaves; {s.name!r} is a {s.role}")
        for u in s.uplinks:
            peer = switches.get(u.peer)
            if u.iface not in switches[s.name].ifaces:
                raise InvalidProfile(f"fabric: uplink {s.name} {u.iface}: {s.name!r} has no interface {u.iface!r}")
            if peer is None or peer.spec.role != "spine":
                raise InvalidProfile(f"fabric: uplink {s.name} {u.iface} goes to {u.peer!r}, which is not a spine")
            if u.peer_iface not in peer.ifaces:
                raise InvalidProfile(f"fabric: uplink {s.name} {u.iface}: spine {u.peer!r} has no interface {u.peer_iface!r}")
            here, there = switches[s.name].ifaces[u.iface], peer.ifaces[u.peer_iface]
            if here.peer is not None or there.peer is not None:
                raise InvalidProfile(f"fabric: uplink {s.name} {u.iface} ↔ {u.peer} {u.peer_iface} reuses a cabled port")
            here.peer, there.peer = (u.peer, u.peer_iface), (s.name, u.iface)
    return switches
