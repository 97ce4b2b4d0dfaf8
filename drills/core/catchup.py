"""What each merged stream has delivered, so a catch-up hands over exactly what it had not.

A watch source remembers, per object (uid, else namespace/name), the resourceVersion and the object it
last delivered; a list of the same selection then yields the objects that changed (MODIFIED/ADDED with
a newer resourceVersion) and those that are gone (DELETED with their last known state). The watch thread
passes its own events through the same filter, so an event a catch-up already delivered is not
delivered again and an older state never follows a newer one.

A log source counts the lines it delivered; a catch-up reads the whole log once (timestamps on, as the
follow reads it) and delivers the lines past that count, and the follow then skips lines a catch-up
delivered. A log is caught up only while its follow is alive and the read starts with the lines already
delivered (the last delivered line is where it was): a restarted container's new log is never spliced
onto the old one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["WatchSource", "LogSource", "object_key", "newer"]


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def newer(rv: str | None, than: str | None) -> bool:
    """Whether resourceVersion `rv` is later than `than`. Both are etcd revisions on every server we know;
    anything else that differs counts as newer (the safe side: an extra event, never a lost one)."""
    if than is None:
        return True
    if rv is None:
        return False
    if rv.isdigit() and than.isdigit():
        return int(rv) > int(than)
    return rv != than


@dataclass
class WatchSource:
    """One list+watch stream: its list call and what it delivered."""

    list_fn: Callable
    args: tuple
    kwargs: dict
    delivered: dict[str, tuple[str | None, dict]] = field(default_factory=dict)  # key → (resourceVersion, object)
    deleted: set[str] = field(default_factory=set)

    def admit(self, etype: str, obj: dict) -> bool:
        """Whether an event is news (and remember it); the caller holds the merger's lock."""
        key = object_key(obj)
        if key in self.deleted:
            return False
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype == "DELETED":
            self.deleted.add(key)
            self.delivered.pop(key, None)
            return True
        last = self.delivered.get(key)
        if last is not None and not newer(rv, last[0]):
            return False
        self.delivered[key] = (rv, obj)
        return True

    def differences(self, items: list[dict]) -> list[tuple[str, dict]]:
        """Events that turn what was delivered into `items` (a fresh list of the same selection)."""
        listed = {object_key(item): item for item in items}
        events = [("MODIFIED" if key in self.delivered else "ADDED", item) for key, item in listed.items()]
        events += [("DELETED", obj) for key, (_, obj) in self.delivered.items() if key not in listed]
        return events


@dataclass
class LogSource:
    """One pod log follow: the read it repeats and how many lines it delivered."""

    read: Callable[[], str]
    delivered: int = 0
    last_line: str | None = None
    ended: bool = False
    finished: threading.Event = field(default_factory=threading.Event)  # the follow's thread is done reading

    def admit(self, index: int, line: str) -> bool:
        """Whether the follow's line number `index` is news (and count it); the caller holds the merger's lock."""
        if index < self.delivered:
            return False
        self.delivered, self.last_line = index + 1, line
        return True

    def missing(self, text: str) -> list[str]:
        """The lines of a fresh full read past what was delivered; none when the read does not continue
        what was delivered (another container's log, a rotated log)."""
        lines = text.split("\n")
        lines.pop()  # after the last newline: nothing, or a line still being written (the follow delivers it whole)
        if self.ended or len(lines) < self.delivered:
            return []
        if self.delivered and lines[self.delivered - 1] != self.last_line:
            return []
        return lines[self.delivered:]

    def took(self, lines: list[str]) -> None:
        if lines:
            self.delivered += len(lines)
            self.last_line = lines[-1]
