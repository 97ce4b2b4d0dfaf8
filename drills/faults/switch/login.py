"""Logging in to a switch over SSH: host keys, credentials, and every connection failure as one line.

Two logins, one rule: paramiko's own client (`exec_login`: exec requests; SONiC/NVUE commands are one
program each) and netmiko's session for the dialect's device type (`netmiko_login`: a shell with its
prompts, paging and config mode). Both check the server's host key against the inventory's
known_hosts (RejectPolicy) unless `accept_unknown_host_keys` (a lab: accepted loudly, never saved),
and `presented_key` names the key the switch showed: the journal keeps it as the switch's identity,
so a revert never acts on another device that answers at the same address.

Secrets: the password is read from the environment variable the profile names, handed to paramiko
and dropped; it is never stored, logged, or put in a message.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from drills.core.errors import DrillError, TargetUnreachable
from drills.faults.switch.dialect import SwitchDialect
from drills.profile.model import SwitchConfig

__all__ = ["HostKey", "exec_login", "netmiko_login", "presented_key", "host_key_name", "where", "no_answer"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostKey:
    """The key a switch presented: its type and SHA256 fingerprint, as `ssh-keygen -lf` prints them."""

    type: str  # ssh-ed25519, ssh-rsa, …
    fingerprint: str  # SHA256:…

    def __str__(self) -> str:
        return f"{self.type} {self.fingerprint}"

    @classmethod
    def parse(cls, text: str) -> "HostKey":
        """From `str(HostKey)` (the journal's form)."""
        kind, _, fingerprint = str(text).strip().partition(" ")
        return cls(kind, fingerprint.strip())


def exec_login(cfg: SwitchConfig, *, accept_unknown_host_keys: bool, connect_timeout: float,
               error: type[DrillError]) -> paramiko.SSHClient:
    """A logged-in paramiko client (TCP_NODELAY socket, strict host keys unless told otherwise)."""
    client = _client_with_host_keys(cfg, accept_unknown_host_keys, error)
    password = _password(cfg, error)
    key_file = _key_file(cfg, error)
    sock = _socket(cfg, connect_timeout)
    t = connect_timeout
    try:
        client.connect(cfg.host, cfg.port, username=cfg.username, key_filename=key_file, password=password,
                       sock=sock, timeout=t, banner_timeout=t, auth_timeout=t,
                       look_for_keys=not (key_file or password), allow_agent=not (key_file or password))
    except paramiko.BadHostKeyException as err:
        _close(client, sock)
        raise error(
            f"switch {cfg.name}: host key for {host_key_name(cfg)} does not match known_hosts "
            f"{_known_hosts_label(cfg)} (got {err.key.get_name()} {err.key.fingerprint}, expected "
            f"{err.expected_key.fingerprint}): the switch was reinstalled or the connection is intercepted; "
            "verify, then update known_hosts") from None
    except paramiko.PasswordRequiredException:
        _close(client, sock)
        raise error(f"switch {cfg.name}: key_file {key_file} is encrypted: use an unencrypted "
                    "key file for drills (mode 0600) or password_env") from None
    except paramiko.AuthenticationException:
        _close(client, sock)
        raise _auth_failed(cfg, key_file, password, error) from None
    except paramiko.SSHException as err:
        _close(client, sock)
        if "not found in known_hosts" in str(err):
            raise _unknown_key(cfg, error) from None
        if "banner" in str(err).lower() or "No existing session" in str(err):  # no SSH answer in time
            raise no_answer(cfg, connect_timeout) from None
        raise TargetUnreachable(f"{where(cfg)}: SSH handshake failed ({err}): is it an SSH server?") from None
    except (socket.timeout, TimeoutError):
        _close(client, sock)
        raise no_answer(cfg, connect_timeout) from None
    except OSError as err:
        _close(client, sock)
        raise TargetUnreachable(f"{where(cfg)}: connection lost during login ({err.strerror or err})") from None
    return client


def netmiko_login(cfg: SwitchConfig, dialect: SwitchDialect, *, accept_unknown_host_keys: bool,
                  connect_timeout: float, command_timeout: float, error: type[DrillError]) -> Any:
    """netmiko's session for the dialect's device type, with the same host-key rule as `exec_login`:
    the inventory's known_hosts only (RejectPolicy), unless accept_unknown_host_keys (lab)."""
    from netmiko.exceptions import NetmikoAuthenticationException, NetmikoTimeoutException

    known = cfg.known_hosts
    if known and not Path(known).is_file() and not accept_unknown_host_keys:
        raise _no_known_hosts(cfg, error)
    password, key_file = _password(cfg, error), _key_file(cfg, error)
    t = connect_timeout
    params = dict(device_type=dialect.netmiko, host=cfg.host, port=cfg.port, username=cfg.username,
                  password=password or "", use_keys=bool(key_file), key_file=key_file, allow_agent=False,
                  ssh_strict=not accept_unknown_host_keys, system_host_keys=not known, alt_host_keys=bool(known),
                  alt_key_file=known or "", conn_timeout=t, auth_timeout=t, banner_timeout=t,
                  read_timeout_override=command_timeout, fast_cli=True)
    try:
        return _netmiko_class(dialect.netmiko)(**params)
    except NetmikoAuthenticationException:
        raise _auth_failed(cfg, key_file, password, error) from None
    except NetmikoTimeoutException:
        raise no_answer(cfg, connect_timeout) from None
    except paramiko.SSHException as err:
        if "not found in known_hosts" in str(err):
            raise _unknown_key(cfg, error) from None
        raise TargetUnreachable(f"{where(cfg)}: SSH handshake failed ({err})") from None
    except (OSError, EOFError) as err:
        raise TargetUnreachable(f"{where(cfg)}: connection lost during login ({err})") from None
    except ValueError as err:  # netmiko's words for a CLI it could not prepare (prompt, enable mode)
        raise error(f"{where(cfg)}: session preparation as {dialect.netmiko} failed ({err}): is "
                    f"dialect {dialect.name} right for this switch?") from None


def presented_key(client: paramiko.SSHClient) -> HostKey | None:
    """The host key the switch presented in this login (None when the transport is gone)."""
    transport = client.get_transport() if client is not None else None
    if transport is None:
        return None
    key = transport.get_remote_server_key()
    return HostKey(key.get_name(), key.fingerprint)


def host_key_name(cfg: SwitchConfig) -> str:
    """How known_hosts names this switch: `host`, or `[host]:port` off port 22."""
    return cfg.host if cfg.port == 22 else f"[{cfg.host}]:{cfg.port}"


def where(cfg: SwitchConfig) -> str:
    return f"switch {cfg.name} ({cfg.host}:{cfg.port})"


def no_answer(cfg: SwitchConfig, timeout: float) -> TargetUnreachable:
    return TargetUnreachable(f"{where(cfg)} did not answer within {timeout:g} s: check host/port in the switch inventory")


# -- helpers -----------------------------------------------------------------------------------
def _client_with_host_keys(cfg: SwitchConfig, accept_unknown: bool, error: type[DrillError]) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    known = cfg.known_hosts
    if known:
        if Path(known).is_file():
            client.load_host_keys(known)
        elif not accept_unknown:
            raise _no_known_hosts(cfg, error)
    else:
        client.load_system_host_keys()
    if accept_unknown:
        log.warning("switch %s: accept_unknown_host_keys is ON: an unknown host key for %s is accepted without "
                    "verification (anyone on the path could impersonate the switch); use it only in a lab",
                    cfg.name, host_key_name(cfg))
        client.set_missing_host_key_policy(_AcceptLoudly(cfg.name))
    else:
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return client


def _password(cfg: SwitchConfig, error: type[DrillError]) -> str | None:
    env = cfg.password_env
    if not env:
        return None
    value = os.environ.get(env)
    if value:
        return value
    if cfg.key_file:
        log.info("switch %s: $%s is not set; trying the key file only", cfg.name, env)
        return None
    raise error(f"switch {cfg.name}: password_env names ${env}, which is not set in this environment: "
                "export it (the password itself never goes in the profile)")


def _key_file(cfg: SwitchConfig, error: type[DrillError]) -> str | None:
    key = cfg.key_file
    if key and not Path(key).is_file():
        raise error(f"switch {cfg.name}: key_file {key} does not exist: fix key_file in the switch inventory")
    return key or None


def _socket(cfg: SwitchConfig, timeout: float) -> socket.socket:
    try:
        sock = socket.create_connection((cfg.host, cfg.port), timeout=timeout)
    except (socket.timeout, TimeoutError):
        raise no_answer(cfg, timeout) from None
    except ConnectionRefusedError:
        raise TargetUnreachable(f"{where(cfg)} refused the connection: check host/port in the switch inventory "
                                "and that its SSH server runs") from None
    except OSError as err:
        raise TargetUnreachable(f"{where(cfg)}: cannot connect ({err.strerror or err}): check host/port in "
                                "the switch inventory") from None
    # CLI exchanges are tiny packets: without this each exec waits on Nagle/delayed ACK (~50 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _known_hosts_label(cfg: SwitchConfig) -> str:
    return cfg.known_hosts or "~/.ssh/known_hosts"


def _no_known_hosts(cfg: SwitchConfig, error: type[DrillError]) -> DrillError:
    return error(f"switch {cfg.name}: known_hosts file {cfg.known_hosts} does not exist: create it "
                 f"(ssh-keyscan -p {cfg.port} {cfg.host}) or fix known_hosts in the inventory")


def _unknown_key(cfg: SwitchConfig, error: type[DrillError]) -> DrillError:
    return error(f"switch {cfg.name}: host key for {host_key_name(cfg)} is not in known_hosts "
                 f"{_known_hosts_label(cfg)}: add it (ssh-keyscan) or set accept_unknown_host_keys: true")


def _auth_failed(cfg: SwitchConfig, key_file: str | None, password: str | None,
                 error: type[DrillError]) -> DrillError:
    how = " and ".join(filter(None, [f"key {key_file}" if key_file else None,
                                     f"the password in ${cfg.password_env}" if password else None]))
    return error(f"{where(cfg)}: authentication as {cfg.username} with {how or 'agent/default keys'} "
                 "failed: check username, key_file / password_env and the switch's authorized keys")


def _close(client: paramiko.SSHClient, sock: socket.socket) -> None:
    """Stop paramiko's transport thread before the socket goes (else it logs a spurious socket ERROR)."""
    client.close()
    sock.close()


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


class _AcceptLoudly(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key for this session only (never written to known_hosts), loudly."""

    def __init__(self, switch: str) -> None:
        self.switch = switch

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        log.warning("switch %s: ACCEPTED UNKNOWN host key %s %s for %s (accept_unknown_host_keys: true); "
                    "pin it in known_hosts", self.switch, key.get_name(), key.fingerprint, hostname)
        client.get_host_keys().add(hostname, key.get_name(), key)
