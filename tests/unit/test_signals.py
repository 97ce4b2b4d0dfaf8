"""drills.core.signals: a SIGINT/SIGTERM during a critical section is held until it ends, even with threads.

Signals go to this very process (the main thread runs Python handlers); each test installs the handlers it
expects, so a run started as a background job (SIGINT inherited as ignored) behaves the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from drills.core.signals import deferred_signals, pending_signal, stop_on_signal


@pytest.fixture
def handlers():
    """SIGINT: Python's default (KeyboardInterrupt); SIGTERM: a handler that records. Restored after the test."""
    seen: list[int] = []
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.fixture
def worker():
    """A live thread that does not block any signal (a watch thread, the lock's renewer)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="watch", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(5)


def _until(condition, timeout: float = 5.0) -> None:
    """Let the main thread run bytecode (where Python handlers run) until `condition()` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the signal never reached its handler")
        time.sleep(0.01)


def test_sigint_sent_to_a_worker_thread_is_raised_only_after_the_section(handlers, worker):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            signal.pthread_kill(worker.ident, signal.SIGINT)
            _until(lambda: pending_signal() is not None)
            time.sleep(0.05)  # more bytecode: a handler that raised would have cut the section here
            done.append("section finished")
    assert done == ["section finished"]


def test_sigterm_sent_to_the_process_reaches_the_previous_handler_after_the_section(handlers, worker):
    with deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        _until(lambda: pending_signal() is not None)
        assert handlers == []  # held
    assert handlers == [signal.SIGTERM]


def test_a_second_signal_is_recorded_and_handed_on_too(handlers, worker):
    with deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        _until(lambda: pending_signal() is not None)
        signal.pthread_kill(worker.ident, signal.SIGTERM)
        time.sleep(0.1)
    assert handlers == [signal.SIGTERM, signal.SIGTERM]


def test_nested_sections_hold_the_signal_until_the_outermost_ends(handlers, worker):
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            with deferred_signals():
                os.kill(os.getpid(), signal.SIGINT)
                _until(lambda: pending_signal() is not None)
            steps.append("inner ended without raising")
            with deferred_signals():
                steps.append("a second inner section")
            steps.append("outer body done")
    assert steps == ["inner ended without raising", "a second inner section", "outer body done"]


def test_the_signal_wins_over_an_error_of_the_section(handlers):
    with pytest.raises(KeyboardInterrupt) as info:
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGINT)
            _until(lambda: pending_signal() is not None)
            raise RuntimeError("revert failed")
    assert isinstance(info.value.__context__, RuntimeError)


def test_outside_the_main_thread_a_section_changes_nothing(handlers):
    seen = {}

    def body():
        with deferred_signals():
            seen["handler"] = signal.getsignal(signal.SIGINT)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(5)
    assert seen["handler"] is signal.default_int_handler


def test_stop_on_signal_raises_once_then_only_records(handlers, worker):
    with stop_on_signal() as interrupts:
        with pytest.raises(KeyboardInterrupt):
            signal.pthread_kill(worker.ident, signal.SIGTERM)
            _until(lambda: False, timeout=5)
        teardown = []
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C while tearing down
        _until(lambda: len(interrupts.received) == 2)
        with deferred_signals():  # a revert section inside a run that is already stopping
            os.kill(os.getpid(), signal.SIGINT)
            _until(lambda: pending_signal() is not None)
        teardown.append("reverted")
        teardown.append("lock released")
    assert teardown == ["reverted", "lock released"]
    assert interrupts.received == [signal.SIGTERM, signal.SIGINT, signal.SIGINT] and interrupts.first == "SIGTERM"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_stop_on_signal_raises_at_the_end_of_a_section_for_the_first_signal(handlers):
    with stop_on_signal() as interrupts:
        steps = []
        with pytest.raises(KeyboardInterrupt):
            with deferred_signals():  # journal + inject
                os.kill(os.getpid(), signal.SIGINT)
                _until(lambda: pending_signal() is not None)
                steps.append("injected and journaled")
        assert steps == ["injected and journaled"] and interrupts.stopping


def test_stop_on_signal_keeps_an_inherited_ignore(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stop_on_signal() as interrupts:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
    assert interrupts.received == []


@contextlib.contextmanager
def _masked():
    """The old approach (fixtures.faults.signals_blocked): block SIGINT/SIGTERM in the main thread only."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_masking_the_main_thread_alone_does_not_hold_once_threads_exist(handlers, worker):
    """Regression demo for issue 11: the worker takes the signal, the main thread raises inside the "blocked" block."""
    reached_end = []
    with pytest.raises(KeyboardInterrupt):
        with _masked():
            signal.pthread_kill(worker.ident, signal.SIGINT)
            _until(lambda: False, timeout=5)  # bytecode runs: the handler fires here, in the middle
            reached_end.append(True)
    assert reached_end == []


def test_a_ctrl_c_python_wrapped_in_an_import_still_reads_as_an_interrupt():
    """Python 3.11 turns a KeyboardInterrupt raised in a class body's `__set_name__` (a Ctrl-C landing in numpy's
    import: 'Error calling __set_name__ on cached_property instance epsneg in finfo') into RuntimeError from it;
    the CLI must still exit 130, not report an unexpected error. An error raised while handling one is its own."""
    from drills.core.signals import interrupt_caused

    class Landing:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt("signal 2")

    try:
        type("Finfo", (), {"epsneg": Landing()})
    except BaseException as err:  # noqa: BLE001 — 3.11: RuntimeError from the interrupt; 3.12+: the interrupt
        wrapped = err
    assert interrupt_caused(wrapped)
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ValueError("teardown failed")
    except ValueError as err:
        assert not interrupt_caused(err)


WRAPPED_IN_A_SCENARIO = '''
class _Raises:
    def __set_name__(self, owner, name):
        raise KeyboardInterrupt  # Ctrl-C arriving while a class body is built (an import in progress)


def test_first():
    class _Import:  # Python 3.11 wraps the interrupt: RuntimeError from __set_name__
        attr = _Raises()


def test_second():
    pass
'''


def test_a_wrapped_ctrl_c_in_a_test_stops_the_session_like_a_bare_one(tmp_path):
    """fixtures/recorder.py: pytest stops on a bare KeyboardInterrupt; the wrapped one must stop it too, so that no
    next scenario injects its fault after the user pressed Ctrl-C (without the hook, test_second runs)."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "test_wrapped.py").write_text(WRAPPED_IN_A_SCENARIO)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fixtures.recorder", "-p", "no:cacheprovider",
                           "-q", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path / "test_wrapped.py")],
                          cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), capture_output=True, text=True,
                          timeout=120)
    out = done.stdout + done.stderr
    assert "Interrupted: interrupted" in out and "1 failed" in out and "passed" not in out, out[-2000:]


def test_an_exec_stream_error_that_wrapped_an_interrupt_is_the_interrupt():
    """A Ctrl-C landing inside a pods/exec stream came back as `exec failed: signal 2`, a reading that failed: a lane
    stopped during its steady-state check ended inconclusive, not interrupted (CI, wave 8). The stream's error raised
    while handling an interrupt (its context) or from one (its cause) is the interrupt, raised again by exec_in_pod;
    an error of its own is still a failed exec."""
    from drills.core.podexec import _interrupted

    def raised(inner: BaseException | None, chain: str) -> OSError:
        try:
            try:
                if inner is not None:
                    raise inner
                raise OSError("connection refused")
            except BaseException as first:
                if inner is None:
                    raise
                if chain == "cause":
                    raise OSError("signal 2") from first
                raise OSError("signal 2")
        except OSError as err:
            return err

    assert _interrupted(raised(KeyboardInterrupt("signal 2"), "context"))
    assert _interrupted(raised(KeyboardInterrupt("signal 2"), "cause"))
    assert not _interrupted(raised(None, ""))
