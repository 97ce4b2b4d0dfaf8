"""One SSH login to a switch (paramiko), speaking its dialect over `exec` requests or an interactive
`shell`, with strict host keys and every connection failure turned into one clear line.

Secrets: the password is read from the environment variable the profile names, handed to paramiko
and dropped; it is never stored on the session, logged, or put in a message.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from drills.profile.model import SwitchConfig
from drills.core.errors import DrillError, InjectionFailed, TargetUnreachable
from drills.faults.switch.dialect import SwitchDialect, clean_output, load_switch_dialect

__all__ = ["TRANSPORTS", "CommandResult", "SwitchSession", "host_key_name"]

log = logging.getLogger(__name__)

TRANSPORTS = ("exec", "shell")
_SHELL_WIDTH = 511  # wide enough that no switch wraps a table row


@dataclass(frozen=True)
class CommandResult:
    """What a switch answered: the command(s), the output (stdout then stderr), the exit status
    (None in a shell, which has none), and the lines that look like an error (the switch's words)."""

    command: str
    output: str
    status: int | None
    errors: tuple[str, ...] = ()

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
                 error: type[DrillError] = InjectionFailed, dialect: SwitchDialect | None = None) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
        self.cfg = cfg
        self.transport = transport
        self.accept_unknown_host_keys = accept_unknown_host_keys
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.error = error
        self.dialect = dialect or load_switch_dialect(cfg.dialect)
        self._client: paramiko.SSHClient | None = None
        self._chan: paramiko.Channel | None = None
        self._prompt = re.compile(self.dialect.shell.prompt)
        self.sent: list[str] = []  # every command line sent in this login (no secrets: commands only)
        self.prompt = ""  # shell: the last prompt seen (which mode the CLI is in)
        self._netmiko = None

    def __repr__(self) -> str:  # short and secret-free: reprs land in reports
        return f"SwitchSession({self.where} {self.dialect.name} {self.transport})"

    @property
    def where(self) -> str:
        return f"switch {self.cfg.name} ({self.cfg.host}:{self.cfg.port})"

    def __enter__(self) -> "SwitchSession":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Log in (TCP_NODELAY socket, strict host keys unless told otherwise). The shell transport is
        netmiko's (prompts, paging, config mode per device type); exec requests are paramiko's own,
        which netmiko does not offer (SONiC/NVUE commands are one program each: exec fits them)."""
        if self.transport == "shell":
            self._connect_netmiko()
            return
        client = self._client_with_host_keys()
        password = self._password()
        key_file = self._key_file()
        sock = self._socket()
        t = self.connect_timeout
        try:
            client.connect(self.cfg.host, self.cfg.port, username=self.cfg.username, key_filename=key_file,
                           password=password, sock=sock, timeout=t, banner_timeout=t, auth_timeout=t,
                           look_for_keys=not (key_file or password), allow_agent=not (key_file or password))
        except paramiko.BadHostKeyException as err:
            _close(client, sock)
            raise self.error(
                f"switch {self.cfg.name}: host key for {host_key_name(self.cfg)} does not match known_hosts "
                f"{self._known_hosts_label()} (got {err.key.get_name()} {err.key.fingerprint}, expected "
                f"{err.expected_key.fingerprint}): the switch was reinstalled or the connection is intercepted; "
                "verify, then update known_hosts") from None
        except paramiko.PasswordRequiredException:
            _close(client, sock)
            raise self.error(f"switch {self.cfg.name}: key_file {key_file} is encrypted: use an unencrypted "
                             "key file for drills (mode 0600) or password_env") from None
        except paramiko.AuthenticationException:
            _close(client, sock)
            how = " and ".join(filter(None, [f"key {key_file}" if key_file else None,
                                             f"the password in ${self.cfg.password_env}" if password else None]))
            raise self.error(f"{self.where}: authentication as {self.cfg.username} with {how or 'agent/default keys'} "
                             "failed: check username, key_file / password_env and the switch's authorized keys") from None
        except paramiko.SSHException as err:
            _close(client, sock)
            if "not found in known_hosts" in str(err):
                raise self.error(
                    f"switch {self.cfg.name}: host key for {host_key_name(self.cfg)} is not in known_hosts "
                    f"{self._known_hosts_label()}: add it (ssh-keyscan) or set accept_unknown_host_keys: true") from None
            if "banner" in str(err).lower() or "No existing session" in str(err):  # no SSH answer in time
                raise self._no_answer() from None
            raise TargetUnreachable(f"{self.where}: SSH handshake failed ({err}): is it an SSH server?") from None
        except (socket.timeout, TimeoutError):
            _close(client, sock)
            raise self._no_answer() from None
        except OSError as err:
            _close(client, sock)
            raise TargetUnreachable(f"{self.where}: connection lost during login ({err.strerror or err})") from None
        self._client = client
        log.debug("%s: logged in as %s (%s transport)", self.where, self.cfg.username, self.transport)

    def close(self) -> None:
        if self._netmiko is not None:
            try:
                self._netmiko.disconnect()
            except Exception as err:  # noqa: BLE001 - hanging up: nothing left to protect
                log.debug("%s: netmiko disconnect: %s", self.where, err)
            self._netmiko = None
        if self._chan is not None:
            self._logout()
            self._chan.close()
            self._chan = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, command: str) -> CommandResult:
        """One command line: an exec request, or one line typed into the shell."""
        if self._client is None and self._netmiko is None:
            raise RuntimeError("SwitchSession.run before connect()")
        if self.transport == "exec":
            output, status = self._exec(command)
        else:
            output, status = self._netmiko_line(command), None
        result = CommandResult(command, output, status, tuple(self.dialect.error_lines(output)))
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
        status: int | None = None
        for line in lines:
            res = self.run(line)
            outputs.append(res.output)
            status = res.status
            if not res.ok:
                return CommandResult(line, "\n".join(outputs), res.status, res.errors)
        return CommandResult(" ; ".join(lines), "\n".join(outputs), status)

    # -- connecting ----------------------------------------------------------------------------
    def _client_with_host_keys(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        known = self.cfg.known_hosts
        if known:
            if Path(known).is_file():
                client.load_host_keys(known)
            elif not self.accept_unknown_host_keys:
                raise self.error(f"switch {self.cfg.name}: known_hosts file {known} does not exist: create it "
                                 f"(ssh-keyscan -p {self.cfg.port} {self.cfg.host}) or fix known_hosts in the inventory")
        else:
            client.load_system_host_keys()
        if self.accept_unknown_host_keys:
            log.warning("switch %s: accept_unknown_host_keys is ON: an unknown host key for %s is accepted without "
                        "verification (anyone on the path could impersonate the switch); use it only in a lab",
                        self.cfg.name, host_key_name(self.cfg))
            client.set_missing_host_key_policy(_AcceptLoudly(self.cfg.name))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return client

    def _password(self) -> str | None:
        env = self.cfg.password_env
        if not env:
            return None
        value = os.environ.get(env)
        if value:
            return value
        if self.cfg.key_file:
            log.info("switch %s: $%s is not set; trying the key file only", self.cfg.name, env)
            return None
        raise self.error(f"switch {self.cfg.name}: password_env names ${env}, which is not set in this environment: "
                         "export it (the password itself never goes in the profile)")

    def _key_file(self) -> str | None:
        key = self.cfg.key_file
        if key and not Path(key).is_file():
            raise self.error(f"switch {self.cfg.name}: key_file {key} does not exist: fix key_file in the switch inventory")
        return key or None

    def _socket(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.cfg.host, self.cfg.port), timeout=self.connect_timeout)
        except (socket.timeout, TimeoutError):
            raise self._no_answer() from None
        except ConnectionRefusedError:
            raise TargetUnreachable(f"{self.where} refused the connection: check host/port in the switch inventory "
                                    "and that its SSH server runs") from None
        except OSError as err:
            raise TargetUnreachable(f"{self.where}: cannot connect ({err.strerror or err}): check host/port in "
                                    "the switch inventory") from None
        # CLI exchanges are tiny packets: without this each exec waits on Nagle/delayed ACK (~50 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _no_answer(self) -> TargetUnreachable:
        return TargetUnreachable(f"{self.where} did not answer within {self.connect_timeout:g} s: "
                                 "check host/port in the switch inventory")

    def _known_hosts_label(self) -> str:
        return self.cfg.known_hosts or "~/.ssh/known_hosts"

    # -- commands ------------------------------------------------------------------------------
    def _exec(self, command: str) -> tuple[str, int]:
        try:
            chan = self._client.get_transport().open_session(timeout=self.command_timeout)
            chan.settimeout(self.command_timeout)
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
        return text.rstrip("\n"), status

    def _connect_netmiko(self) -> None:
        """netmiko's session for the dialect's device type, with the same host-key rule as exec: the
        inventory's known_hosts only (RejectPolicy), unless accept_unknown_host_keys (lab)."""
        from netmiko.exceptions import NetmikoAuthenticationException, NetmikoTimeoutException

        known = self.cfg.known_hosts
        if known and not Path(known).is_file() and not self.accept_unknown_host_keys:
            raise self.error(f"switch {self.cfg.name}: known_hosts file {known} does not exist: create it "
                             f"(ssh-keyscan -p {self.cfg.port} {self.cfg.host}) or fix known_hosts in the inventory")
        password, key_file = self._password(), self._key_file()
        t = self.connect_timeout
        params = dict(device_type=self.dialect.netmiko, host=self.cfg.host, port=self.cfg.port,
                      username=self.cfg.username, password=password or "", use_keys=bool(key_file), key_file=key_file,
                      allow_agent=False, ssh_strict=not self.accept_unknown_host_keys, system_host_keys=not known,
                      alt_host_keys=bool(known), alt_key_file=known or "", conn_timeout=t, auth_timeout=t,
                      banner_timeout=t, read_timeout_override=self.command_timeout, fast_cli=True)
        try:
            self._netmiko = _netmiko_class(self.dialect.netmiko)(**params)
        except NetmikoAuthenticationException:
            how = " and ".join(filter(None, [f"key {key_file}" if key_file else None,
                                             f"the password in ${self.cfg.password_env}" if password else None]))
            raise self.error(f"{self.where}: authentication as {self.cfg.username} with {how or 'agent/default keys'} "
                             "failed: check username, key_file / password_env and the switch's authorized keys") from None
        except NetmikoTimeoutException:
            raise self._no_answer() from None
        except paramiko.SSHException as err:
            if "not found in known_hosts" in str(err):
                raise self.error(
                    f"switch {self.cfg.name}: host key for {host_key_name(self.cfg)} is not in known_hosts "
                    f"{self._known_hosts_label()}: add it (ssh-keyscan) or set accept_unknown_host_keys: true") from None
            raise TargetUnreachable(f"{self.where}: SSH handshake failed ({err})") from None
        except (OSError, EOFError) as err:
            raise TargetUnreachable(f"{self.where}: connection lost during login ({err})") from None
        except ValueError as err:  # netmiko's words for a CLI it could not prepare (prompt, enable mode)
            raise self.error(f"{self.where}: session preparation as {self.dialect.netmiko} failed ({err}): is "
                             f"dialect {self.dialect.name} right for this switch?") from None
        for line in self.dialect.shell.setup:
            if line == "enable":  # netmiko's own: it checks the prompt for privileged mode
                self._netmiko.enable()
            else:
                self._netmiko_line(line)
        self.prompt = self._netmiko.find_prompt()

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

    def _open_shell(self) -> None:
        try:
            self._chan = self._client.invoke_shell(term="vt100", width=_SHELL_WIDTH, height=1000)
        except (paramiko.SSHException, OSError) as err:
            raise self.error(f"{self.where} refused an interactive shell ({err}): use transport exec") from None
        self._read_to_prompt("login")
        for line in self.dialect.shell.setup:
            self._shell_line(line)

    def _logout(self) -> None:
        """Leave the shell like an operator (the switch ends the session), not by dropping the line."""
        try:
            self._chan.sendall("".join(line + "\n" for line in self.dialect.shell.logout).encode())
            _wait_closed(self._chan, min(1.0, self.command_timeout))
        except (OSError, EOFError, paramiko.SSHException) as err:
            log.debug("%s: logout: %s", self.where, err)

    def _shell_line(self, line: str) -> str:
        try:
            self._chan.sendall((line + "\n").encode())
        except (OSError, paramiko.SSHException) as err:
            raise TargetUnreachable(f"{self.where} closed the shell before `{line}` ({err})") from None
        text = self._read_to_prompt(line)
        self.prompt = text.rsplit("\n", 1)[-1]
        lines = text.split("\n")[:-1]  # the last line is the prompt
        if lines and lines[0].strip().endswith(line.strip()):
            lines = lines[1:]  # the terminal's echo of what we typed
        return "\n".join(lines).strip("\n")

    def _read_to_prompt(self, what: str) -> str:
        """Read until the last line is a prompt (the switch waits for input again)."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        buf = ""
        deadline = time.monotonic() + self.command_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._slow(what)
            self._chan.settimeout(remaining)
            try:
                data = self._chan.recv(4096)
            except (socket.timeout, TimeoutError):
                raise self._slow(what) from None
            if not data:
                raise TargetUnreachable(f"{self.where} closed the shell during `{what}`: {clean_output(buf).strip()[-200:]!r}")
            buf += decoder.decode(data)
            text = clean_output(buf)
            if self._prompt.search(text.rsplit("\n", 1)[-1]):
                return text

    def _slow(self, command: str) -> TargetUnreachable:
        return TargetUnreachable(f"{self.where} did not finish `{command}` within {self.command_timeout:g} s "
                                 f"(no {'prompt' if self.transport == 'shell' else 'exit status'}): is the dialect "
                                 f"{self.dialect.name} right, and is the switch overloaded?")


def _netmiko_class(device_type: str) -> type:
    """netmiko's driver for `device_type`, reading the first prompt by its last character.

    Drivers without a pattern of their own (mellanox_mlnxos, linux) wait for the login banner by
    timing: a 1 s sleep, then reads until the line has been quiet for 2 s, then the same again while
    entering enable mode — about 2.5 s per login on a switch that answered at once, 11 s per drill
    over Onyx's two logins. Waiting for the prompt's end (`>`, `#`, `$`) instead is what netmiko's
    Cisco drivers do (a pattern without groups: netmiko splits the output on it)."""
    from netmiko.ssh_dispatcher import CLASS_MAPPER

    base = CLASS_MAPPER[device_type]

    class PromptRead(base):  # type: ignore[misc, valid-type]
        def _test_channel_read(self, count: int = 40, pattern: str = "") -> str:
            return super()._test_channel_read(count=count, pattern=pattern or r"[>#$]\s*$")

    PromptRead.__name__ = f"PromptRead{base.__name__}"
    return PromptRead


def _unanchored(prompt: str) -> str:
    """netmiko searches the whole buffer: the prompt as the last line of it."""
    return "(?m)" + prompt


def _wait_closed(chan: paramiko.Channel, timeout: float) -> None:
    """Let the switch close its side first: hanging up while it still sends its CLOSE makes its
    session end in an error. paramiko has no event for the remote close, hence the short poll."""
    deadline = time.monotonic() + timeout
    while not chan.closed and time.monotonic() < deadline:
        time.sleep(0.002)


def _close(client: paramiko.SSHClient, sock: socket.socket) -> None:
    """Stop paramiko's transport thread before the socket goes (else it logs a spurious socket ERROR)."""
    client.close()
    sock.close()


def host_key_name(cfg: SwitchConfig) -> str:
    """How known_hosts names this switch: `host`, or `[host]:port` off port 22."""
    return cfg.host if cfg.port == 22 else f"[{cfg.host}]:{cfg.port}"


class _AcceptLoudly(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key for this session only (never written to known_hosts), loudly."""

    def __init__(self, switch: str) -> None:
        self.switch = switch

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        log.warning("switch %s: ACCEPTED UNKNOWN host key %s %s for %s (accept_unknown_host_keys: true); "
                    "pin it in known_hosts", self.switch, key.get_name(), key.fingerprint, hostname)
        client.get_host_keys().add(hostname, key.get_name(), key)
