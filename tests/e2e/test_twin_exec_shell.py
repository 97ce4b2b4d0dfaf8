"""`exec` into a simulated container: the sh subset and the programs a client's commands use, stdin for a
shell reading its commands and for `cat`, exit codes — through kubectl and the official python client."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from kubernetes import client
from kubernetes.stream import stream
from kubernetes.stream.ws_client import ERROR_CHANNEL

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for
from tests.e2e.test_twin_kubectl import Kubectl
from tests.e2e.twin_core_helpers import GPU_TOLERATION, wait_for

NS, POD = "default", "box"


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    twin = start_twin(tmp_path_factory.mktemp("twin-exec"), profile="minimal")
    try:
        core = client.CoreV1Api(api_client_for(twin))
        core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD}, "spec": {
            "tolerations": [GPU_TOLERATION],
            "containers": [{"name": "sleep", "image": "busybox",
                            "args": ["/bin/sh", "-c", "while true;do date;sleep 5; done"]}]}})
        wait_for(lambda: core.read_namespaced_pod(POD, NS).status.phase == "Running", "the pod running", 60)
        yield twin
    finally:
        twin.stop()


@pytest.fixture(scope="module")
def core(handle):
    api = api_client_for(handle)
    yield client.CoreV1Api(api)
    api.close()


def _exec(core, command, **kw):
    return stream(core.connect_get_namespaced_pod_exec, POD, NS, command=command, stderr=False, stdin=False,
                  stdout=True, tty=False, **kw)


def test_a_script_with_a_loop_a_substitution_and_a_pipe(core):
    assert len(_exec(core, ["/bin/sh", "-c", "for i in $(seq 1 3); do date; done"]).splitlines()) == 3
    packed = _exec(core, ["/bin/sh", "-c", 'echo -n "This is a test string" | gzip'], binary=True)
    assert gzip.decompress(packed) == b"This is a test string"
    assert _exec(core, ["/bin/sh", "-c", "ls /"]).split() == "bin dev etc home lib lib64 proc root sys tmp usr var".split()


@pytest.mark.parametrize("command, code", [(["false"], 1), (["/bin/sh", "-c", "sleep 1; exit 3"], 3), (["true"], 0),
                                           (["/bin/sh", "-c", "nope"], 127), (["/bin/sh", "-c", "echo &"], 2),
                                           (["/bin/sh", "-c", "echo x >/dev/null; false"], 1)])
def test_exit_codes(core, command, code):
    run = stream(core.connect_get_namespaced_pod_exec, POD, NS, command=command, stderr=True, stdin=False,
                 stdout=True, tty=False, _preload_content=False)
    run.run_forever(timeout=30)
    assert run.returncode == code


def test_a_shell_reading_its_commands_from_stdin(core):
    sh = stream(core.connect_post_namespaced_pod_exec, POD, NS, command=["/bin/sh"], stderr=True, stdin=True,
                stdout=True, tty=False, _preload_content=False)
    sh.write_stdin("echo one; echo two >&2\n")
    assert sh.readline_stdout(timeout=10) == "one"
    assert sh.readline_stderr(timeout=10) == "two"
    sh.write_stdin("exit 4\n")
    sh.run_forever(timeout=10)
    assert not sh.is_open() and sh.returncode == 4


def test_cat_copies_stdin_until_a_v5_close(core):
    cat = stream(core.connect_post_namespaced_pod_exec, POD, NS, command=["/bin/sh", "-c", "cat"], stderr=True,
                 stdin=True, stdout=True, tty=False, _preload_content=False)
    assert cat.subprotocol == "v5.channel.k8s.io"
    cat.write_stdin("line\n")
    assert cat.readline_stdout(timeout=10) == "line"
    cat.close_channel(0)
    cat.run_forever(timeout=10)
    assert not cat.is_open()
    assert json.loads(cat.read_channel(ERROR_CHANNEL))["status"] == "Success"


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_exec_a_script_stdin_and_a_missing_command(handle, tmp_path):
    kubectl = Kubectl(handle, tmp_path / "kube-cache")
    assert kubectl("exec", POD, "--", "sh", "-c", "for i in 1 2; do echo n=$i; done && uptime >/dev/null") == \
        "n=1\nn=2\n"
    piped = kubectl.run("exec", "-i", POD, "--", "sh", input="echo from stdin\nexit 5\n", check=False)
    assert piped.stdout == "from stdin\n" and piped.returncode == 5
    missing = kubectl.run("exec", POD, "--", "sh", "-c", "nvcc --version", check=False)
    assert missing.returncode == 127 and "sh: nvcc: not found" in missing.stderr
