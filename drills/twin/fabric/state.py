"""Start the fabric: keys, one SSH server per switch, and the files a client needs in STATE_DIR.

Writes `switch_id_ed25519` (+ `.pub`, the client key, mode 0600), `hostkeys/<switch>` (kept across
restarts so fingerprints stay stable), `known_hosts` (entries keyed `[127.0.0.1]:PORT`) and
`switches.yaml` (the inventory the switch injector reads).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from drills.core.errors import InvalidProfile
from drills.twin.fabric.cli import SwitchCli
from drills.twin.fabric.lldp import neighbours as lldp_neighbours
from drills.twin.fabric.reshut import PortReshut
from drills.twin.fabric.spec import fabric_specs, spec_extra
from drills.twin.fabric.ssh_server import SwitchServer
from drills.twin.fabric.topology import Fabric
from drills.twin.fabric.traffic import Traffic

__all__ = ["FabricHandle", "start_fabric", "ensure_key", "CLIENT_KEY", "PASSWORD_ENV"]

log = logging.getLogger(__name__)

CLIENT_KEY = "switch_id_ed25519"
PASSWORD_ENV = "DRILLS_SWITCH_PASSWORD"
HOST = "127.0.0.1"


@dataclass
class FabricHandle:
    """A running fabric: the link model, the inventory as written, and the servers to stop."""

    fabric: Fabric
    inventory: list[dict]
    state_dir: Path
    key_file: Path
    known_hosts: Path
    inventory_file: Path
    servers: dict[str, SwitchServer] = field(default_factory=dict)
    traffic: Traffic | None = None  # the ports' counters (jobs report their load through it)
    reshut: PortReshut | None = None  # defect port-reshut / peer-port-reshut (reshut.py)

    def __repr__(self) -> str:
        return f"FabricHandle({len(self.servers)} switches in {self.state_dir})"

    def cli(self, switch: str) -> SwitchCli:
        return self.servers[switch].cli

    def port(self, switch: str) -> int:
        return self.servers[switch].port

    def entry(self, switch: str) -> dict:
        return next(e for e in self.inventory if e["name"] == switch)

    def stop(self) -> None:
        if self.reshut is not None:
            self.reshut.stop()
        for server in self.servers.values():
            server.request_stop()  # all accept loops wind down together
        for server in self.servers.values():
            server.stop()

    def __enter__(self) -> "FabricHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_fabric(
    fabric_spec: Any,
    state_dir: str | os.PathLike,
    password: str | None = None,
    clock: Any | None = None,
    password_env: str = PASSWORD_ENV,
    oper_stays_up: bool = False,
    cli_rejects_shutdown: bool = False,
    cli_answer_after_s: float = 0.0,
    cli_apply_after_s: float = 0.0,
    idle_uplinks: int = 0,
    lossy_ports: set[tuple[str, str]] | frozenset = frozenset(),
    reshut_after_s: float | None = None,
    reshut_end: str = "near",
    downlinks: dict[str, dict[str, str]] | None = None,
    nics: dict[str, dict[str, str]] | None = None,
    lldp_off: bool = False,
    stale_peers: bool = False,
) -> FabricHandle:
    """Start one SSH switch per spec entry and write the client's files; see the module docstring.

    `password` (optional) enables password auth too; it is never logged nor written: the inventory
    only names the environment variable (`password_env`) a client should read it from.
    `oper_stays_up` / `cli_rejects_shutdown` / `idle_uplinks` are the fabric defects of the same names
    (twin profile `fabric.port_faults`), `cli_answer_after_s` its `answer_after`, `cli_apply_after_s`
    its `apply_after`; `lossy_ports` are
    (switch, iface) without PFC/ECN; `reshut_after_s` / `reshut_end` the defect that shuts a port again after
    `no shutdown` (its `reshut`). `downlinks` (leaf → node → port) is where each node is really cabled (default:
    the spec's own `downlinks`), what the switches' LLDP answers, and `nics` (leaf → "node/NIC" → port) each
    rail cable's; `lldp_off` the defect lldp-disabled;
    `stale_peers` the defect stale-uplink-peers (the inventory's `peers` name each leaf's uplinks' far ends rotated
    by one: a record written before the cables were moved).
    """
    specs = fabric_specs(fabric_spec)
    fabric = Fabric(specs, clock=clock, oper_stays_up=oper_stays_up, idle_uplinks=idle_uplinks)
    traffic = Traffic(fabric)
    cabled = downlinks if downlinks is not None else {
        s.name: dict(spec_extra(fabric_spec, s.name, "downlinks", {}) or {}) for s in specs}
    rails = nics if nics is not None else {
        s.name: dict(spec_extra(fabric_spec, s.name, "nics", {}) or {}) for s in specs}
    peers = lldp_neighbours(specs, cabled, rails)
    state = Path(state_dir).resolve()
    (state / "hostkeys").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(state / "hostkeys", 0o700)  # private keys only (mkdir's mode passes through the umask)
    key_file = state / CLIENT_KEY
    client_key = ensure_key(key_file, "ed25519", comment="drills-twin-switch-client")
    known_hosts = state / "known_hosts"
    inventory_file = state / "switches.yaml"
    handle = FabricHandle(fabric, [], state, key_file, known_hosts, inventory_file, traffic=traffic)
    if reshut_after_s is not None:
        handle.reshut = PortReshut(fabric, reshut_after_s, reshut_end)
    try:
        for s in specs:
            key_type = str(spec_extra(fabric_spec, s.name, "host_key", "ed25519"))
            host_key = ensure_key(state / "hostkeys" / f"{s.name}_{key_type}", key_type)
            cli = SwitchCli(fabric, s.name, s.dialect, rejects_shutdown=cli_rejects_shutdown, traffic=traffic,
                            lossy={i for sw, i in lossy_ports if sw == s.name}, answer_after_s=cli_answer_after_s,
                            apply_after_s=cli_apply_after_s,
                            neighbours=peers.get(s.name, {}), lldp_off=lldp_off)
            server = SwitchServer(cli, host_key, [client_key], cli.username, password=password, host=HOST)
            handle.servers[s.name] = server
            server.start()
            entry = {
                "name": s.name,
                "host": HOST,
                "port": server.port,
                "username": cli.username,
                "key_file": str(key_file),
                "known_hosts": str(known_hosts),
                "dialect": s.dialect,
                "role": s.role,
                "uplinks": [u.iface for u in s.uplinks],
                "peers": _peers(s.uplinks, stale_peers),
                "host_key_type": host_key.get_name(),
            }
            if spec_extra(fabric_spec, s.name, "rails", []):  # a rail-optimised leaf: the rails it carries
                entry["rails"] = list(spec_extra(fabric_spec, s.name, "rails", []))
            if password is not None:
                entry["password_env"] = password_env
            handle.inventory.append(entry)
        _write_private(known_hosts, "".join(
            f"[{HOST}]:{srv.port} {srv.host_key.get_name()} {srv.host_key.get_base64()}\n"
            for srv in handle.servers.values()))
        _write_private(inventory_file, yaml.safe_dump({"switches": handle.inventory}, sort_keys=False))
    except BaseException:
        handle.stop()
        raise
    log.info("fabric: %d switches up; inventory %s", len(handle.servers), inventory_file)
    return handle


def _peers(uplinks, stale: bool) -> dict[str, str]:
    """Each uplink's far end as the inventory writes it (rotated by one uplink when `stale`)."""
    ends = [f"{u.peer}:{u.peer_iface}" for u in uplinks]
    if stale and len(ends) > 1:
        ends = ends[1:] + ends[:1]
    return {u.iface: end for u, end in zip(uplinks, ends)}


def ensure_key(path: Path, key_type: str = "ed25519", comment: str = "") -> paramiko.PKey:
    """Load the private key at `path`, creating it (0600, OpenSSH format, with `.pub`) when missing."""
    path = Path(path)
    if key_type not in ("ed25519", "rsa"):
        raise InvalidProfile(f"fabric: host key type {key_type!r} is not supported; use ed25519 or rsa")
    cls = paramiko.Ed25519Key if key_type == "ed25519" else paramiko.RSAKey
    if path.exists():
        return cls.from_private_key_file(str(path))
    if key_type == "ed25519":
        # paramiko cannot generate Ed25519 keys; cryptography (its own dependency) can.
        private = ed25519.Ed25519PrivateKey.generate()
        pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        _write_private(path, pem.decode())
        key = paramiko.Ed25519Key.from_private_key_file(str(path))
    else:
        key = paramiko.RSAKey.generate(2048)
        key.write_private_key_file(str(path))
        os.chmod(path, 0o600)
    _write_private(path.with_name(path.name + ".pub"), f"{key.get_name()} {key.get_base64()} {comment}".rstrip() + "\n")
    return key


def _write_private(path: Path, text: str) -> None:
    """Write atomically with mode 0600 from the first byte."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
