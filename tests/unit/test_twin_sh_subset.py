"""The simulated container's sh subset (container_shell.py) through container_exec's programs: what each
construct prints and its exit status, and sh's 127 / syntax error for what is outside the subset."""

from __future__ import annotations

import pytest

from drills.twin.workloads import container_exec

POD = {"metadata": {"name": "box"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                             "env": [{"name": "GREETING", "value": "hi there"}]}]}}
NOON = 1_796_299_200.0  # 2026-12-03T12:00:00Z


def sh(script: str) -> container_exec.Output:
    return container_exec.run(["/bin/sh", "-c", script], POD, "c", None, NOON)


@pytest.mark.parametrize("script, stdout, code", [
    ("for i in $(seq 1 3); do echo n$i; done", "n1\nn2\nn3\n", 0),
    ("for w in a 'b c'; do echo [$w]; done", "[a]\n[b c]\n", 0),
    ("echo $GREETING; echo \"$GREETING\" ${HOSTNAME}", "hi there\nhi there box\n", 0),
    ("false || echo rescued && echo then", "rescued\nthen\n", 0),
    ("true && false; echo $?", "1\n", 0),
    ("echo -n a; echo b", "ab\n", 0),
    ("seq 3 -1 1 | cat", "3\n2\n1\n", 0),
    ("date", "Thu Dec  3 12:00:00 UTC 2026\n", 0),
    ("ls /tmp", "", 1),
    ("sleep 1; exit 3", "", 3),
    ("echo a # a comment", "a\n", 0),
    ("echo x >/dev/null; echo y 2>&1", "y\n", 0),
])
def test_constructs(script, stdout, code):
    out = sh(script)
    assert (out.stdout.decode(), out.code) == (stdout, code)


def test_what_is_not_there_is_127_and_what_is_not_parsed_is_a_syntax_error():
    missing = sh("nvcc --version")
    assert (missing.stderr, missing.code) == (b"sh: nvcc: not found\n", 127)
    for script in ("echo 'open", "echo a &", "for x in a; echo $x; done", "echo > /tmp/file"):
        assert sh(script).code == 2, script


def test_sleep_takes_twin_time_and_a_direct_exec_of_a_missing_program_is_the_runtimes_error():
    assert sh("sleep 2; sleep 0.5").seconds == 2.5
    with pytest.raises(container_exec.NotFound):
        container_exec.run(["bash"], POD, "c", None, NOON)


def test_a_shell_reading_stdin_runs_each_line_until_exit():
    session = container_exec.start(["sh"], POD, "c", None, NOON, stdin=True)
    session.feed(b"echo one\necho tw")
    assert session.take().stdout == b"one\n" and not session.finished
    session.feed(b"o >&2\nexit 4\necho never\n")
    out = session.take()
    assert (out.stderr, out.stdout, out.code, session.finished) == (b"two\n", b"", 4, True)
