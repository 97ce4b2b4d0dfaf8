"""Which process wrote something, and whether that process still runs.

A journal entry (drills.core.journal) and a twin's `twin.json` say who wrote them: the pid, the host,
the pid's start time (clock ticks since boot, /proc/<pid>/stat field 22) and the boot it belongs to
(/proc/sys/kernel/random/boot_id). Together they tell a live process from a pid reused after it died
or after a reboot, so `drills revert` never mistakes a dead run for a live one (or the reverse), and
`drills twin down` never signals a stranger.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["ProcessIdentity", "process_start", "boot_id"]


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as written down: pid and host, with its start time and boot when known."""

    pid: int | None
    host: str | None
    pid_start: int | None = None
    boot_id: str | None = None

    @classmethod
    def current(cls) -> "ProcessIdentity":
        pid = os.getpid()
        return cls(pid, socket.gethostname(), process_start(pid), boot_id())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ProcessIdentity":
        return cls(data.get("pid"), data.get("host"), data.get("pid_start"), data.get("boot_id"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def alive(self) -> bool:
        """Still runs: same host and boot, its pid alive with the same start time. False when that cannot
        be known (another host, a record without these fields)."""
        if self.pid is None or self.host is None or self.host != socket.gethostname():
            return False
        if self.boot_id and self.boot_id != boot_id():
            return False
        started = process_start(self.pid)
        if started is None:
            return False
        return self.pid_start is None or started == self.pid_start

    def known_dead(self) -> bool:
        """Proven ended here: written on this host, and its boot is over or its pid is gone (or reused). False
        when this host cannot tell — another host, a record without a pid: then the run's Lease decides."""
        if self.pid is None or self.host is None or self.host != socket.gethostname():
            return False
        if self.boot_id and boot_id() and self.boot_id != boot_id():
            return True
        started = process_start(self.pid)
        return started is None or (self.pid_start is not None and started != self.pid_start)

    def is_current(self) -> bool:
        """The calling process itself."""
        return self.pid == os.getpid() and self.host == socket.gethostname() and (
            self.pid_start is None or self.pid_start == process_start(os.getpid()))


def process_start(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22); None if it is gone.

    Without /proc (not Linux) a live pid reports 0: alive, start time unknown.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    if not fields or fields[0] in ("Z", "X"):  # a zombie is a dead process whose parent has not reaped it yet
        return None
    try:
        return int(fields[19])  # fields[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None
