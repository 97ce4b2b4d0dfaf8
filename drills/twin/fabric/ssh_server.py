"""One paramiko SSH server per switch on 127.0.0.1: exec requests and an interactive shell that
speak the switch's CLI dialect, public-key (and optional password) authentication.

Threads, like paramiko: the accept loop runs in a daemon thread so an asyncio loop in the same
process is never blocked; each channel gets its own thread.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import socket
import threading

import paramiko

from drills.twin.fabric.cli import SwitchCli

__all__ = ["SwitchServer"]

log = logging.getLogger(__name__)

_TRANSPORT_LOG = "drills.twin.fabric.sshd"


class _QuietDisconnects(logging.Filter):
    """A client that hangs up is normal for a server: paramiko logs it as an ERROR; keep it at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.getMessage().startswith(("Socket exception", "EOF in transport")):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(_TRANSPORT_LOG).isEnabledFor(logging.DEBUG)
        return True


logging.getLogger(_TRANSPORT_LOG).addFilter(_QuietDisconnects())


class SwitchServer:
    """SSH front of one `SwitchCli`. `start()` binds (port 0 → a free port) and returns the port."""

    def __init__(
        self,
        cli: SwitchCli,
        host_key: paramiko.PKey,
        authorized_keys: list[paramiko.PKey],
        username: str,
        password: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.cli = cli
        self.host_key = host_key
        self.authorized_keys = list(authorized_keys)
        self.username = username
        self._password = password
        self.host = host
        self._want_port = port
        self.port = 0
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._transports: list[paramiko.Transport] = []
        self._workers: list[threading.Thread] = []

    def __repr__(self) -> str:  # short and secret-free (fixtures' reprs end up in reports)
        return f"SwitchServer({self.cli.switch} {self.cli.dialect.name} {self.host}:{self.port})"

    @property
    def password_auth(self) -> bool:
        return self._password is not None

    def start(self) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._want_port))
        sock.listen(16)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name=f"ssh-{self.cli.switch}", daemon=True)
        self._thread.start()
        log.info("switch %s (%s) listening on %s:%d", self.cli.switch, self.cli.dialect.name, self.host, self.port)
        return self.port

    def request_stop(self) -> None:
        """Ask the accept loop to end: shutting the listener down wakes its blocked accept; `stop()` waits for it."""
        self._stop.set()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def stop(self, timeout: float = 2.0) -> None:
        """Close the listener and every session; returns within about `timeout` seconds."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        with self._lock:
            transports, self._transports = self._transports, []
            workers, self._workers = self._workers, []
        for t in transports:
            t.close()
        for w in workers:
            w.join(timeout / 4)

    def active_sessions(self) -> int:
        with self._lock:
            return sum(1 for t in self._transports if t.is_active())

    # -- connection handling -------------------------------------------------------------------
    def _accept_loop(self) -> None:
        sock = self._sock
        while not self._stop.is_set():
            try:
                conn, addr = sock.accept()  # blocks (no polling: a twin has a switch per leaf and spine)
            except OSError:  # the listener was shut down (request_stop) or closed
                break
            if self._stop.is_set():
                conn.close()
                break
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small CLI packets: no Nagle delay
            transport = paramiko.Transport(conn)
            transport.set_log_channel(_TRANSPORT_LOG)
            transport.add_server_key(self.host_key)
            with self._lock:
                self._transports = [t for t in self._transports if t.is_active()] + [transport]
            try:
                # With an event, start_server negotiates in the transport's own thread.
                transport.start_server(event=threading.Event(), server=_Session(self, transport))
            except (paramiko.SSHException, OSError, EOFError) as err:
                log.debug("switch %s: SSH negotiation with %s failed: %s", self.cli.switch, addr, err)
                transport.close()

    def _spawn(self, target, *args) -> None:
        w = threading.Thread(target=target, args=args, name=f"ssh-{self.cli.switch}-chan", daemon=True)
        with self._lock:
            self._workers = [x for x in self._workers if x.is_alive()] + [w]
        w.start()

    def _check_password(self, username: str, password: str) -> bool:
        if self._password is None or username != self.username:
            return False
        return hmac.compare_digest(password.encode(), self._password.encode())

    def _check_key(self, username: str, key: paramiko.PKey) -> bool:
        if username != self.username:
            return False
        return any(key.get_name() == k.get_name() and key.asbytes() == k.asbytes() for k in self.authorized_keys)


class _Session(paramiko.ServerInterface):
    """paramiko's per-connection callbacks; they run on the transport thread, so work is handed off."""

    def __init__(self, server: SwitchServer, transport: paramiko.Transport) -> None:
        self.server = server
        self.transport = transport
        self.ptys: set[int] = set()
        self._barrier_lock = threading.Lock()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey,password" if self.server.password_auth else "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = self.server._check_key(username, key)
        if not ok:
            log.info("switch %s: public key for %r refused", self.server.cli.switch, username)
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_auth_password(self, username: str, password: str) -> int:
        ok = self.server._check_password(username, password)
        if not ok:
            log.info("switch %s: password for %r refused", self.server.cli.switch, username)
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_pty_request(self, channel, term, width, height, pixelwidth, pixelheight, modes) -> bool:
        self.ptys.add(channel.get_id())
        return True

    def check_channel_window_change_request(self, channel, width, height, pixelwidth, pixelheight) -> bool:
        return True

    def check_channel_env_request(self, channel, name, value) -> bool:
        return False

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
        self.server._spawn(self._exec, channel, text)
        return True

    def check_channel_shell_request(self, channel: paramiko.Channel) -> bool:
        self.server._spawn(self._shell, channel, channel.get_id() in self.ptys)
        return True

    # -- channel workers -----------------------------------------------------------------------
    def _exec(self, channel: paramiko.Channel, command: str) -> None:
        cli = self.server.cli
        log.info("switch %s exec: %s", cli.switch, command)
        cli.record(command)
        try:
            res = cli.run(command)
            nl = "\r\n" if channel.get_id() in self.ptys else "\n"
            if res.output:
                text = res.output.replace("\n", nl) + nl
                if res.exit_status != 0 and cli.dialect.errors_to_stderr:
                    channel.sendall_stderr(text.encode())
                else:
                    channel.sendall(text.encode())
            channel.send_exit_status(res.exit_status)
            self._reply_barrier()
        except (OSError, EOFError, paramiko.SSHException) as err:
            log.debug("switch %s exec channel ended: %s", cli.switch, err)
        finally:
            _close_quietly(channel)

    def _reply_barrier(self) -> None:
        """Wait until paramiko has answered the exec request before we close the channel.

        The request's success reply is sent on the transport thread after our callback returns;
        a close that overtakes it makes a client's exec_command fail with "Channel closed".
        A global request answered by the client is processed on that same thread after the reply,
        so its answer proves the reply is out.
        """
        with self._barrier_lock:
            self.transport.global_request("keepalive@openssh.com", wait=True)

    def _shell(self, channel: paramiko.Channel, pty: bool) -> None:
        cli = self.server.cli
        session = cli.session()
        nl = "\r\n" if pty else "\n"
        line = ""
        last = ""
        try:
            channel.sendall(session.prompt.encode())
            while True:
                data = channel.recv(4096)
                if not data:
                    return
                out: list[str] = []
                for ch in data.decode("utf-8", "replace"):
                    prev, last = last, ch
                    if ch == "\n" and prev == "\r":
                        continue  # CRLF is one Enter
                    if ch in "\r\n":
                        if pty:
                            out.append("\r\n")
                        if line.strip():
                            log.info("switch %s shell: %s", cli.switch, line.strip())
                            cli.record(line.strip())
                        res = session.execute(line, interactive=True)
                        line = ""
                        if res.output:
                            out.append(res.output.replace("\n", nl) + nl)
                        if res.logout:
                            channel.sendall("".join(out).encode())
                            channel.send_exit_status(0)
                            return
                        out.append(session.prompt)
                    elif ch in "\x7f\x08":
                        if line:
                            line = line[:-1]
                            if pty:
                                out.append("\b \b")
                    elif ch == "\x03":  # Ctrl-C: drop the line
                        line = ""
                        out.append(("^C" if pty else "") + nl + session.prompt)
                    elif ch == "\x04" and not line:  # Ctrl-D on an empty line: log out
                        channel.sendall("".join(out).encode())
                        channel.send_exit_status(0)
                        return
                    elif ch == "\x15":  # Ctrl-U: clear the line
                        if pty:
                            out.append("\b \b" * len(line))
                        line = ""
                    elif ch.isprintable() or ch == "\t":
                        line += ch
                        if pty:
                            out.append(ch)
                if out:
                    channel.sendall("".join(out).encode())
        except (OSError, EOFError, paramiko.SSHException) as err:
            log.debug("switch %s shell channel ended: %s", cli.switch, err)
        finally:
            _close_quietly(channel)  # a client that logged out may have dropped the connection already


def _close_quietly(channel: paramiko.Channel) -> None:
    """Close our end; the client hanging up first (netmiko drops the line right after `exit`) is normal."""
    try:
        channel.close()
    except (OSError, EOFError, paramiko.SSHException) as err:
        log.debug("channel close after the client left: %s", err)
