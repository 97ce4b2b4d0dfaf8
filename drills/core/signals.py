"""Signal-safe critical sections that hold with threads (DESIGN §6).

`pthread_sigmask` in the main thread is not enough once threads exist: the kernel delivers SIGINT to
any thread that does not block it, and CPython then runs the Python-level handler in the main thread
at its next bytecode — the default one raises KeyboardInterrupt inside the "blocked" region. So a
critical section replaces the Python-level handlers of SIGINT and SIGTERM with one that only records
the signal, and once the outermost section ends hands what arrived to the handler that was in place
before it (the first signal wins; a second one while the section runs is recorded, not lost): the
default handler raises KeyboardInterrupt, `stop_on_signal`'s raises only for the run's first signal.
Sections nest. Outside the main thread a section is a no-op: handlers run in the main thread only,
which is the one that may be interrupted.

`stop_on_signal()` is a run's own handler: the first SIGINT/SIGTERM raises KeyboardInterrupt (pytest
stops and tears down); every later one is recorded and announced, never raised, so the teardown that
follows — reverts, the run lock's release, the records, the twin's stop — runs to its end.

`interrupt_caused(err)`: a KeyboardInterrupt Python wrapped on its way up (3.11 turns one raised inside an
import's class body into `RuntimeError: Error calling __set_name__ …`): still an interrupt, exit 130.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Iterator

__all__ = ["deferred_signals", "pending_signal", "stop_on_signal", "interrupt_caused", "Interrupts", "DEFERRED"]

log = logging.getLogger(__name__)

DEFERRED = (signal.SIGINT, signal.SIGTERM)

_state = threading.local()
_pending: list[int] = []  # signals received inside the outermost section, main thread only
_depth = [0]


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Run the block to its end whatever SIGINT/SIGTERM arrive; then hand them to the previous handler."""
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
        if received:  # also when the block raised: a KeyboardInterrupt then wins over its error
            log.info("signal %s arrived during a critical section, handled now that it is done",
                        signal.Signals(received[0]).name)
            _dispatch(received, previous)


def pending_signal() -> int | None:
    """The first signal recorded by the current section (None outside one, or if none arrived)."""
    return _pending[0] if _pending else None


class Interrupts:
    """What `stop_on_signal` saw: the signals received, in order (the first one stopped the run)."""

    def __init__(self) -> None:
        self.received: list[int] = []

    @property
    def stopping(self) -> bool:
        return bool(self.received)

    @property
    def first(self) -> str | None:
        return signal.Signals(self.received[0]).name if self.received else None

    def handle(self, signum: int, frame) -> None:  # noqa: ARG002 — the signal module's handler signature
        self.received.append(signum)
        if len(self.received) == 1:
            raise KeyboardInterrupt(f"signal {signum}")
        # os.write, not print: a handler that prints while the main thread is printing raises a reentrant-call error
        os.write(2, f"drills: {signal.Signals(signum).name} again: already stopping, every fault is being "
                    f"reverted and the run lock released (SIGKILL, then `drills revert`, if it hangs)\n".encode())


@contextlib.contextmanager
def stop_on_signal() -> Iterator[Interrupts]:
    """The first SIGINT/SIGTERM raises KeyboardInterrupt; later ones are only recorded (teardown finishes).

    A signal the process inherited as ignored stays ignored (a background job of a shell ignores SIGINT).
    Main thread only; elsewhere it records nothing and installs nothing.
    """
    state = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = {sig: signal.getsignal(sig) for sig in DEFERRED}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, state.handle)
    try:
        yield state
    finally:
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, handler)


def interrupt_caused(err: BaseException) -> bool:
    """A Ctrl-C that Python wrapped on its way up: 3.11 turns a KeyboardInterrupt raised inside a class body's
    `__set_name__` (the signal landed in an import, e.g. numpy's) into `RuntimeError` from it. Only the
    explicit cause counts: an error raised while handling an interrupt (its context) is an error of its own."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__
    return False


def _dispatch(received: list[int], handlers: dict) -> None:
    """Hand each recorded signal to `handlers` (those before the section); re-raise the first exception after."""
    raised: BaseException | None = None
    for sig in received:
        handler = handlers.get(sig)
        try:
            if handler is signal.SIG_IGN:
                continue
            if callable(handler) and handler is not signal.default_int_handler:
                handler(sig, None)
            else:  # the default disposition (or Python's own SIGINT handler): stop the run as Ctrl-C does
                raise KeyboardInterrupt(f"signal {sig}")
        except BaseException as err:  # noqa: BLE001 — re-raised below, once every signal was handed on
            raised = raised or err
    if raised is not None:
        raise raised


def _record(signum: int, frame) -> None:  # noqa: ARG001 — the signal module's handler signature
    _pending.append(signum)
