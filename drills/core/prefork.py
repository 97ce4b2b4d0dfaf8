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

    python -m drills.core.prefork SOCKET OWNER_PID MODULE...   # the server (started by PreforkServer.start)
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

__all__ = ["ENV", "PreforkServer", "PreforkedProcess", "popen_python"]

log = logging.getLogger(__name__)

ENV = "DRILLS_PREFORK"  # the server's socket path, inherited by the processes that may fork from it
CENSUS_ENV = "DRILLS_PREFORK_CENSUS"  # a file: the server appends one JSON line per child it reaped (bench/)
_HEADER = struct.Struct("!I")
_CONNECT_TIMEOUT_S = 5.0


class PreforkServer:
    """A running server (started by `start`): `.socket`, `.stop()`; a context manager."""

    def __init__(self, proc: subprocess.Popen, path: Path):
        self.proc, self.socket = proc, path

    @classmethod
    def start(cls, preload: Sequence[str], cwd: str | Path | None = None, timeout: float = 60.0) -> "PreforkServer":
        """Start a server that imports `preload` (module names) and is ready once its socket exists."""
        folder = Path(tempfile.mkdtemp(prefix="drills-prefork-"))
        path = folder / "sock"
        argv = [sys.executable, "-m", "drills.core.prefork", str(path), str(os.getpid()), *preload]
        env = {k: v for k, v in os.environ.items() if k != ENV}
        # In this process's group, as the processes it forks would have been: a terminal's Ctrl-C reaches those
        # that do not ask for a session of their own (the server itself ignores it).
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the prefork server did not start (exit code {proc.poll()})")
            time.sleep(0.02)
        return cls(proc, path)

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
            conn.settimeout(_CONNECT_TIMEOUT_S)
            conn.connect(str(path))
            socket.send_fds(conn, [_HEADER.pack(len(body)) + body], fds)
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


# ---- the server ------------------------------------------------------------------------------------------

def serve(path: Path, owner: int, preload: Sequence[str]) -> int:
    """Import `preload`, then fork a child per request until the owner has exited (then until no child runs).

    A `~PREFIX` entry forgets the modules named PREFIX or PREFIX.* once everything is imported: what they
    imported stays loaded, and the children import them afresh (pytest plugins, whose asserts pytest rewrites
    only on import; modules run as __main__, which runpy wants unimported).
    """
    _title(sys.executable, "-m", "drills.core.prefork", f"(a prefork server for pid {owner})")
    for name in preload:
        if not name.startswith("~"):
            importlib.import_module(name)
    for prefix in (name[1:] for name in preload if name.startswith("~")):
        for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
                delattr(sys.modules[parent], child)
    import gc

    gc.collect()
    gc.freeze()  # the imports stay shared with the children instead of being copied by their collections
    owner_fd = os.pidfd_open(owner)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_suffix(".tmp")
    listener.bind(str(tmp))
    listener.listen(64)
    os.replace(tmp, path)  # ready
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(owner_fd, selectors.EVENT_READ, "owner")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the children
    children: dict[int, tuple[int, socket.socket, dict]] = {}  # pidfd -> (pid, connection, what it runs)
    census = os.environ.get(CENSUS_ENV)
    accepting = True
    while accepting or children:
        if stopping and accepting or (accepting and _gone(owner_fd)):
            accepting = False
            sel.unregister(listener)
            sel.unregister(owner_fd)
            listener.close()
            path.unlink(missing_ok=True)
            continue
        for key, _ in sel.select(0.5):
            if key.data == "accept" and accepting:
                conn, _ = listener.accept()
                forked = _fork_one(conn, [listener, sel, *[c for _, c, _ in children.values()]],
                                   [owner_fd, *children])
                if forked is None:
                    conn.close()
                else:
                    pidfd, pid, what = forked
                    children[pidfd] = (pid, conn, what)
                    sel.register(pidfd, selectors.EVENT_READ, "child")
            elif key.data == "child":
                pid, conn, what = children.pop(key.fd)
                sel.unregister(key.fd)
                _, status, usage = os.wait4(pid, 0)
                os.close(key.fd)
                if census:
                    _count(census, what, usage)
                try:
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                except OSError:  # the requester has gone: nothing to tell
                    pass
                conn.close()
    return 0


def _gone(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _count(path: str, what: dict, usage) -> None:
    """One census line: what the child ran, its CPU (and its reaped descendants'), its wall time."""
    line = dict(what, cpu_s=round(usage.ru_utime + usage.ru_stime, 3), wall_s=round(time.monotonic() - what["t0"], 3))
    del line["t0"]
    with open(path, "a") as fh:
        fh.write(json.dumps(line) + "\n")


def _fork_one(conn: socket.socket, objects: list, fds: list[int]) -> tuple[int, int, dict] | None:
    """Read one request and fork its child; (pidfd, pid, what it runs), or None for a request that could not
    be read."""
    conn.settimeout(_CONNECT_TIMEOUT_S)
    stdio: list[int] = []
    try:
        chunk, stdio, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        size = _HEADER.unpack_from(chunk)[0]
        body = chunk[_HEADER.size:]
        while len(body) < size:
            more = conn.recv(size - len(body))
            if not more:
                raise ValueError("the request ended early")
            body += more
        request = json.loads(body)
        if len(stdio) != 3:
            raise ValueError("a request passes stdin, stdout and stderr")
    except (OSError, ValueError, struct.error):
        for fd in stdio:
            os.close(fd)
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    # A signal sent the instant the pid is known must act as on a fresh interpreter, not meet this server's
    # handlers: blocked across the fork, the child unblocks it once its own dispositions are set.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        _child(request, stdio, [conn, *objects], fds, mask)  # never returns
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for fd in stdio:
        os.close(fd)
    pidfd = os.pidfd_open(pid)  # before anyone can reap it: we are its parent
    socket.send_fds(conn, [json.dumps({"pid": pid}).encode() + b"\n"], [pidfd])
    conn.settimeout(None)
    return pidfd, pid, {"module": request["module"], "args": request["args"][:3], "t0": time.monotonic()}


def _child(request: dict, stdio: list[int], objects: list, fds: list[int], mask) -> None:
    """In the forked child: become the requested process, run the module as __main__, exit with its code."""
    code = 1
    try:
        for obj in objects:
            obj.close()
        for fd in fds:
            os.close(fd)
        if request["new_session"]:
            os.setsid()
        for target, fd in enumerate(stdio):
            if fd != target:
                os.dup2(fd, target)
        for fd in set(stdio) - {0, 1, 2}:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a fresh interpreter's dispositions
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for sig in request["ignore"]:
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that came meanwhile acts now
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        tempfile.tempdir = None  # TMPDIR as the request's environment says
        _fresh_stdio(bool(request["env"].get("PYTHONUNBUFFERED")))
        sys.path[0] = request["cwd"]  # as `python -m` puts the working directory first
        sys.argv = [request["module"], *request["args"]]
        _title(sys.executable, "-m", request["module"], *request["args"])  # what ps shows for a fresh one
        code = _run_main(request["module"])
    except BaseException:  # noqa: BLE001 - reported on the child's stderr, like an interpreter would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _title(*argv: str) -> None:
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    setproctitle(" ".join(argv))


def _fresh_stdio(unbuffered: bool) -> None:
    import io

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        mode = "rb" if fd == 0 else "wb"
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = raw if unbuffered and fd else (io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw))
        errors = "backslashreplace" if fd == 2 else "strict"
        stream = io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, line_buffering=fd == 2 or raw.isatty(),
                                  write_through=unbuffered and fd != 0)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_main(module: str) -> int:
    """The module as __main__, then what an interpreter does at exit (threads joined, atexit, stdio flushed)."""
    import atexit
    import runpy
    import threading

    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = -1
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at interpreter exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == -1:  # an uncaught KeyboardInterrupt: die of SIGINT, as Python does
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    return code


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))
