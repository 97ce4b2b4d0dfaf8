"""Start our own Python processes by forking a server that has already imported what they need.

A drill run starts a twin per scenario and a lane per parallel slot, and the test suite starts a `drills`
command per test: each fresh interpreter spent ≈ 1 s of CPU importing the same modules before doing anything
(pytest, the kubernetes client, the twin's API, matplotlib). A prefork server imports them once, then forks
a child per request. The child is a process of its own — its own pid, session, signal dispositions, stdio,
environment and working directory — that runs `python -m MODULE ARGS` from the point the imports end; it
sees exactly what a fresh `python -m` would, except that the preloaded modules are already in sys.modules.

    server = PreforkServer.start(PRELOAD)        # exits once this process has and its children have ended
    proc = popen_python("drills.cli", ["twin", "up", ...], stdout=fh, stderr=fh)   # Popen-like
    proc.pid, proc.poll(), proc.wait(timeout), proc.send_signal(sig), proc.kill(), proc.returncode

`popen_python` forks from the server named by DRILLS_PREFORK (the server's socket) when one is set and
answers, and otherwise runs a fresh interpreter (subprocess.Popen): same argv, same behaviour. Signals reach
a forked child through a pidfd the server sends with its pid, so a recycled pid is never signalled; its exit
status comes back from the server, which is its parent and reaps it.

The server itself (what it imports, how a child becomes its process) is drills/core/prefork_server.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

__all__ = ["ENV", "HEADER", "CONNECT_TIMEOUT_S", "PreforkServer", "PreforkedProcess", "popen_python",
           "server_in_environment", "wait_ready"]

log = logging.getLogger(__name__)

ENV = "DRILLS_PREFORK"  # the server's socket path, inherited by the processes that may fork from it
HEADER = struct.Struct("!I")  # a request: its JSON body's length, then the body
CONNECT_TIMEOUT_S = 5.0


class PreforkServer:
    """A running server (started by `start`): `.socket`, `.stop()`; a context manager."""

    def __init__(self, proc: subprocess.Popen, path: Path):
        self.proc, self.socket = proc, path

    @classmethod
    def start(cls, preload: Sequence[str], cwd: str | Path | None = None, timeout: float = 60.0) -> "PreforkServer":
        """Start a server that imports `preload` (module names) and is ready once its socket exists."""
        server = cls.launch(preload, cwd=cwd)
        if not wait_ready(server.socket, timeout, server.proc):
            server.proc.kill()
            raise RuntimeError(f"the prefork server did not start (exit code {server.proc.poll()})")
        return server

    @classmethod
    def launch(cls, preload: Sequence[str], cwd: str | Path | None = None) -> "PreforkServer":
        """Start a server without waiting for its imports: its socket appears once it is ready (`wait_ready`)."""
        folder = Path(tempfile.mkdtemp(prefix="drills-prefork-"))
        path = folder / "sock"
        argv = [sys.executable, "-m", "drills.core.prefork_server", str(path), str(os.getpid()), *preload]
        env = {k: v for k, v in os.environ.items() if k != ENV}
        # In this process's group, as the processes it forks would have been: a terminal's Ctrl-C reaches those
        # that do not ask for a session of their own (the server itself ignores it).
        return cls(subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL), path)

    def stop(self, timeout: float = 10.0) -> None:
        """No more forks; the server exits once its running children have (it stays their parent)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.socket.unlink(missing_ok=True)
        try:
            self.socket.parent.rmdir()
        except OSError:
            pass

    def __enter__(self) -> "PreforkServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class PreforkedProcess:
    """A child forked by the server, with the subset of subprocess.Popen's interface we use."""

    def __init__(self, conn: socket.socket, pid: int, pidfd: int, args: list[str], pipes: dict):
        self._conn: socket.socket | None = conn
        self.pid, self._pidfd, self.args = pid, pidfd, args
        self.stdin, self.stdout, self.stderr = None, pipes.get(1), pipes.get(2)  # subprocess.PIPE: binary readers
        self.returncode: int | None = None
        self._buf = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._collect(left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:  # exited; the server reports its status
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _collect(self, timeout: float | None) -> None:
        """Read the server's status line (sent once it has reaped the child) if it comes within `timeout`."""
        if self._conn is None:  # the server went away first: the pidfd says when the child ends, not its code
            if select.select([self._pidfd], [], [], timeout)[0]:
                self._done(255)
            return
        if not select.select([self._conn], [], [], timeout)[0]:
            return
        chunk = self._conn.recv(4096)
        self._buf += chunk
        if b"\n" in self._buf:
            self._done(os.waitstatus_to_exitcode(json.loads(self._buf.split(b"\n")[0])["status"]))
        elif not chunk:
            self._conn.close()
            self._conn = None

    def _done(self, code: int) -> None:
        self.returncode = code
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        os.close(self._pidfd)

    def __repr__(self) -> str:
        return f"PreforkedProcess(pid={self.pid}, returncode={self.returncode})"


def wait_ready(path: Path, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    """Whether the server's socket exists within `timeout` seconds (False at once if `proc`, the server, ended)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@contextlib.contextmanager
def server_in_environment(preload: Sequence[str], cwd: str | Path | None = None) -> Iterator[None]:
    """A server for what this process starts while the block runs (named in DRILLS_PREFORK), stopped after it.
    A server already named there (the test suite's, which may still be importing: waited for) is used as it is;
    none starting means fresh interpreters."""
    if os.environ.get(ENV):
        wait_ready(Path(os.environ[ENV]), 60.0)
        yield
        return
    try:
        server = PreforkServer.start(preload, cwd=cwd)
    except (OSError, RuntimeError) as err:
        log.debug("no prefork server (%s): fresh interpreters instead", err)
        yield
        return
    os.environ[ENV] = str(server.socket)
    try:
        yield
    finally:
        del os.environ[ENV]
        server.stop()


def popen_python(module: str, args: Sequence[str], *, env: dict | None = None, cwd: str | Path | None = None,
                 stdin=subprocess.DEVNULL, stdout=None, stderr=None,
                 new_session: bool = False, default_signals: bool = False):
    """`python -m MODULE ARGS`: forked from the DRILLS_PREFORK server when there is one, else a fresh interpreter.

    stdin/stdout/stderr: a file object, an fd, subprocess.DEVNULL or None (inherit). `default_signals`: SIGINT
    and SIGTERM at their defaults in the child even if this process ignores them.
    """
    env = dict(os.environ if env is None else env)
    path = env.get(ENV)
    if path:
        try:
            return _fork_from(Path(path), module, list(args), env, cwd, (stdin, stdout, stderr), new_session,
                              default_signals)
        except OSError as err:
            log.debug("prefork server %s unavailable (%s): a fresh interpreter instead", path, err)
    preexec = _default_signals if default_signals else None
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=cwd, stdin=stdin, stdout=stdout,
                            stderr=stderr, start_new_session=new_session, preexec_fn=preexec)


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _fork_from(path: Path, module: str, args: list[str], env: dict, cwd, stdio, new_session: bool,
               default_signals: bool) -> PreforkedProcess:
    fds, opened, pipes = [], [], {}
    try:
        for i, item in enumerate(stdio):
            if item is None:
                fds.append(i)
            elif item == subprocess.PIPE and i:
                read, write = os.pipe()
                pipes[i] = open(read, "rb")
                opened.append(write)
                fds.append(write)
            elif item == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                opened.append(fd)
                fds.append(fd)
            elif isinstance(item, int):
                fds.append(item)
            else:
                fds.append(item.fileno())
        inherited = {int(sig): signal.getsignal(sig) is signal.SIG_IGN for sig in (signal.SIGINT, signal.SIGTERM)}
        request = {"module": module, "args": args, "env": env, "cwd": str(Path(cwd or os.getcwd()).resolve()),
                   "new_session": new_session,
                   "ignore": [] if default_signals else [sig for sig, ignored in inherited.items() if ignored]}
        body = json.dumps(request).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(CONNECT_TIMEOUT_S)
            conn.connect(str(path))
            socket.send_fds(conn, [HEADER.pack(len(body)) + body], fds)
            line, pidfds = _recv_line_and_fds(conn)
            conn.settimeout(None)
            pid = json.loads(line)["pid"]
            if not pidfds:
                raise OSError(f"the prefork server could not start {module}: {line!r}")
        except BaseException:
            conn.close()
            for reader in pipes.values():
                reader.close()
            raise
        return PreforkedProcess(conn, pid, pidfds[0], [module, *args], pipes)
    finally:
        for fd in opened:
            os.close(fd)


def _recv_line_and_fds(conn: socket.socket) -> tuple[bytes, list[int]]:
    data, fds = b"", []
    while b"\n" not in data:
        chunk, got, _, _ = socket.recv_fds(conn, 4096, 1)
        if not chunk:
            raise OSError("the prefork server closed the connection")
        data, fds = data + chunk, fds + got
    return data.split(b"\n")[0], fds
