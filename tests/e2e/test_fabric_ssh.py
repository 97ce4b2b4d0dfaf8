"""The twin's switches over real SSH: a paramiko client with strict host keys, as the injector uses."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import stat
import threading
import time

import paramiko
import pytest
import yaml

from drills.twin.fabric import leaf_spine, start_fabric
from drills.twin.fabric.state import ensure_key

SHOW = {"sonic": "show interfaces status", "nxos": "show interface status", "nvue": "nv show interface"}
HEADER = {"sonic": "Interface", "nxos": "Port", "nvue": "Interface"}


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    specs = [dataclasses.asdict(s) for s in leaf_spine(leaves=3, spines=2, downlinks=1)]
    specs[-1]["host_key"] = "rsa"  # spine2 proves RSA host keys work too
    handle = start_fabric(specs, tmp_path_factory.mktemp("fabric"))
    yield handle
    handle.stop()


@pytest.fixture
def events(fab):
    seen = []
    off = fab.fabric.on_change(seen.append)
    yield seen
    off()


def connect(entry, key_file=None, known_hosts=None, **kw) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts or entry["known_hosts"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(entry["host"], entry["port"], username=kw.pop("username", entry["username"]),
                   key_filename=key_file or entry["key_file"], look_for_keys=False, allow_agent=False,
                   timeout=5, banner_timeout=5, auth_timeout=5, **kw)
    return client


def run(entry, command) -> tuple[int, str, str]:
    client = connect(entry)
    try:
        _, out, err = client.exec_command(command, timeout=5)
        text, etext = out.read().decode(), err.read().decode()
        return out.channel.recv_exit_status(), text, etext
    finally:
        client.close()


def read_until(chan: paramiko.Channel, suffix: str, timeout: float = 5.0) -> str:
    buf = ""
    deadline = time.monotonic() + timeout
    while not buf.endswith(suffix):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {suffix!r} in {buf!r}")
        if chan.recv_ready():
            buf += chan.recv(4096).decode()
        else:
            time.sleep(0.01)
    return buf


def test_state_files(fab):
    inv = yaml.safe_load(fab.inventory_file.read_text())["switches"]
    assert [e["name"] for e in inv] == ["leaf1", "leaf2", "leaf3", "spine1", "spine2"]
    assert inv[0]["uplinks"] == ["Ethernet8", "Ethernet16"] and inv[2]["username"] == "cumulus"
    assert inv[4]["host_key_type"] == "ssh-rsa" and "password_env" not in inv[0]
    lines = fab.known_hosts.read_text().splitlines()
    assert lines[0].startswith(f"[127.0.0.1]:{inv[0]['port']} ssh-ed25519 ")
    for path in (fab.key_file, fab.known_hosts, fab.inventory_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert fab.key_file.with_name("switch_id_ed25519.pub").read_text().startswith("ssh-ed25519 ")


@pytest.mark.parametrize("name", ["leaf1", "leaf2", "leaf3", "spine2"])
def test_exec_show_on_each_dialect(fab, name):
    entry = fab.entry(name)
    status, out, err = run(entry, SHOW[entry["dialect"]])
    assert status == 0 and err == ""
    assert HEADER[entry["dialect"]] in out.splitlines()[0] + out.splitlines()[1]


def test_sonic_exec_shutdown_and_startup(fab, events):
    leaf = fab.entry("leaf1")
    assert run(leaf, "sudo config interface shutdown Ethernet8")[0] == 0
    assert fab.fabric.leaf_uplinks_up("leaf1") == 1
    status, out, _ = run(leaf, "show interfaces status Ethernet8")
    assert out.splitlines()[2].split()[7:9] == ["down", "down"]
    assert run(leaf, "sudo config interface startup Ethernet8")[0] == 0
    assert [(e.iface, e.admin, e.redundancy.up) for e in events] == [("Ethernet8", False, 1), ("Ethernet8", True, 2)]


def test_nxos_interactive_shutdown_and_no_shutdown(fab, events):
    client = connect(fab.entry("leaf2"))
    try:
        chan = client.invoke_shell()
        read_until(chan, "leaf2# ")
        chan.send("configure terminal\n")
        assert "configure terminal\r\n" in read_until(chan, "leaf2(config)# ")  # echoed like a tty
        chan.send("interface Ethernet1/2\n")
        read_until(chan, "leaf2(config-if)# ")
        chan.send("shutdown\n")
        read_until(chan, "leaf2(config-if)# ")
        assert fab.fabric.iface_state("leaf2", "Ethernet1/2").admin is False
        assert events[-1].redundancy.up == 1 and not events[-1].isolated
        chan.send("no shutdown\nend\n")
        read_until(chan, "leaf2# ")
        chan.send("show interface Ethernet1/2 status\n")
        assert " connected " in read_until(chan, "leaf2# ")
        chan.send("exit\n")
        assert chan.recv_exit_status() == 0
    finally:
        client.close()
    assert fab.fabric.leaf_uplinks_up("leaf2") == 2


def test_nvue_set_then_apply(fab, events):
    leaf = fab.entry("leaf3")
    assert run(leaf, "nv set interface swp3 link state down")[0] == 0
    assert fab.fabric.iface_state("leaf3", "swp3").admin and events == []
    status, out, _ = run(leaf, "nv config apply -y")
    assert status == 0 and out.startswith("applied [rev_id:")
    assert not fab.fabric.iface_state("leaf3", "swp3").admin and events[-1].redundancy.up == 1
    run(leaf, "nv set interface swp3 link state up && nv config apply -y")
    assert fab.fabric.leaf_uplinks_up("leaf3") == 2


@pytest.mark.parametrize(
    "name, command, status, stream, text",
    [
        ("leaf1", "shw interfaces", 127, "err", "-bash: shw: command not found"),
        ("leaf1", "sudo config interface shutdown Ethernet99", 2, "err", "Please enter a valid interface name!!"),
        ("leaf2", "show interfase status", 1, "out", "% Invalid input detected at '^' marker."),
        ("leaf2", "configure terminal ; interface Ethernet1/99 ; shutdown", 1, "out", "% Invalid range at '^' marker."),
        ("leaf3", "nv set interface swp99 link state down", 1, "err", "Error: The requested item does not exist."),
    ],
)
def test_bad_input_answers_like_a_switch(fab, name, command, status, stream, text):
    got_status, out, err = run(fab.entry(name), command)
    assert got_status == status and text in (out if stream == "out" else err)
    assert all(fab.fabric.redundancy(leaf).up == 2 for leaf in fab.fabric.leaves())


def test_wrong_client_key_is_refused(fab, tmp_path):
    other = ensure_key(tmp_path / "other_ed25519")
    assert other is not None
    with pytest.raises(paramiko.AuthenticationException):
        connect(fab.entry("leaf1"), key_file=str(tmp_path / "other_ed25519"))
    with pytest.raises(paramiko.AuthenticationException):
        connect(fab.entry("leaf1"), username="root")


def test_unknown_host_key_is_rejected(fab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        connect(fab.entry("leaf1"), known_hosts=str(empty))
    # A known_hosts that pins another switch's key for this port: a changed host key.
    leaf1, leaf2 = fab.entry("leaf1"), fab.entry("leaf2")
    line = next(ln for ln in fab.known_hosts.read_text().splitlines() if ln.startswith(f"[127.0.0.1]:{leaf2['port']} "))
    empty.write_text(line.replace(f":{leaf2['port']} ", f":{leaf1['port']} ") + "\n")
    with pytest.raises(paramiko.BadHostKeyException):
        connect(leaf1, known_hosts=str(empty))


def test_concurrent_sessions(fab):
    results = []

    def worker(name):
        results.append(run(fab.entry(name), SHOW[fab.entry(name)["dialect"]])[0])

    threads = [threading.Thread(target=worker, args=(n,)) for n in ["leaf1", "leaf2", "leaf3", "leaf1", "leaf2", "leaf3"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [0] * 6


def test_asyncio_loop_stays_responsive_and_receives_events(fab):
    """The twin's loop subscribes; an SSH shutdown arrives on the loop while it keeps running."""

    async def main():
        loop = asyncio.get_running_loop()
        got: asyncio.Queue = asyncio.Queue()
        off = fab.fabric.on_change(got.put_nowait, loop=loop)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        try:
            status = (await asyncio.to_thread(run, fab.entry("spine1"), "sudo config interface shutdown Ethernet8"))[0]
            event = await asyncio.wait_for(got.get(), 5)
            await asyncio.to_thread(run, fab.entry("spine1"), "sudo config interface startup Ethernet8")
            return status, event, ticks
        finally:
            off()
            tick_task.cancel()

    status, event, ticks = asyncio.run(main())
    assert status == 0 and event.switch == "spine1" and event.leaf == "leaf2" and event.redundancy.up == 1
    assert ticks > 0


def test_password_auth_and_clean_stop(tmp_path):
    spec = [{"name": "leaf9", "role": "leaf", "dialect": "nxos", "interfaces": ["Ethernet1/1"]}]
    handle = start_fabric(spec, tmp_path, password="s3cret-pw")
    entry = handle.entry("leaf9")
    assert entry["password_env"] == "DRILLS_SWITCH_PASSWORD"
    assert "s3cret-pw" not in handle.inventory_file.read_text()
    client = paramiko.SSHClient()
    client.load_host_keys(entry["known_hosts"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(entry["host"], entry["port"], username="admin", password="s3cret-pw",
                   look_for_keys=False, allow_agent=False, timeout=5)
    chan = client.invoke_shell()
    read_until(chan, "leaf9# ")
    with pytest.raises(paramiko.AuthenticationException):
        bad = paramiko.SSHClient()
        bad.load_host_keys(entry["known_hosts"])
        bad.connect(entry["host"], entry["port"], username="admin", password="wrong",
                    look_for_keys=False, allow_agent=False, timeout=5)
    handle.stop()  # with a shell still open
    assert chan.recv(100) == b"" or chan.closed
    client.close()
    with pytest.raises(OSError):
        socket.create_connection((entry["host"], entry["port"]), timeout=1).close()
