"""One session with a switch: commands sent in its dialect, over `exec` requests or an interactive
shell (netmiko), and what it answered. Logging in (host keys, credentials, connection failures) is
`drills.faults.switch.login`.

The session knows which host key the switch presented (`host_key`); given `expect_host_key` (the
key recorded when the fault was injected) it refuses, before any command, a switch that now
presents another one: a different device at that address (UnsafeTarget, nothing sent).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import paramiko

from drills.core.errors import DrillError, InjectionFailed, TargetUnreachable, UnsafeTarget
from drills.faults.switch.dialect import SwitchDialect, clean_output, load_switch_dialect
from drills.faults.switch.login import HostKey, exec_login, host_key_name, netmiko_login, presented_key, where
from drills.profile.model import SwitchConfig

__all__ = ["TRANSPORTS", "CommandResult", "HostKey", "SwitchSession", "host_key_name"]

log = logging.getLogger(__name__)

TRANSPORTS = ("exec", "shell")


@dataclass(frozen=True)
class CommandResult:
    """What a switch answered: the command(s), the output (stdout then stderr), the exit status
    (None in a shell, which has none), the lines that look like an error (the switch's words), and for
    each request sent (each exec request, each line typed) the timestamps between which the switch acted
    on it: from just before it was sent to its answer (the exit status; the prompt after the line), not
    the session's setup and close around it."""

    command: str
    output: str
    status: int | None
    errors: tuple[str, ...] = ()
    windows: tuple[tuple[float, float], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in (0, None) and not self.errors

    @property
    def words(self) -> str:
        """The switch's own words, as one line."""
        lines = self.errors or tuple(ln.strip() for ln in self.output.splitlines() if ln.strip().strip("^"))
        text = " ".join(lines) or f"exit status {self.status} and no output"
        return text if len(text) <= 300 else text[:297] + "..."


class SwitchSession:
    """A login to one switch; use as a context manager. `error` is the DrillError class for failures
    of this use (InjectionFailed while injecting, RevertFailed while reverting); a switch that does
    not answer is always TargetUnreachable."""

    def __init__(self, cfg: SwitchConfig, transport: str = "exec", *, accept_unknown_host_keys: bool = False,
                 connect_timeout: float = 5.0, command_timeout: float = 10.0,
                 error: type[DrillError] = InjectionFailed, dialect: SwitchDialect | None = None,
                 expect_host_key: HostKey | None = None, clock: Any | None = None) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
        self.cfg = cfg
        self.transport = transport
        self.accept_unknown_host_keys = accept_unknown_host_keys
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.error = error
        self.dialect = dialect or load_switch_dialect(cfg.dialect)
        self.expect_host_key = expect_host_key
        self._stamp = clock.timestamp if clock is not None else time.time  # the results' windows: cluster time
        self.host_key: HostKey | None = None  # what the switch presented in this login
        self._client: paramiko.SSHClient | None = None
        self._netmiko = None
        self._prompt = re.compile(self.dialect.shell.prompt)
        self.sent: list[str] = []  # every command line sent in this login (no secrets: commands only)
        self.prompt = ""  # shell: the last prompt seen (which mode the CLI is in)

    def __repr__(self) -> str:  # short and secret-free: reprs land in reports
        return f"SwitchSession({self.where} {self.dialect.name} {self.transport})"

    @property
    def where(self) -> str:
        return where(self.cfg)

    def __enter__(self) -> "SwitchSession":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Log in, check the host key against the expected one, then (shell) prepare the CLI. The shell
        transport is netmiko's (prompts, paging, config mode per device type); exec requests are
        paramiko's own, which netmiko does not offer (SONiC/NVUE commands are one program each)."""
        opts = dict(accept_unknown_host_keys=self.accept_unknown_host_keys, connect_timeout=self.connect_timeout,
                    error=self.error)
        if self.transport == "shell":
            self._netmiko = netmiko_login(self.cfg, self.dialect, command_timeout=self.command_timeout, **opts)
            client = self._netmiko.remote_conn_pre
        else:
            client = self._client = exec_login(self.cfg, **opts)
        self.host_key = presented_key(client)
        try:
            self._check_identity()
        except UnsafeTarget:
            self.close()
            raise
        if self._netmiko is not None:
            for line in self.dialect.shell.setup:
                if line == "enable":  # netmiko's own: it checks the prompt for privileged mode
                    self._netmiko.enable()
                else:
                    self._netmiko_line(line)
            self.prompt = self._netmiko.find_prompt()
        log.debug("%s: logged in as %s (%s transport, host key %s)", self.where, self.cfg.username, self.transport,
                  self.host_key)

    def close(self) -> None:
        if self._netmiko is not None:
            try:
                self._netmiko.disconnect()
            except Exception as err:  # noqa: BLE001 - hanging up: nothing left to protect
                log.debug("%s: netmiko disconnect: %s", self.where, err)
            self._netmiko = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, command: str) -> CommandResult:
        """One command line: an exec request, or one line typed into the shell."""
        if self._client is None and self._netmiko is None:
            raise RuntimeError("SwitchSession.run before connect()")
        if self.transport == "exec":
            output, status, window = self._exec(command)
        else:
            sent = self._stamp()
            output, status = self._netmiko_line(command), None
            window = (sent, self._stamp())
        result = CommandResult(command, output, status, tuple(self.dialect.error_lines(output)), (window,))
        self.sent.append(command)
        log.info("%s: sent %r → status %s, %d bytes", self.where, command, status, len(output))
        return result

    def run_lines(self, lines: list[str]) -> CommandResult:
        """Several lines as one change, stopping at the first that fails: one exec request each (Linux
        CLIs: never joined into one shell line), one exec request for a modal CLI's sequence (the
        dialect's `exec_join`; every line was built from validated arguments), or typed one by one
        into the shell."""
        if self.transport == "exec" and self.dialect.exec_join is not None:
            return self.run(self.dialect.exec_join.join(lines))
        outputs: list[str] = []
        windows: list[tuple[float, float]] = []
        status: int | None = None
        for line in lines:
            res = self.run(line)
            outputs.append(res.output)
            windows.extend(res.windows)
            status = res.status
            if not res.ok:
                return CommandResult(line, "\n".join(outputs), res.status, res.errors, tuple(windows))
        return CommandResult(" ; ".join(lines), "\n".join(outputs), status, (), tuple(windows))

    # -- helpers -------------------------------------------------------------------------------
    def _check_identity(self) -> None:
        """The switch is the device the fault was made on: it presents the recorded host key."""
        expected = self.expect_host_key
        if expected is None or self.host_key == expected:
            return
        raise UnsafeTarget(
            f"{self.where} now presents host key {self.host_key or 'none'}, not {expected} recorded when the fault "
            "was injected: another device answers at that address; nothing was sent to it. Check the switch; if it "
            "is the same one re-keyed, run `drills revert --accept-new-host-key`")

    def _exec(self, command: str) -> tuple[str, int, tuple[float, float]]:
        """One exec request: its output, exit status and window (from the request to the exit status; the
        channel's opening before it and the reading to EOF and the close after it are not part of it)."""
        try:
            chan = self._client.get_transport().open_session(timeout=self.command_timeout)
            chan.settimeout(self.command_timeout)
            chan.status_event = answered = _StampedEvent(self._stamp)  # paramiko sets it on the exit status
            sent = self._stamp()
            chan.exec_command(command)
            out = chan.makefile("rb").read()
            err = chan.makefile_stderr("rb").read()
            if not chan.status_event.wait(self.command_timeout):
                raise socket.timeout()
            status = chan.recv_exit_status()
            _wait_closed(chan, self.command_timeout)
            chan.close()
        except (socket.timeout, TimeoutError):
            raise self._slow(command) from None
        except (paramiko.SSHException, EOFError, OSError) as err:
            raise TargetUnreachable(f"{self.where} dropped the session during `{command}` ({err})") from None
        text = clean_output((out + (b"\n" if out and err else b"") + err).decode("utf-8", "replace"))
        return text.rstrip("\n"), status, (sent, answered.at)

    def _netmiko_line(self, line: str) -> str:
        """One line typed into netmiko's session, read until the dialect's prompt (any mode)."""
        from netmiko.exceptions import ReadTimeout

        try:
            out = self._netmiko.send_command(line, expect_string=_unanchored(self.dialect.shell.prompt),
                                             read_timeout=self.command_timeout, strip_prompt=False,
                                             strip_command=True, cmd_verify=False)
        except ReadTimeout:
            raise self._slow(line) from None
        except (OSError, EOFError, paramiko.SSHException) as err:
            raise TargetUnreachable(f"{self.where} closed the shell during `{line}` ({err})") from None
        text = clean_output(out).rstrip("\n")
        lines = text.split("\n")
        if lines and self._prompt.search(lines[-1]):
            self.prompt = lines.pop()
        if lines and lines[0].strip() == line.strip():
            lines = lines[1:]
        return "\n".join(lines).strip("\n")

    def _slow(self, command: str) -> TargetUnreachable:
        return TargetUnreachable(f"{self.where} did not finish `{command}` within {self.command_timeout:g} s "
                                 f"(no {'prompt' if self.transport == 'shell' else 'exit status'}): is the dialect "
                                 f"{self.dialect.name} right, and is the switch overloaded?")


class _StampedEvent(threading.Event):
    """A channel's `status_event` that keeps when it was first set (the exit status arrived, or the channel
    closed without one): the answer's time, before the EOF and close handshake that follow it."""

    def __init__(self, stamp) -> None:
        super().__init__()
        self._stamp = stamp
        self.at: float | None = None

    def set(self) -> None:
        if self.at is None:
            self.at = self._stamp()
        super().set()


def _unanchored(prompt: str) -> str:
    """netmiko searches the whole buffer: the prompt as the last line of it."""
    return "(?m)" + prompt


def _wait_closed(chan: paramiko.Channel, timeout: float) -> None:
    """Let the switch close its side first: hanging up while it still sends its CLOSE makes its
    session end in an error. paramiko has no event for the remote close, hence the short poll."""
    deadline = time.monotonic() + timeout
    while not chan.closed and time.monotonic() < deadline:
        time.sleep(0.002)
