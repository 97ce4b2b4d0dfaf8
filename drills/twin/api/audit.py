"""The audit log: one record per mutating API request, in the state dir and over HTTP; on the HTTPS
listener, one per API request (reads too), with `user` and the authorizer's `annotations`
(`authorization.k8s.io/decision`: allow|forbid, `authorization.k8s.io/reason`), as a real API server's
audit policy at Metadata level records them.

Drills prove a dry run mutates nothing by reading it: a dry-run request is recorded with
`dryRun: true`, everything else that writes is recorded as it is.

The twin's own writes under `/twin/v1` are recorded too, with `group: "twin.gpu-drills.io"` and the
resource, name and subresource read from the path (`POST /twin/v1/nodes/n1/gpu` → nodes/gpu n1): the
fault endpoints (node `gpu`, node `kubelet`, pod `exit`) are faults like a cordon, and `load` creates
objects. Log appends (`POST /twin/v1/namespaces/{ns}/pods/{name}/log`) are not recorded: they are the
simulated containers' stdout, written by the training workload and the kubelet several times a second,
and change no object, so they would drown the writes the log exists to show.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections import deque
from pathlib import Path

from drills.core.clock import Clock, to_iso

__all__ = ["AuditLog", "MUTATING_METHODS", "TWIN_GROUP", "TWIN_PREFIX", "twin_target"]

log = logging.getLogger(__name__)

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TWIN_GROUP = "twin.gpu-drills.io"
TWIN_PREFIX = "/twin/v1/"
_UNAUDITED_TWIN = frozenset({("pods", "log")})  # (resource, subresource) of twin writes left out (see above)


def twin_target(path: str) -> dict | None:
    """`resource`, `subresource`, `namespace`, `name` of a `/twin/v1/[namespaces/{ns}/]{resource}[/{name}[/{sub}]]`
    write, or None when that endpoint is not audited."""
    parts = [p for p in path[len(TWIN_PREFIX):].split("/") if p] if path.startswith(TWIN_PREFIX) else []
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    resource = parts[0] if parts else path
    subresource = "/".join(parts[2:]) or None
    if (resource, subresource) in _UNAUDITED_TWIN:
        return None
    return {"resource": resource, "subresource": subresource, "namespace": namespace,
            "name": parts[1] if len(parts) > 1 else None}
_KEEP = 200_000  # records kept in memory for GET /twin/v1/audit
_BLOCK = 1_000  # records compressed together once complete (JSON lines of one twin compress about tenfold)


class AuditLog:
    """Append-only records; written line by line to `path` (JSONL) when given."""

    def __init__(self, clock: Clock, path: Path | None = None):
        self.clock = clock
        self.path = path
        # The newest records as JSON lines (a line is a third of the dict it encodes), older ones in compressed
        # blocks of _BLOCK lines, (first seq, zlib of the lines): 200,000 lines are 100 MB, their blocks 10 MB
        self._lines: list[str] = []
        self._blocks: deque[tuple[int, bytes]] = deque(maxlen=_KEEP // _BLOCK)
        self._seq = 0
        self._fh = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "w", encoding="utf-8", buffering=1)  # one file per twin run

    def record(self, *, verb: str, group: str, resource: str, subresource: str | None, namespace: str | None,
               name: str | None, user_agent: str, code: int, dry_run: bool, method: str, path: str,
               user: dict | None = None, annotations: dict | None = None) -> dict:
        self._seq += 1
        twin_now = self.clock.timestamp()
        rec = {
            "seq": self._seq,
            "twinTime": twin_now,
            "twinTimeIso": to_iso(twin_now),
            "wallTime": time.time(),
            "verb": verb,
            "group": group,
            "resource": resource,
            "subresource": subresource or "",
            "namespace": namespace or "",
            "name": name or "",
            "userAgent": user_agent,
            "code": code,
            "dryRun": dry_run,
            "method": method,
            "path": path,
        }
        if user is not None:  # a token's user (the HTTPS listener), with the authorizer's decision
            rec["user"] = user
        if annotations:
            rec["annotations"] = annotations
        line = json.dumps(rec, separators=(",", ":"))
        self._lines.append(line)
        if len(self._lines) == _BLOCK:
            self._blocks.append((self._seq - _BLOCK + 1, zlib.compress("\n".join(self._lines).encode(), 1)))
            self._lines = []
        if self._fh is not None:
            self._fh.write(line + "\n")
        return rec

    def records(self, since: int = 0) -> list[dict]:
        """Records with `seq` greater than `since`, oldest first (only those are decoded)."""
        out: list[dict] = []
        for first, block in list(self._blocks):
            if first + _BLOCK - 1 > since:
                lines = zlib.decompress(block).decode().split("\n")
                out += [json.loads(line) for line in lines[max(0, since + 1 - first):]]
        first = self._seq - len(self._lines) + 1  # seqs are consecutive: the one after `since` is at this index
        out += [json.loads(line) for line in self._lines[max(0, since + 1 - first):]]
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
