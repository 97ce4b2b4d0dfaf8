"""Start a twin as a subprocess (tests, `drills run`) and wait until it is ready; stop a running one.

Ready means `STATE_DIR/twin.json` exists and names the child's pid (the runtime writes it last).
`stop_running_twin` (`drills twin down`) stops a twin another process started, found by its state dir.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterable

from drills.core.errors import DrillError
from drills.core.prefork import popen_python

__all__ = ["TwinHandle", "start_twin", "read_twin_info", "stop_running_twin", "TWIN_JSON"]

log = logging.getLogger(__name__)

TWIN_JSON = "twin.json"  # written last by the runtime: its presence means "ready" (kept light: no server imports)


class TwinHandle:
    """A running twin subprocess (Popen or PreforkedProcess): `.url`, `.kubeconfig`, `.info` (twin.json), `.stop()`;
    a context manager."""

    def __init__(self, proc, state_dir: Path, info: dict, stderr_path: Path):
        self.proc = proc
        self.state_dir = state_dir
        self.info = info
        self.stderr_path = stderr_path

    @property
    def url(self) -> str:
        return self.info["url"]

    @property
    def kubeconfig(self) -> str:
        return self.info["kubeconfig"]

    @property
    def scale(self) -> float:
        return float(self.info["scale"])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code. Idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("twin pid %s ignored SIGTERM for %.0fs: killing it", self.proc.pid, timeout)
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def stderr_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> "TwinHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:  # short: fixtures' reprs end up in reports
        return f"TwinHandle({self.url}, pid={self.proc.pid})"


def start_twin(state_dir: str | Path, profile: str = "minimal", defects: Iterable[str] = (),
               scale: float | None = None, port: int = 0, timeout: float = 30.0,
               extra_args: Iterable[str] = (), tls: bool = False) -> TwinHandle:
    """Run `drills twin up` in a child process and return once it is ready (DrillError if it dies or stalls).

    `tls`: also serve HTTPS with a service-account token (`handle.info["tls"]`: url, ca, serviceaccount_dir).
    """
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    (state / TWIN_JSON).unlink(missing_ok=True)
    argv = ["twin", "up", "--profile", str(profile), "--port", str(port),
            "--state-dir", str(state), "--parent-pid", str(os.getpid())]
    if scale is not None:
        argv += ["--scale", str(scale)]
    for name in defects:
        argv += ["--defect", name]
    if tls:
        argv.append("--tls")
    argv += list(extra_args)
    stderr_path = state / "twin.stderr.log"
    with open(stderr_path, "wb") as err, open(state / "twin.stdout.log", "wb") as out:
        proc = popen_python("drills.cli", argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), new_session=True)
    handle = TwinHandle(proc, state, {}, stderr_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DrillError(f"the twin (profile {profile}) exited with code {proc.returncode} while starting: "
                             f"{_last_line(handle.stderr_tail())} (its stderr: {stderr_path})")
        info = read_twin_info(state)
        if info and info.get("pid") == proc.pid:
            handle.info = info
            log.info("twin ready at %s (pid %s)", info["url"], proc.pid)
            return handle
        time.sleep(0.05)
    handle.stop()
    raise DrillError(f"the twin (profile {profile}) was not ready after {timeout:.0f}s: "
                     f"{_last_line(handle.stderr_tail()) or 'no error printed'} (its stderr: {stderr_path})")


def read_twin_info(state_dir: str | Path) -> dict | None:
    """twin.json of a running twin, or None when there is none (or it is being written)."""
    try:
        return json.loads((Path(state_dir) / TWIN_JSON).read_text())
    except (OSError, ValueError):
        return None

def stop_running_twin(state_dir: str | Path, timeout: float = 30.0) -> dict:
    """SIGTERM the twin whose twin.json is in `state_dir` and wait until it has exited; its twin.json.

    The process is held by a pidfd and checked against twin.json's identity (pid, host, start time)
    before the signal, so a pid reused after the twin died is never signalled. DrillError (one line)
    when no twin runs there or it does not stop within `timeout` seconds.
    """
    from drills.core.liveness import ProcessIdentity

    state = Path(state_dir)
    info = read_twin_info(state)
    if info is None:
        raise DrillError(f"no running twin in {state} (no {TWIN_JSON}): nothing to stop; `drills twin up` prints "
                         "the state dir of the twin it starts")
    ident = ProcessIdentity.from_dict({"host": socket.gethostname(), **info})
    try:
        pidfd = os.pidfd_open(int(info["pid"]))
    except (ProcessLookupError, KeyError, TypeError, ValueError):
        pidfd = None
    try:
        if pidfd is None or not ident.alive():
            raise DrillError(f"the twin recorded in {state / TWIN_JSON} (pid {info.get('pid')}) is not running any "
                             f"more: nothing to stop; remove {state} once its audit log is no longer needed")
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        exited, _, _ = select.select([pidfd], [], [], timeout)  # readable once the process has exited
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if not exited:
        raise DrillError(f"the twin at {info.get('url')} (pid {info['pid']}) did not stop within {timeout:g}s of "
                         f"SIGTERM: look at it (`ps {info['pid']}`), then stop it with `kill -KILL {info['pid']}`")
    return info



def _last_line(text: str) -> str:
    """The last non-empty line of a child's stderr: the error of a Python traceback, or its own one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
