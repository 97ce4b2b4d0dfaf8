"""The completions the twin's gateway owes an answer, by the client's `x-request-id` (cluster seconds).

On a dilated clock a wall-time hiccup of this machine is magnified: at 600× a quarter of a second of a busy
CPU is 150 cluster seconds, longer than any client timeout. So the load asks the gateway before it counts a
request as hung (`GET /twin/v1/requests/{id}`, drills/load/hung.py): when it arrived, when its answer is due
(None: never — a wedged replica accepts and does not answer) and the gateway's clock now. An answer due
within the client timeout is late on the wall clock only; one due after it, or never, is a hang.
"""

from __future__ import annotations

import re
from typing import Any

from drills.load.hung import REQUEST_ID_HEADER

__all__ = ["OwedAnswers", "REQUEST_ID_HEADER"]

_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _valid(rid: str) -> bool:
    return bool(_REQUEST_ID.fullmatch(rid))


class OwedAnswers:
    """request id → [arrived, due or None] while its handler runs."""

    def __init__(self) -> None:
        self._owed: dict[str, list[Any]] = {}

    def arrive(self, rid: str, now: float) -> bool:
        """Start owing `rid` (False: not a usable id, or one already in flight — not tracked)."""
        if not _valid(rid) or rid in self._owed:
            return False
        self._owed[rid] = [now, None]
        return True

    def due_in(self, rid: str, now: float, cluster_s: float) -> None:
        entry = self._owed.get(rid)
        if entry is not None:
            entry[1] = now + cluster_s

    def done(self, rid: str) -> None:
        self._owed.pop(rid, None)

    def probe(self, rid: str, now: float) -> dict | None:
        """What the load asks: None when `rid` is not in flight."""
        entry = self._owed.get(rid)
        return None if entry is None else {"arrived": entry[0], "due": entry[1], "now": now}
