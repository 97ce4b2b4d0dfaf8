"""Faults: ONE contract (DESIGN §3) — `plan` → `inject` → `revert` — and one module per fault kind.

A fault module (`node`, `pods`, `rollout`, `burst`, `switch.uplink`, `storage.saturation`, `load`, `gpu_xid`) has:

    KIND: str                                             the journal's name for it
    plan(target, profile, **params) -> Plan               read-only: validates and picks; changes nothing
    inject(target, plan) -> record                        makes the change; a frozen record with
                                                          `to_dict()` and `injected_at` (cluster time)
    revert(target, undo, record) -> str                   undoes exactly that, idempotent, from the
                                                          journal's data alone; returns the outcome word
    verify(target, undo, record) -> Reading               reads back what `revert` undid (readback.py):
                                                          the API's "OK" is not proof — each value read,
                                                          with its object and source; read-only

`Plan.undo` is what the journal keeps (written and fsynced before `inject`): enough to revert after a
crash at any point, no secrets. `Plan.reach` is what the fault touches, checked against the profile's
allowlist and blast radius by the one guard (`fixtures/guard.py`) — no fault module repeats the safety
sequence. `revert_entry` is the one reverter and `verify_entry` the one read-back: the guard's teardown and
`drills revert` both end there, and both verify a revert after a settle period in cluster time
(`safety.revert_settle_s`): a fault that is back keeps its journal entry open (`revert_failed`).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping

__all__ = ["Plan", "Reach", "Target", "KINDS", "fault_module", "revert_entry", "verify_entry", "reverter", "REVERTED",
           "NOTHING_TO_UNDO", "NOT_INJECTED", "DEFAULT_SETTLE_S"]

log = logging.getLogger(__name__)

REVERTED = "reverted"
NOTHING_TO_UNDO = "nothing to undo"
NOT_INJECTED = "not injected"
DEFAULT_SETTLE_S = 60.0  # cluster seconds a revert must hold before it is read back (profile: safety.revert_settle_s)

# kind → module: data, so a journal line can never name code to import.
KINDS: dict[str, str] = {
    "node": "drills.faults.node",
    "pods": "drills.faults.pods",
    "switch-uplink": "drills.faults.switch.uplink",
    "storage": "drills.faults.storage.saturation",
    "load": "drills.faults.load",
    "lock": "drills.faults.lock",
    "accept-gate": "drills.faults.accept_gate",
    "accept-jobs": "drills.faults.accept_jobs",
    "store-reader": "drills.faults.store_reader",
    "gpu-xid": "drills.faults.gpu_xid",
    "rollout": "drills.faults.rollout",
    "burst": "drills.faults.burst",
}


@dataclass(frozen=True)
class Reach:
    """What a plan touches: checked against `safety.allow`, counted against `safety.blast_radius`."""

    nodes: tuple[tuple[str, Mapping[str, str]], ...] = ()  # (name, labels)
    namespaces: tuple[str, ...] = ()
    ports: tuple[tuple[str, str], ...] = ()  # (switch, interface)
    pods: int = 0


@dataclass(frozen=True)
class Plan:
    """One fault, decided but not made: what, where, a sentence for people, and how to undo it."""

    kind: str
    target: str  # what it touches, in a word ("gpu-train-01", "leaf-1:Ethernet0", "serving/app=vllm")
    description: str  # "cordon and drain node gpu-train-01"
    undo: Mapping[str, Any]  # the journal's revert spec (JSON, no secrets)
    reach: Reach = Reach()
    spec: Any = field(default=None, compare=False, repr=False)  # the module's own inputs for `inject`
    # what the fault is about, as monitoring names it (drills/detect/objects.py `about_faults`): beyond the reach's
    # nodes, e.g. {"switch", "host", "interface"} for each end of a shut cable, {"namespace", "deployment"}
    about: tuple[Mapping[str, str], ...] = field(default=(), compare=False)


class Target:
    """How faults reach the platform: the cluster connection (made lazily from a journal's description
    when `drills revert` needs one), its clock, and where run artifacts go. `accept_new_host_key` is the
    operator's explicit override (`drills revert --accept-new-host-key`): a switch that presents another
    host key than the one recorded at inject is reverted anyway (the same switch, re-keyed)."""

    def __init__(self, cluster=None, *, connection: Mapping[str, Any] | None = None, entry_id: str | None = None,
                 run_dir=None, accept_new_host_key: bool = False) -> None:
        self.accept_new_host_key = accept_new_host_key
        self._cluster = cluster
        self._connection = dict(connection) if connection else None
        self._entry_id = entry_id
        self._owned = False
        self.run_dir = run_dir

    @property
    def cluster(self):
        if self._cluster is None:
            from drills.core.errors import DrillError
            from drills.core.kube import reconnect

            if not self._connection:
                raise DrillError("this journal entry does not say how its run connected to the cluster; "
                                 "revert it by hand, then close the entry")
            self._cluster = reconnect(self._connection, entry_id=self._entry_id)  # UnsafeTarget if it is another
            self._owned = True
        return self._cluster

    @property
    def clock(self):
        return self.cluster.clock

    def describe(self) -> dict[str, Any] | None:
        """How this target connects, for the journal (no secrets)."""
        if self._cluster is not None:
            return self._cluster.describe()
        return self._connection

    def close(self) -> None:
        if self._owned and self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __repr__(self) -> str:
        return f"Target({self._cluster!r})"


def fault_module(kind: str) -> ModuleType:
    """The module implementing fault `kind` (KINDS); a KeyError names the known kinds."""
    try:
        return importlib.import_module(KINDS[kind])
    except KeyError:
        raise KeyError(f"unknown fault kind {kind!r} (kinds: {', '.join(KINDS)})") from None


def revert_entry(entry, target: Target | None = None, *, accept_new_host_key: bool = False) -> str:
    """Undo one journal entry with its kind's `revert` (teardown passes the live target; `drills revert`
    reconnects the way the run connected). Returns the outcome word; raises RevertFailed, or UnsafeTarget
    when the entry's target is not the one reached now."""
    module = fault_module(entry.kind)
    own = target is None
    target = target or Target(connection=getattr(entry, "connection", None), entry_id=getattr(entry, "id", None),
                              accept_new_host_key=accept_new_host_key)
    try:
        return module.revert(target, dict(entry.revert_spec), dict(entry.record) if entry.record else None) \
            or REVERTED
    finally:
        if own:
            target.close()


def verify_entry(entry, target: Target):
    """Read back one journal entry's revert with its kind's `verify` (a Reading, stamped with cluster time by
    the caller). A kind without `verify` cannot be read back: the Reading says so (undone None)."""
    from drills.faults.readback import unreadable

    module = fault_module(entry.kind)
    verify = getattr(module, "verify", None)
    if verify is None:
        return unreadable(entry.kind, entry.target, f"fault kind {entry.kind} has no read-back")
    return verify(target, dict(entry.revert_spec), dict(entry.record) if entry.record else None)


def reverter(entry, *, accept_new_host_key: bool = False, verify: bool = False,
             settle_s: float | None = None) -> "Callable":
    """The journal's resolver (`revert_open(..., resolver=reverter)`): every kind reverts through `revert_entry`
    (`functools.partial(reverter, accept_new_host_key=True)` carries `drills revert`'s override). With `verify`
    (`drills revert`), each revert is then read back after a settle period in cluster time — `settle_s` when
    given, else the entry's own (its run's `safety.revert_settle_s`), else DEFAULT_SETTLE_S — and a fault that is
    back raises RevertFailed naming what was read (the entry stays open)."""
    fault_module(entry.kind)  # an unknown kind fails here, with the kinds named
    if verify:
        return lambda e: _revert_verified(e, accept_new_host_key, settle_s)
    if accept_new_host_key:
        return lambda e: revert_entry(e, accept_new_host_key=True)
    return revert_entry


def _revert_verified(entry, accept_new_host_key: bool, settle_s: float | None) -> str:
    from drills.core.errors import RevertFailed
    from drills.faults.readback import wait_until_clock

    target = Target(connection=getattr(entry, "connection", None), entry_id=getattr(entry, "id", None),
                    accept_new_host_key=accept_new_host_key)
    try:
        outcome = revert_entry(entry, target)
        settle = settle_s if settle_s is not None else getattr(entry, "settle_s", None)
        settle = DEFAULT_SETTLE_S if settle is None else float(settle)
        if entry.connection:  # a settle period on the cluster's clock (a journal without one: the wall clock)
            clock = target.clock
        else:
            from drills.core.clock import WallClock

            clock = WallClock()
        wait_until_clock(clock, clock.timestamp() + settle)
        reading = verify_entry(entry, target)
        if not reading.undone:
            raise RevertFailed(reading.sentence() + "; the entry stays open: fix the cause and run `drills revert` again")
        log.info("%s", reading.sentence())
        return outcome
    finally:
        target.close()
