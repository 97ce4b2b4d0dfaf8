"""pods/portforward through the official python client (`kubernetes.stream.portforward`, the kubelet's
WebSocket channel protocol) and through `kubectl port-forward` (SPDY tunnelled in a WebSocket): an echo
server's ports, nginx's welcome page, a vLLM replica's own API, and the kubelet's "connection refused"
for a port nothing listens on."""

from __future__ import annotations

import json
import re
import select
import shutil
import socket
import subprocess
import urllib.request

import pytest
from kubernetes import client
from kubernetes.stream import portforward

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for
from tests.e2e.twin_core_helpers import GPU_TOLERATION, wait_for

NS = "default"
INFER_NS, INFER_APP = "ai-platform", "llama-7b-infer"  # the minimal profile's vLLM Deployment (port 8000)


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    twin = start_twin(tmp_path_factory.mktemp("twin-pf"), profile="minimal")
    try:
        yield twin
    finally:
        twin.stop()


@pytest.fixture(scope="module")
def core(handle):
    api = api_client_for(handle)
    yield client.CoreV1Api(api)
    api.close()


def _running(core: client.CoreV1Api, name: str, container: dict) -> None:
    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                    "spec": {"containers": [container], "tolerations": [GPU_TOLERATION]}})

    def ready():
        statuses = core.read_namespaced_pod(name, NS).status.container_statuses or []
        return bool(statuses) and statuses[0].ready
    wait_for(ready, f"pod {name} ready", deadline_s=60)


def _read(sock, until: bytes) -> bytes:
    got = b""
    while until not in got:
        r, _, _ = select.select([sock], [], [], 30)
        assert r, f"no answer; got {got!r}"
        chunk = sock.recv(4096)
        assert chunk, f"closed; got {got!r}"
        got += chunk
    return got


def test_echo_ports_answer_and_a_port_nothing_listens_on_is_refused(core):
    _running(core, "port-server", {"name": "port-server", "image": "python",
                                   "command": ["python", "-u", "/opt/port-server.py", "1234", "1235"]})
    pf = portforward(core.connect_get_namespaced_pod_portforward, "port-server", NS, ports="1234,1235,1236")
    a, b = pf.socket(1234), pf.socket(1235)
    a.setblocking(True)
    b.setblocking(True)
    a.sendall(b"to 1234")
    b.sendall(b"to 1235")
    assert _read(a, b"to 1234") == b"to 1234"
    assert _read(b, b"to 1235") == b"to 1235"
    a.sendall(b" again")
    assert _read(a, b" again") == b" again"
    refused = pf.socket(1236)
    refused.setblocking(True)
    assert refused.recv(1024) == b""
    assert "failed to connect to localhost:1236" in pf.error(1236)
    assert pf.error(1236).endswith("dial tcp6 [::1]:1236: connect: connection refused ")
    for sock in (a, b, refused):
        sock.close()
    assert pf.error(1234) is None and pf.error(1235) is None


def test_nginx_serves_its_welcome_page_and_404(core):
    _running(core, "web", {"name": "nginx", "image": "nginx:1.27.3"})

    def connect(address, *args, **kwargs):
        pf = portforward(core.connect_get_namespaced_pod_portforward, "web", NS, ports=str(address[1]))
        return pf.socket(address[1])

    original = socket.create_connection
    socket.create_connection = connect
    try:
        page = urllib.request.urlopen("http://web.default.kubernetes/")
        html = page.read().decode()
        with pytest.raises(urllib.request.HTTPError) as missing:
            urllib.request.urlopen("http://web.default.kubernetes/nope")
    finally:
        socket.create_connection = original
    assert page.status == 200 and page.headers["Server"] == "nginx/1.27.3"
    assert "<h1>Welcome to nginx!</h1>" in html
    assert missing.value.code == 404 and b"<center>nginx/1.27.3</center>" in missing.value.read()


def _replica(core: client.CoreV1Api) -> str:
    pods = wait_for(lambda: [p for p in core.list_namespaced_pod(INFER_NS, label_selector=f"app={INFER_APP}").items
                             if p.status.container_statuses and p.status.container_statuses[0].ready],
                    "a ready vLLM replica", deadline_s=60)
    return pods[0].metadata.name


def test_a_vllm_replica_answers_its_own_api_keep_alive(core):
    pf = portforward(core.connect_get_namespaced_pod_portforward, _replica(core), INFER_NS, ports="8000")
    sock = pf.socket(8000)
    sock.setblocking(True)
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head, _, body = _read(sock, b"}]}").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"server: uvicorn" in head.lower()
    models = [m["id"] for m in json.loads(body)["data"]]
    request = json.dumps({"model": models[0], "prompt": "hello", "max_tokens": 4}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(request)).encode() + b"\r\n\r\n" + request)
    head, _, body = _read(sock, b'"total_tokens"').partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    answer = json.loads(_read_rest(sock, body))
    assert answer["object"] == "text_completion" and answer["usage"]["completion_tokens"] == 4
    sock.close()


def _read_rest(sock, got: bytes) -> bytes:
    while not got.rstrip().endswith(b"}"):
        got += _read(sock, b"}")
    return got


def test_port_forward_to_a_pod_not_running_is_refused(core):
    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere"},
                                    "spec": {"nodeSelector": {"no": "such-node"},
                                             "containers": [{"name": "nginx", "image": "nginx"}]}})
    with pytest.raises(client.ApiException) as refused:
        portforward(core.connect_get_namespaced_pod_portforward, "nowhere", NS, ports="80")
    assert "pod nowhere is not running" in str(refused.value)


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_port_forward_to_a_vllm_replica_then_to_a_closed_port(handle, core, tmp_path):
    base = ["kubectl", "--kubeconfig", handle.kubeconfig, "--cache-dir", str(tmp_path), "-n", INFER_NS]
    forward = subprocess.Popen([*base, "port-forward", f"pod/{_replica(core)}", ":8000", ":9999"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        local = {}
        while len(local) < 2:  # "Forwarding from 127.0.0.1:NNNNN -> 8000", one line per port and address family
            line = forward.stdout.readline()
            assert line, f"kubectl port-forward ended: {forward.stderr.read()}"
            if m := re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line):
                local[int(m[2])] = int(m[1])
        models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{local[8000]}/v1/models", timeout=30).read())
        request = urllib.request.Request(f"http://127.0.0.1:{local[8000]}/v1/completions",
                                         data=json.dumps({"prompt": "hi", "max_tokens": 3}).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
        assert [m["id"] for m in models["data"]] == [answer["model"]] and answer["usage"]["completion_tokens"] == 3
        with pytest.raises(OSError):  # nothing listens on 9999 in the pod: kubectl drops the connection
            urllib.request.urlopen(f"http://127.0.0.1:{local[9999]}/", timeout=30)
        _, err = forward.communicate(timeout=30)  # and, as kubectl ≥ 1.31 does, gives up on the pod
    finally:
        if forward.poll() is None:
            forward.kill()
            forward.communicate()
    assert "an error occurred forwarding" in err and "dial tcp4 127.0.0.1:9999: connect: connection refused" in err
    assert "lost connection to pod" in err and forward.returncode == 1
