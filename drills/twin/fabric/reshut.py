"""A port that is shut again after the drill's `no shutdown` (the defects `port-reshut`, `peer-port-reshut`).

Switches are configured by more than one hand: a config-management agent re-applying an intended config in
which the uplink is shut, an errdisable recovery that trips again, a person on the far switch. For a drill it
is a revert that does not hold: `no shutdown` is answered, the port comes up, and `after_s` twin seconds later
it (the `near` end, or the `far` end: the spine's port of the same cable) is admin down again. Acts through the
fabric's own `set_admin`, as the switch's CLI does; once per port, and only on an uplink brought up over SSH
after it was shut over SSH (a port that was never shut is left alone).
"""

from __future__ import annotations

import logging
import threading

from drills.twin.fabric.topology import Fabric, FabricEvent

__all__ = ["PortReshut", "ENDS"]

log = logging.getLogger(__name__)

ENDS = ("near", "far")


class PortReshut:
    """Subscribed to the fabric's link events; `stop()` cancels what is pending."""

    def __init__(self, fabric: Fabric, after_s: float, end: str = "near") -> None:
        if end not in ENDS:
            raise ValueError(f"reshut end must be one of {ENDS}, not {end!r}")
        self.fabric, self.after_s, self.end = fabric, float(after_s), end
        self._shut: set[tuple[str, str]] = set()  # ports shut over SSH
        self._done: set[tuple[str, str]] = set()
        self._timers: list[threading.Timer] = []
        self._unsubscribe = fabric.on_change(self._on_change)

    def stop(self) -> None:
        self._unsubscribe()
        for timer in self._timers:
            timer.cancel()

    def _on_change(self, event: FabricEvent) -> None:  # under the fabric's lock: must not block
        port = (event.switch, event.iface)
        if not event.uplink or not event.source.startswith("ssh:") or port in self._done:
            return
        if not event.admin:
            self._shut.add(port)
            return
        if port not in self._shut:
            return
        self._done.add(port)
        victim = port if self.end == "near" else self.fabric.iface_state(*port).peer
        timer = threading.Timer(self.after_s / self.fabric.scale, self._reshut, victim)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _reshut(self, switch: str, iface: str) -> None:
        log.info("fabric: %s %s shut again %g s after `no shutdown` (defect: port reshut, %s end)", switch, iface,
                 self.after_s, self.end)
        self.fabric.set_admin(switch, iface, False, source="config-agent")
