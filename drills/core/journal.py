"""The durable revert journal (DESIGN §6): every fault is written down, fsynced, before it is injected.

`reports/<run-id>/journal.jsonl` is append-only; each line is one JSON object with its time (`at`):

    {"op": "open", "id": …, "kind": "node", "target": "gpu-node-3", "revert": {…},
     "connection": {"mode": "in-cluster", "url": "https://10.0.0.1:443", "uid": "…", "serviceaccount_dir": "…"},
     "run_id": …, "pid": 4242, "host": "drills-7x9k", "pid_start": 81234567, "boot_id": "…"}
    {"op": "injected", "id": …, "record": {…}}
    {"op": "revert_failed", "id": …, "error": "…"}
    {"op": "close", "id": …, "outcome": "reverted"}

`connection` is `Cluster.describe()` (drills.core.kube): how the run connected (twin state dir,
kubeconfig + pinned context, or in-cluster service account) and the cluster it reached (API URL and
`kube-system` UID); no secrets. `pid`, `host`, `pid_start` and `boot_id` say which process wrote the
entry (drills.core.liveness), so a pid reused after the run died is not mistaken for the run
(`Entry.run_alive()`). A fault's own identity travels in its record: a switch fault's `injected` record
carries the SSH host key the switch presented (`host_key`), and its revert refuses a switch that now
presents another one (drills.faults.switch.uplink).

An entry is open from its `open` line until its `close` line. After a crash (even SIGKILL) the
journal is the truth: `revert_open` finds open entries in one journal, one run or every run under
`reports/`, calls their reverter and closes them; a failing revert leaves the entry open with its
error so `drills revert` can try again. It refuses (and leaves open, untouched) the entries of a run
that is still alive — that run reverts its own faults — and, given `check_target`, those whose
cluster is not the one the connection reaches now. The revert spec must be enough to undo the fault
on its own: a crash can come between injecting and `mark_injected`. Reverters must be idempotent.

A reverter is `fn(entry: Entry) -> None`; it reconnects from `entry.connection`. `drills revert` uses
`drills.faults.reverter` (every kind through the fault contract's one `revert_entry`); a
RevertRegistry (kind → callable, an explicit object so tests never leak registrations) serves tests.
A journal line never names code to import: kinds map to code in `drills.faults.KINDS`, which is code.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from drills.core.errors import RevertFailed, TargetGone, UnsafeTarget
from drills.core.liveness import ProcessIdentity

__all__ = [
    "JOURNAL_NAME",
    "Entry",
    "Journal",
    "RevertOutcome",
    "RevertRegistry",
    "Reverter",
    "TargetCheck",
    "find_journals",
    "open_entries",
    "revert_open",
    "raise_for_failures",
]

log = logging.getLogger(__name__)

JOURNAL_NAME = "journal.jsonl"


@dataclass(frozen=True)
class Entry:
    """One fault as the journal knows it: what, where, how to undo it, and how far it got."""

    id: str
    kind: str
    target: str
    revert_spec: Mapping[str, Any]
    journal: Path
    run_id: str | None = None
    opened_at: str | None = None
    injected: bool = False
    record: Mapping[str, Any] | None = None
    closed: bool = False
    outcome: str | None = None
    errors: tuple[str, ...] = ()
    connection: Mapping[str, Any] | None = None  # Cluster.describe() of the run's connection
    pid: int | None = None  # the process that opened the entry, on `host`
    host: str | None = None
    pid_start: int | None = None  # its start time (clock ticks since boot): tells it from a reused pid
    boot_id: str | None = None
    settle_s: float | None = None  # cluster seconds a revert must hold before it is read back (the run's profile)

    @property
    def is_open(self) -> bool:
        return not self.closed

    @property
    def writer(self) -> ProcessIdentity:
        """The process that opened this entry."""
        return ProcessIdentity(self.pid, self.host, self.pid_start, self.boot_id)

    def run_alive(self) -> bool:
        """The process that opened this entry still runs (False when that cannot be known)."""
        return self.writer.alive()

    def of_this_process(self) -> bool:
        """Opened by the calling process itself (a run reverting its own faults)."""
        return self.writer.is_current()


Reverter = Callable[[Entry], Any]
TargetCheck = Callable[[Entry], Any]  # raises UnsafeTarget when the entry's cluster is not the one reached
LeaseCheck = Callable[[Entry], "str | None"]  # a run's open lock entry → why its Lease is current (None: not)


@dataclass(frozen=True)
class RevertOutcome:
    """What `revert_open` did with one open entry: reverted, failed (`error`), or refused (`refused`, why in
    `error`: a live run, another cluster); failed and refused entries stay open."""

    entry: Entry
    reverted: bool
    error: str | None = None
    refused: bool = False
    outcome: str = "reverted"  # the close line's outcome: "reverted", or "target-gone" (a twin that ended)


class Journal:
    """An append-only, fsynced JSONL journal for one run."""

    def __init__(self, path: str | os.PathLike, run_id: str | None = None) -> None:
        self.path = Path(path)
        self.run_id = run_id if run_id is not None else self.path.parent.name
        self._lock = threading.Lock()
        self._checked_tail = False
        # Called as guard(kind, target) before every entry opens, i.e. before every fault (the run lock).
        self.guard: Callable[[str, str], Any] | None = None

    @classmethod
    def for_run(cls, reports_dir: str | os.PathLike, run_id: str) -> "Journal":
        return cls(Path(reports_dir) / run_id / JOURNAL_NAME, run_id=run_id)

    def open_entry(self, kind: str, target: str, revert_spec: Mapping[str, Any], *,
                   connection: Mapping[str, Any] | None = None, settle_s: float | None = None) -> str:
        """Write the entry and fsync file and directory; only then may the fault be injected.

        `connection` is the cluster's `describe()`; `drills revert` reconnects with it. `settle_s` is how long
        a revert must hold before it is read back (`safety.revert_settle_s`); `drills revert` waits as long.
        """
        if self.guard is not None:
            self.guard(kind, target)
        entry_id = f"{kind}-{uuid.uuid4().hex[:12]}"
        self._append({"op": "open", "id": entry_id, "kind": kind, "target": target, "revert": dict(revert_spec),
                      "connection": dict(connection) if connection is not None else None,
                      "run_id": self.run_id, **ProcessIdentity.current().to_dict(),
                      **({"settle_s": settle_s} if settle_s is not None else {})})
        log.debug("journal %s: opened %s (%s on %s)", self.path, entry_id, kind, target)
        return entry_id

    def mark_injected(self, entry_id: str, record: Mapping[str, Any] | None = None) -> None:
        """The fault is in place; `record` is the injector's account of exactly what it changed."""
        self._append({"op": "injected", "id": entry_id, "record": dict(record or {})})

    def mark_revert_failed(self, entry_id: str, error: str) -> None:
        """A revert attempt failed; the entry stays open for `drills revert`."""
        self._append({"op": "revert_failed", "id": entry_id, "error": error})

    def close_entry(self, entry_id: str, outcome: str = "reverted") -> None:
        """The fault is undone (or was never made): the entry leaves the open set."""
        self._append({"op": "close", "id": entry_id, "outcome": outcome})

    def entries(self) -> list[Entry]:
        """Every entry in opening order, folded from the journal's lines (torn lines are skipped)."""
        found: dict[str, dict[str, Any]] = {}
        for line_no, op in self._read():
            entry_id = op.get("id")
            if op.get("op") == "open" and entry_id:
                spec = op.get("revert") or {}
                # Entries written before `connection` existed kept it in the revert spec as "cluster".
                connection = op.get("connection") or (spec.get("cluster") if isinstance(spec, dict) else None)
                found[entry_id] = {"id": entry_id, "kind": op.get("kind", "?"), "target": op.get("target", "?"),
                                   "revert_spec": spec, "journal": self.path,
                                   "run_id": op.get("run_id", self.run_id),
                                   "opened_at": op.get("at"), "errors": (), "connection": connection or None,
                                   "pid": op.get("pid"), "host": op.get("host"), "pid_start": op.get("pid_start"),
                                   "boot_id": op.get("boot_id"), "settle_s": op.get("settle_s")}
            elif entry_id in found:
                current = found[entry_id]
                if op.get("op") == "injected":
                    current.update(injected=True, record=op.get("record") or {})
                elif op.get("op") == "revert_failed":
                    current["errors"] = current["errors"] + (str(op.get("error")),)
                elif op.get("op") == "close":
                    current.update(closed=True, outcome=op.get("outcome"))
            else:
                log.warning("journal %s line %d: %s for unknown entry %s ignored", self.path, line_no, op.get("op"), entry_id)
        return [Entry(**values) for values in found.values()]

    def open_entries(self) -> list[Entry]:
        """Entries opened but not closed, in opening order."""
        return [e for e in self.entries() if e.is_open]

    def _append(self, op: dict[str, Any]) -> None:
        op = {**op, "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")}
        data = (json.dumps(op, sort_keys=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if not self._checked_tail:
                    data = self._after_torn_tail(fd) + data
                    self._checked_tail = True
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            if created or op["op"] == "open":
                _fsync_dir(self.path.parent)
            if created:
                _fsync_dir(self.path.parent.parent)  # the run directory may be new as well

    def _after_torn_tail(self, fd: int) -> bytes:
        """A crash mid-write leaves a line without its newline: start ours on a fresh line."""
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        with open(self.path, "rb") as existing:
            existing.seek(size - 1)
            return b"" if existing.read(1) == b"\n" else b"\n"

    def _read(self) -> Iterable[tuple[int, dict[str, Any]]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        for number, line in enumerate(raw.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                op = json.loads(line)
            except ValueError:
                log.warning("journal %s line %d: torn or unreadable line skipped", self.path, number)
                continue
            if isinstance(op, dict):
                yield number, op


class RevertRegistry:
    """kind → reverter callable. An object, not a global: pass it in."""

    def __init__(self, reverters: Mapping[str, Reverter] | None = None) -> None:
        self._reverters: dict[str, Reverter] = dict(reverters or {})

    def add(self, kind: str, reverter: Reverter) -> None:
        self._reverters[kind] = reverter

    def register(self, kind: str) -> Callable[[Reverter], Reverter]:
        """Decorator form of `add`."""
        def wrap(fn: Reverter) -> Reverter:
            self.add(kind, fn)
            return fn
        return wrap

    def __call__(self, entry: Entry) -> Reverter:
        """The reverter for `entry`'s kind. Raises RevertFailed."""
        target = self._reverters.get(entry.kind)
        if target is None:
            raise RevertFailed(f"no reverter for fault kind {entry.kind!r} (entry {entry.id} on {entry.target}); "
                               "revert it by hand, then close the entry")
        return target


def find_journals(reports_dir: str | os.PathLike) -> list[Path]:
    """Every run's journal under `reports_dir` (reports/<run-id>/journal.jsonl), oldest run name first."""
    seen: dict[Path, Path] = {}
    # reports/latest links to a run: count that run once, under its own name.
    for path in sorted(Path(reports_dir).glob(f"*/{JOURNAL_NAME}"), key=lambda p: (p.parent.is_symlink(), p)):
        seen.setdefault(path.resolve(), path)
    return sorted(seen.values())


def open_entries(where: Journal | str | os.PathLike, run_id: str | None = None) -> list[Entry]:
    """Open entries in a journal, a journal file, one run (`run_id`) or every run of a reports dir."""
    return [entry for journal in _journals(where, run_id) for entry in journal.open_entries()]


def revert_open(where: Journal | str | os.PathLike, run_id: str | None = None,
                resolver: Callable[[Entry], Reverter] | None = None, *,
                check_target: TargetCheck | None = None, lease_live: LeaseCheck | None = None) -> list[RevertOutcome]:
    """Revert every open entry (newest first, undoing in reverse); close the ones that succeed.

    Idempotent: a second call finds nothing open. A failure is recorded on its entry, which stays open.
    Refused, and left untouched: entries of a run still alive (another process), and entries for which
    `check_target(entry)` or the reverter raises UnsafeTarget (their cluster is not the one reached).
    Liveness comes from the cluster, not from this host: a run this host cannot prove ended (another host —
    a reports volume shared with the in-cluster CronJob — or a forged identity) is live while `lease_live`
    finds its run lock's Lease current (held by it, renewed within its duration, cluster time).
    TargetGone (a twin that ended) closes the entry as "target-gone": its faults ended with it.
    """
    if resolver is None:
        from drills.faults import reverter as resolver  # every kind through the fault contract
    outcomes: list[RevertOutcome] = []
    for journal in _journals(where, run_id):
        entries = journal.open_entries()
        held = _lease_held(entries, lease_live)
        for entry in reversed(entries):
            if held is not None:
                log.warning("not reverting %s: %s", entry.id, held)
                outcomes.append(RevertOutcome(entry, False, held, refused=True))
                continue
            if entry.run_alive() and not entry.of_this_process():
                reason = (f"run {entry.run_id} (pid {entry.pid} on {entry.host}) is still running: it reverts its "
                          "own faults; stop it first")
                log.warning("not reverting %s: %s", entry.id, reason)
                outcomes.append(RevertOutcome(entry, False, reason, refused=True))
                continue
            try:
                if check_target is not None and entry.connection:
                    check_target(entry)
                resolver(entry)(entry)
            except TargetGone as err:  # nothing left to undo: close it, saying why
                journal.close_entry(entry.id, "target-gone")
                log.info("closed %s (%s on %s): %s", entry.id, entry.kind, entry.target, err)
                outcomes.append(RevertOutcome(entry, True, str(err), outcome="target-gone"))
                continue
            except UnsafeTarget as err:  # another cluster than the entry's: not ours to touch, not a failure
                log.warning("not reverting %s: %s", entry.id, err)
                outcomes.append(RevertOutcome(entry, False, str(err), refused=True))
                continue
            except Exception as err:  # any failure: keep the entry open and say why, then go on
                message = str(err) or type(err).__name__
                log.error("revert of %s (%s on %s) failed: %s", entry.id, entry.kind, entry.target, message)
                journal.mark_revert_failed(entry.id, message)
                outcomes.append(RevertOutcome(entry, False, message))
                continue
            journal.close_entry(entry.id, "reverted")
            log.info("reverted %s (%s on %s)", entry.id, entry.kind, entry.target)
            outcomes.append(RevertOutcome(entry, True))
    return outcomes


def _lease_held(entries: list[Entry], lease_live: LeaseCheck | None) -> str | None:
    """Why the run of `entries` is live by its Lease (None: not, or proven ended on this host, or no check)."""
    if lease_live is None:
        return None
    for entry in entries:
        if entry.kind == "lock" and not (entry.of_this_process() or entry.run_alive() or entry.writer.known_dead()):
            reason = lease_live(entry)
            if reason:
                return reason
    return None


def raise_for_failures(outcomes: Sequence[RevertOutcome]) -> None:
    """One line for what was not reverted (those entries stay open): RevertFailed if a revert failed,
    else UnsafeTarget with each distinct reason for a refusal (a live run, another cluster)."""
    failed = [o for o in outcomes if not o.reverted and not o.refused]
    refused = list(dict.fromkeys(o.error or "refused" for o in outcomes if o.refused))
    if failed:
        details = "; ".join(f"{o.entry.kind} on {o.entry.target}: {o.error}" for o in failed)
        also = f"; also refused: {'; '.join(refused)}" if refused else ""
        raise RevertFailed(f"{len(failed)} of {len(outcomes)} open faults could not be reverted ({details}){also}; "
                           "they stay open in the journal: fix the cause and run `drills revert` again")
    if refused:
        raise UnsafeTarget("; ".join(refused))


def _journals(where: Journal | str | os.PathLike, run_id: str | None) -> list[Journal]:
    if isinstance(where, Journal):
        return [where]
    path = Path(where)
    if path.is_file() or path.name == JOURNAL_NAME:
        return [Journal(path)]
    if run_id is not None:
        return [Journal.for_run(path, run_id)]
    return [Journal(p) for p in find_journals(path)]


def _fsync_dir(directory: Path) -> None:
    """Make the file's directory entry durable too (a new file can vanish on power loss otherwise)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories; the file itself is synced
        pass
    finally:
        os.close(fd)
