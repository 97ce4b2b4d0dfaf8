"""The twin's health: which of its components broke, and how (a bug must never hide in a log line).

A controller's reconcile that fails with an API answer (a conflict, a missing object, a dropped
connection) is the ordinary life of a controller: it requeues. Anything else — an AttributeError, a
KeyError — is a bug in the twin: it is logged with its traceback, kept here, served at
`GET /twin/v1/health` (503 while anything is broken) and shown by `drills twin health`, and the e2e
fixtures fail a test whose twin broke.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field

__all__ = ["Health", "Breakage"]

log = logging.getLogger(__name__)

_KEEP = 20  # breakages kept (the first of each kind, then counted)


@dataclass
class Breakage:
    """One kind of failure in one component: where it was raised, its first message and traceback, how often."""

    component: str
    error: str  # the exception type
    message: str
    where: str  # file:line of the innermost frame
    key: str  # what was being reconciled when it first failed
    traceback: str
    count: int = 1
    keys: set[str] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {"component": self.component, "error": self.error, "message": self.message, "where": self.where,
                "key": self.key, "count": self.count, "keys": len(self.keys), "traceback": self.traceback}


class Health:
    """Breakages reported by the twin's components (single-threaded: the twin's event loop)."""

    def __init__(self) -> None:
        self._broken: dict[tuple[str, str, str], Breakage] = {}

    @property
    def ok(self) -> bool:
        return not self._broken

    def report(self, component: str, key: object, err: BaseException) -> Breakage:
        """Record an unexpected exception; the first of its kind is logged with its traceback."""
        frames = traceback.extract_tb(err.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        ident = (component, type(err).__name__, where)
        found = self._broken.get(ident)
        if found is not None:
            found.count += 1
            found.keys.add(str(key))
            return found
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        log.error("twin component %s is broken: %s: %s while handling %s (at %s)\n%s", component,
                  type(err).__name__, err, key, where, text)
        found = Breakage(component, type(err).__name__, str(err), where, str(key), text, keys={str(key)})
        if len(self._broken) < _KEEP:
            self._broken[ident] = found
        return found

    def snapshot(self) -> dict:
        return {"ok": self.ok, "broken": [b.to_dict() for b in self._broken.values()]}
