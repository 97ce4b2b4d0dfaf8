"""Signal-safe critical sections that hold with threads (DESIGN §6).

`pthread_sigmask` in the main thread is not enough once threads exist: the kernel delivers SIGINT to
any thread that does not block it, and CPython then runs the Python-level handler in the main thread
at its next bytecode — the default one raises KeyboardInterrupt inside the "blocked" region. So a
critical section replaces the Python-level handlers of SIGINT and SIGTERM with one that only records
the signal, and raises KeyboardInterrupt once the outermost section ends (the first signal wins; a
second one while the section runs is recorded, not lost). Sections nest. Outside the main thread a
section is a no-op: handlers run in the main thread only, which is the one that may be interrupted.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Iterator

__all__ = ["deferred_signals", "pending_signal", "DEFERRED"]

log = logging.getLogger(__name__)

DEFERRED = (signal.SIGINT, signal.SIGTERM)

_state = threading.local()
_pending: list[int] = []  # signals received inside the outermost section, main thread only
_depth = [0]


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Run the block to its end whatever SIGINT/SIGTERM arrive; raise KeyboardInterrupt after it if any did."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth[0]:
        _depth[0] += 1
        try:
            yield
        finally:
            _depth[0] -= 1
        return
    previous = {sig: signal.getsignal(sig) for sig in DEFERRED}
    for sig in DEFERRED:
        signal.signal(sig, _record)
    _depth[0] = 1
    _pending.clear()
    try:
        yield
    finally:
        _depth[0] = 0
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        received = list(_pending)
        _pending.clear()
    if received:
        log.warning("signal %s arrived during a critical section; stopping now that it is done",
                    signal.Signals(received[0]).name)
        raise KeyboardInterrupt(f"signal {received[0]}")


def pending_signal() -> int | None:
    """The first signal recorded by the current section (None outside one, or if none arrived)."""
    return _pending[0] if _pending else None


def _record(signum: int, frame) -> None:  # noqa: ARG001 — the signal module's handler signature
    _pending.append(signum)
