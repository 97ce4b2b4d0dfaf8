"""The prefork server (drills/core/prefork.py starts it): import once, then fork a child per request.

    python -m drills.core.prefork_server SOCKET OWNER_PID MODULE... [~PREFIX...]

A request (over the Unix socket, from `prefork.popen_python`) names a module, its arguments, an environment,
a working directory and passes stdin, stdout and stderr as descriptors; the child becomes that process — its
own session if asked, the requester's ignored signals, fresh stdio objects, `python -m MODULE` run as
__main__, an interpreter's exit (threads joined, atexit, stdio flushed) — and the server, its parent, sends
back a pidfd at once and the exit status once it has reaped it. DRILLS_PREFORK_CENSUS (a file) makes it
append a JSON line per child: what it ran, its CPU and wall time (bench/tests_census.py).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import selectors
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from drills.core.prefork import CONNECT_TIMEOUT_S, HEADER

__all__ = ["serve", "CENSUS_ENV"]

CENSUS_ENV = "DRILLS_PREFORK_CENSUS"
PROFILE_ENV = "DRILLS_PREFORK_PROFILE"  # a folder: each child's main thread profiled into it (bench only)


def serve(path: Path, owner: int, preload: Sequence[str]) -> int:
    """Import `preload`, then fork a child per request until the owner has exited (then until no child runs).

    A `~PREFIX` entry forgets the modules named PREFIX or PREFIX.* once everything is imported: what they
    imported stays loaded, and the children import them afresh (pytest plugins, whose asserts pytest rewrites
    only on import; modules run as __main__, which runpy wants unimported).
    """
    _title(sys.executable, "-m", "drills.core.prefork_server", f"(for pid {owner})")
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
            with contextlib.suppress(OSError):  # the folder made for the socket, if nothing else is in it
                path.parent.rmdir()
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
    conn.settimeout(CONNECT_TIMEOUT_S)
    stdio: list[int] = []
    try:
        chunk, stdio, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        size = HEADER.unpack_from(chunk)[0]
        body = chunk[HEADER.size:]
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
    test = (request["env"].get("PYTEST_CURRENT_TEST") or "").split("::")[0]  # the census's file, under pytest
    return pidfd, pid, {"module": request["module"], "args": request["args"][:3], "test": test, "t0": time.monotonic()}


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
    profiler = _profiler()
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
    if profiler is not None:
        _dump(profiler, module)
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



def _profiler():
    """With PROFILE_ENV (a folder) set, the child's main thread runs under cProfile (bench/tests_profile.py)."""
    if not os.environ.get(PROFILE_ENV):
        return None
    import cProfile

    profiler = cProfile.Profile(time.process_time)  # CPU, not wall: what the suite pays for
    profiler.enable()
    return profiler


def _dump(profiler, module: str) -> None:
    profiler.disable()
    kind = "-".join(a for a in sys.argv[1:3] if a.isidentifier()) or "main"
    profiler.dump_stats(os.path.join(os.environ[PROFILE_ENV], f"{module}-{kind}-{os.getpid()}.prof"))


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))

