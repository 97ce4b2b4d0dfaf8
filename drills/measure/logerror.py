"""One classified error of a log (`LogReader`): its kind and the typed fields the message carried.

Its own module so that every reader (NCCL, GPU, elastic agent, tracebacks) builds the same record; re-exported by
`drills.measure.lognccl`, where it was born.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["LogError"]


@dataclass
class LogError:
    """One classified error; fields the message does not carry are None."""

    kind: str  # ib_completion | watchdog_timeout | heartbeat_timeout | comm_aborted | dist_backend | socket_closed |
    #            nccl_error | traceback | worker_exit (`logelastic`) | gpu_error (`loggpu`)
    text: str
    at: datetime | None = None
    host: str | None = None
    rank: int | None = None
    seq: int | None = None
    op_type: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    status: int | None = None  # IB completion status / error
    vendor_err: int | None = None
    peer: str | None = None
    exitcode: int | None = None  # worker_exit: the dead worker's exit code (negative: killed by that signal)
    local_rank: int | None = None  # worker_exit
    pid: int | None = None  # worker_exit
    signal: str | None = None  # worker_exit: `SIGABRT` when the agent names it
    frames: tuple[str, ...] = ()  # traceback: function names, outermost first
    exception: str | None = None  # traceback: the exception line, when printed

    @property
    def detail(self) -> str:
        if self.kind == "worker_exit":
            if self.exitcode is None and self.pid is None:  # the agent said its group failed, not which worker
                return self.text
            if self.exitcode is None:  # a death another program reported (Ray's raylet, the kernel's OOM killer)
                return f"pid {self.pid}{f' ({self.signal})' if self.signal else ''}: {self.text[:240]}"
            who = f"rank {self.rank}" if self.rank is not None else f"local_rank {self.local_rank}"
            return (f"{who} exitcode {self.exitcode}{f' ({self.signal})' if self.signal else ''} pid {self.pid}"
                    f"{f' on {self.host}' if self.host else ''}")
        if self.kind == "traceback":
            return self.exception or f"traceback through {' -> '.join(self.frames[-3:]) or '?'} (exception line not in the log)"
        return self.text
