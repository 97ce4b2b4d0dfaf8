"""NCCL failures as the other stacks report them, and NCCL WARNs that NCCL itself returned as errors (a part of
`NcclReading`).

- **XLA** (JAX, TensorFlow with XLA) prints no PyTorch exception: a failed NCCL call is its own line,
  `INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, id, rank)
  failed: unhandled system error …`, or with a glog prefix `E0912 … pjrt_stream_executor_client.cc:3008] Execution of
  replica 0 failed: INTERNAL: NCCL operation ncclAllReduce( … ) failed: invalid argument …`. One failure is
  repeated per replica and thread (`Intercepted XLA runtime error` + `Execution of replica N failed`): one error per
  call and reason.
- **A propagated WARN**: most NCCL WARNs are notes (`Could not find real path of rxe0`, `Failed to open
  libibverbs.so`) and NCCL goes on. When the same thread's next lines are the `file:line -> N` return-code cascade,
  NCCL returned the failure up (`graph/xml.cc:332 NCCL WARN Could not find real path …` then `graph/xml.cc:469 -> 2`
  … `init.cc:540 -> 2`): the WARN is the root cause of a failed NCCL call. A WARN a thread prints while it is
  already returning an error (`Error while creating shared memory segment` after `Call to posix_fallocate failed`'s
  cascade, `Socket recv failed while polling` after `socket.cc:46 -> 3`) is a consequence; the same WARN from several
  processes is one error.
"""

from __future__ import annotations

import re

from drills.measure.logprefix import Record

__all__ = ["xla_nccl_failure", "PropagatedWarns"]

# `NCCL operation <call>(<args>) failed: <reason>` — the args may hold parentheses and commas
_XLA_NCCL = re.compile(r"NCCL operation (?P<op>\w+)\(.*?\) failed: (?P<reason>.+?)(?: \(run with NCCL_DEBUG|\. Last NCCL|;|$)")
# a return-code cascade line: `graph/xml.cc:469 -> 2`, `transport.cc:163 -> 3 [Proxy Thread]`
_CASCADE = re.compile(r"^\S+:\d+ -> \d+\b")
# a proxy-service failure is judged at the end of the stream (`NcclReading._unexplained_proxy_failure`)
_PROXY_FAILED = re.compile(r"\[Proxy Service \d+\] Failed to execute operation")


def xla_nccl_failure(body: str) -> tuple[str, str] | None:
    """(call, reason) of an XLA `NCCL operation <call>(…) failed: <reason>` report, else None."""
    m = _XLA_NCCL.search(body)
    return (m.group("op"), m.group("reason").strip().rstrip(".")) if m else None


class PropagatedWarns:
    """Per NCCL thread: the last unclassified WARN, until the thread's next line shows whether NCCL returned it."""

    def __init__(self) -> None:
        self._pending: dict[tuple, Record] = {}
        self._failed: set[tuple] = set()  # threads inside the cascade of an error already counted

    def feed(self, rec: Record, classified: bool) -> Record | None:
        """The WARN record that turned out to be a returned error, when `rec` (the thread's next line) shows it."""
        if rec.nccl is None or rec.host is None or rec.tid is None:
            return None
        key = (rec.host, rec.pid, rec.tid)
        if rec.nccl == "WARN":
            if classified or key in self._failed:
                self._failed.add(key)
                self._pending.pop(key, None)
            elif not _PROXY_FAILED.search(rec.body):
                self._pending[key] = rec
            return None
        if _CASCADE.match(rec.body):  # the thread is returning an error: a WARN it prints next is a consequence
            self._failed.add(key)
            return self._pending.pop(key, None)
        self._pending.pop(key, None)  # the thread went on: the WARN was a note
        self._failed.discard(key)
        return None
