"""The dynamic-client tests that ship inside the `kubernetes` sdist on PyPI (`kubernetes/dynamic/test_client.py`
and `test_discovery.py`), test logic unchanged, run against one twin in one pytest subprocess.

The sdist is fetched at test time with pip at a pinned version (cached under ~/.cache/gpu-drills/) and only
those two files are extracted; the installed client is what they drive. The only shim is the config bootstrap
they import, `kubernetes.e2e_test.base.get_e2e_configuration()` (in the client's repository, not its sdist):
ours loads the twin's kubeconfig, as that one loads a real cluster's. Without PyPI the test skips.

Every test must pass except the few no server of the twin's version can pass; each of those is listed with
the failure it must show, so a twin that starts or stops matching the real server here is noticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from drills.twin.launcher import start_twin

PIN = "37.0.2"  # the version pyproject's `kubernetes` range resolves to in the venv
FILES = ("test_client.py", "test_discovery.py")
MODULES = tuple(f"kubernetes.dynamic.{name.removesuffix('.py')}" for name in FILES)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-drills" / "peer-sdist"

_V1BETA1_CRD = ("No matches found for {'api_version': 'apiextensions.k8s.io/v1beta1', "
                "'kind': 'CustomResourceDefinition'}")
# test name → (what its failure says, why no server of the twin's version passes it)
NOT_ON_THIS_SERVER = {
    "test_cluster_custom_resources": (_V1BETA1_CRD, "apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22; "
                                                    "the twin serves 1.32"),
    "test_namespaced_custom_resources": (_V1BETA1_CRD, "as above"),
    "test_async_namespaced_custom_resources": (_V1BETA1_CRD, "as above"),
    "test_cache_decoder_resource_and_subresource": (
        "AssertionError: False is not true",
        "compares two Resource objects with ==, which kubernetes.dynamic.resource.Resource does not define: "
        "identity, False against any server"),
}

_BASE = '''\
"""Config bootstrap for the sdist's dynamic-client tests: the twin's kubeconfig (KUBECONFIG)."""
import os

from kubernetes.client import Configuration
from kubernetes.config import kube_config


def get_e2e_configuration():
    config = Configuration()
    kube_config.load_kube_config(config_file=os.environ["KUBECONFIG"], client_configuration=config)
    return config
'''

_PLUGIN = """\
import kubernetes
import kubernetes.dynamic

kubernetes.__path__.append({shim!r})  # `kubernetes.e2e_test.base`: the config bootstrap
kubernetes.dynamic.__path__.append({peer!r})  # the sdist's test files, unchanged, beside the installed client
"""


def _sdist() -> Path:
    """The pinned sdist, downloaded once into the cache (skip when PyPI cannot be reached)."""
    target = CACHE / f"kubernetes-{PIN}.tar.gz"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--retries", "1", "--timeout", "20", "-d", tmp, f"kubernetes=={PIN}"],
                              capture_output=True, text=True, timeout=600)
        got = Path(tmp) / target.name
        if done.returncode != 0 or not got.exists():
            last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            pytest.skip(f"network: pip could not download kubernetes=={PIN} from PyPI ({last})")
        os.replace(got, target)  # atomic: a concurrent run sees the whole file or none
    return target


def _extract(sdist: Path, work: Path) -> Path:
    peer = work / "peer"
    peer.mkdir()
    with tarfile.open(sdist) as tar:
        for name in FILES:
            member = tar.extractfile(f"kubernetes-{PIN}/kubernetes/dynamic/{name}")
            assert member is not None, f"{sdist.name} lacks kubernetes/dynamic/{name}"
            (peer / name).write_bytes(member.read())
    return peer


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """test name → (passed | failed | error | skipped, message), from one run of the sdist's tests."""
    work = tmp_path_factory.mktemp("peer-dynamic")
    peer = _extract(_sdist(), work)
    shim = work / "shim"
    (shim / "e2e_test").mkdir(parents=True)
    (shim / "e2e_test" / "__init__.py").write_text("")
    (shim / "e2e_test" / "base.py").write_text(_BASE)
    (work / "peer_shim.py").write_text(_PLUGIN.format(shim=str(shim), peer=str(peer)))
    handle = start_twin(work / "twin", profile="minimal")
    try:
        env = dict(os.environ, KUBECONFIG=handle.kubeconfig, HOME=str(work), TMPDIR=str(work),
                   PYTHONPATH=str(work))
        junit = work / "junit.xml"
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "peer_shim", "-p", "no:cacheprovider",
                               "-p", "no:locust", "-q", "-c", os.devnull, "--rootdir", str(work),
                               f"--junitxml={junit}", "--pyargs", *MODULES],
                              cwd=work, env=env, capture_output=True, text=True, timeout=900)
    finally:
        handle.stop()
    if not junit.exists():
        pytest.fail(f"the sdist's tests did not run (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return _parse(junit)


def _parse(junit: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        verdict = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if verdict is None:
            out[case.get("name")] = ("passed", "")
        else:
            out[case.get("name")] = ({"failure": "failed"}.get(verdict.tag, verdict.tag),
                                     f"{verdict.get('message', '')}\n{verdict.text or ''}")
    return out


def _table(outcomes: dict[str, tuple[str, str]]) -> str:
    return "\n".join(f"  {state:8} {name}: {message.strip().splitlines()[0] if message.strip() else ''}"
                     for name, (state, message) in sorted(outcomes.items()))


def test_the_sdist_dynamic_client_tests_pass_against_the_twin(outcomes):
    assert len(outcomes) == 14, f"expected the 14 tests of kubernetes {PIN}'s two files:\n{_table(outcomes)}"
    wrong = {name: got for name, got in outcomes.items() if name not in NOT_ON_THIS_SERVER and got[0] != "passed"}
    assert not wrong, f"{len(wrong)} of the sdist's dynamic-client tests did not pass:\n{_table(outcomes)}"


def test_the_ones_no_server_of_this_version_passes_fail_for_their_own_reason(outcomes):
    for name, (says, why) in NOT_ON_THIS_SERVER.items():
        state, message = outcomes[name]
        assert state == "failed" and says in message, f"{name} ({why}) was {state}: {message[:400]}"
