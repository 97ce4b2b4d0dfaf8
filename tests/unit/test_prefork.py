"""A process forked by the prefork server is a process of its own, as `python -m` would start it."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from drills.core import prefork

PROBE = textwrap.dedent("""
    import json, os, signal, sys
    def disposition(sig):
        handler = signal.getsignal(sig)
        return getattr(handler, "__name__", None) or signal.Handlers(handler).name
    what = {"pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(), "argv": sys.argv[1:],
            "env": os.environ.get("PROBE_VALUE"), "sigint": disposition(signal.SIGINT),
            "sigterm": disposition(signal.SIGTERM), "stdin": sys.stdin.read(), "path0": sys.path[0]}
    print(json.dumps(what))
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[1]))
""")
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(60)\n"


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("modules")
    (folder / "pf_probe.py").write_text(PROBE)
    (folder / "pf_sleeper.py").write_text(SLEEPER)
    return folder


@pytest.fixture(scope="module")
def server(modules):
    with prefork.PreforkServer.start(["json.tool", "~json.tool"], cwd=modules) as srv:
        yield srv


def _env(server, **extra):
    return dict(os.environ, **{prefork.ENV: str(server.socket)}, **extra)


def test_a_child_has_its_own_pid_session_environment_directory_and_stdio(server, modules, tmp_path):
    stdin = tmp_path / "in"
    stdin.write_text("hello")
    with open(stdin, "rb") as fin:
        proc = prefork.popen_python("pf_probe", ["3"], env=_env(server, PROBE_VALUE="v1"), cwd=modules,
                                    stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, new_session=True)
    assert isinstance(proc, prefork.PreforkedProcess)
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(30) == 3
    got = json.loads(out)
    assert got["pid"] == proc.pid != os.getpid() and got["sid"] == proc.pid  # a session of its own
    assert got["cwd"] == str(modules) == got["path0"] and got["argv"] == ["3"]
    assert got["env"] == "v1" and got["stdin"] == "hello" and err == b"to stderr\n"
    fresh = json.loads(subprocess.run([sys.executable, "-m", "pf_probe", "0"], cwd=modules, capture_output=True,
                                      stdin=subprocess.DEVNULL, check=True).stdout)
    # the dispositions a fresh interpreter started from here has (SIGINT ignored when this suite was started
    # from a non-interactive shell's background job, else Python's own handler)
    assert (got["sigint"], got["sigterm"]) == (fresh["sigint"], fresh["sigterm"])


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_signal_the_requester_ignores_stays_ignored_unless_defaults_are_asked_for(server, modules):
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        kept = prefork.popen_python("pf_probe", ["0"], env=_env(server), cwd=modules, stdout=subprocess.PIPE)
        reset = prefork.popen_python("pf_probe", ["0"], env=_env(server), cwd=modules, stdout=subprocess.PIPE,
                                     default_signals=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert json.loads(kept.stdout.read())["sigint"] == "SIG_IGN"
    assert json.loads(reset.stdout.read())["sigint"] == "default_int_handler"
    assert kept.wait(30) == reset.wait(30) == 0


def test_signals_and_exit_codes_are_those_of_a_fresh_interpreter(server, modules):
    codes = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        proc = prefork.popen_python("pf_sleeper", [], env=_env(server), cwd=modules, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, default_signals=True)
        assert proc.stdout.readline() == b"up\n"
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.05)
        proc.send_signal(sig)
        codes[sig] = proc.wait(30)
        proc.send_signal(signal.SIGTERM)  # after its end: nothing happens (the pidfd names no other process)
    fresh = subprocess.Popen([sys.executable, "-m", "pf_sleeper"], cwd=modules, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, preexec_fn=_default_signals)
    assert fresh.stdout.readline() == b"up\n"
    fresh.send_signal(signal.SIGINT)
    assert codes == {signal.SIGINT: fresh.wait(30), signal.SIGTERM: -signal.SIGTERM, signal.SIGKILL: -signal.SIGKILL}


def test_a_forgotten_module_is_imported_afresh_and_runs_as_main(server, modules, tmp_path):
    source = tmp_path / "in.json"
    source.write_text('{"a": [1, 2]}')
    with open(source, "rb") as fin:
        proc = prefork.popen_python("json.tool", ["--compact"], env=_env(server), cwd=modules, stdin=fin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert (proc.stdout.read(), proc.stderr.read(), proc.wait(30)) == (b'{"a":[1,2]}\n', b"", 0)  # no runpy warning


def test_without_a_server_it_is_a_fresh_interpreter(modules):
    env = {k: v for k, v in os.environ.items() if k != prefork.ENV}
    proc = prefork.popen_python("pf_probe", ["0"], env=env, cwd=modules, stdout=subprocess.PIPE)
    assert isinstance(proc, subprocess.Popen)
    assert json.loads(proc.stdout.read())["cwd"] == str(modules) and proc.wait(30) == 0


def test_the_server_outlives_its_owner_only_as_long_as_its_children_and_leaves_no_folder(modules, tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time  # stdout=-3: subprocess.DEVNULL
        sys.path.insert(0, {str(modules)!r})
        from drills.core import prefork
        srv = prefork.PreforkServer.start([], cwd={str(modules)!r})
        child = prefork.popen_python("pf_sleeper", [], env=dict(os.environ, **{{prefork.ENV: str(srv.socket)}}),
                                     cwd={str(modules)!r}, stdout=-3)
        print(srv.proc.pid, child.pid, srv.socket, flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    server_pid, child_pid, sock = owner.stdout.readline().split()
    server_fd, child_fd = os.pidfd_open(int(server_pid)), os.pidfd_open(int(child_pid))
    try:
        owner.kill()
        owner.wait()
        folder = os.path.dirname(sock)  # made for the socket alone: nothing of ours is left in /tmp
        assert _eventually(lambda: not os.path.exists(folder))
        assert _alive(server_fd)  # still the parent of a running child
        signal.pidfd_send_signal(child_fd, signal.SIGTERM)
        assert _eventually(lambda: not _alive(server_fd))
    finally:
        os.close(server_fd)
        os.close(child_fd)


def _alive(pidfd: int) -> bool:
    import select

    return not select.select([pidfd], [], [], 0)[0]


def _eventually(check, timeout: float = 10.0) -> bool:
    import select

    for _ in range(int(timeout / 0.05)):
        if check():
            return True
        select.select([], [], [], 0.05)
    return check()


def test_a_signal_sent_the_instant_the_pid_is_known_acts_as_on_a_fresh_interpreter(server, modules):
    """Not swallowed by the server's own handler in the instant between the fork and the child's reset."""
    for _ in range(5):
        proc = prefork.popen_python("pf_sleeper", [], env=_env(server), cwd=modules, stdout=subprocess.DEVNULL,
                                    default_signals=True)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM


def test_ps_shows_the_command_line_a_fresh_interpreter_would(server, modules):
    proc = prefork.popen_python("pf_sleeper", ["--flag", "x y"], env=_env(server), cwd=modules,
                                stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"up\n"
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            shown = fh.read().rstrip(b"\0").replace(b"\0", b" ").decode()
        assert shown == f"{sys.executable} -m pf_sleeper --flag x y"
    finally:
        proc.kill()
        proc.wait(30)
