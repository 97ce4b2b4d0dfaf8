"""fieldValidation and required fields over HTTP: the official Python client and `kubectl apply --validate`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

UNKNOWN = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ta", "namspace": "type-a"},
           "spec": {"schedulerName": "none", "containers": [{"image": "busybox", "name": "busybox", "volumeMount": []}]}}
MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namspace: type-a
spec:
  schedulerName: none
  containers:
  - image: busybox
    name: busybox
    volumeMount: []
"""


@pytest.fixture
def pods(kube_api, twin_namespace, tmp_path):
    """The dynamic client: the typed API refuses unknown fields itself (pydantic) before the server sees them."""
    return _dynamic(kube_api, tmp_path).resources.get(api_version="v1", kind="Pod"), twin_namespace


def _dynamic(kube_api, folder) -> dynamic.DynamicClient:
    """Its discovery cache in the test's folder (by default a file in /tmp that outlives the test)."""
    return dynamic.DynamicClient(kube_api, cache_file=str(folder / "discovery.json"))


def _validation(mode: str) -> list:
    return [("fieldValidation", mode)]


def test_strict_is_400_naming_every_unknown_field(pods):
    api, ns = pods
    with pytest.raises(ApiException) as err:
        api.create(body=UNKNOWN, namespace=ns, query_params=_validation("Strict"))
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "metadata.namspace", '
        'unknown field "spec.containers[0].volumeMount"')
    with pytest.raises(ApiException):
        api.get(name="ta", namespace=ns)


def _raw(kube_api, method: str, path: str, body: dict, query: list, ctype: str = "application/json"):
    """One request through the client's own transport, answering the raw response (its Warning headers)."""
    request = kube_api.param_serialize(method, path, query_params=query, body=body, auth_settings=["BearerToken"],
                                       header_params={"Content-Type": ctype, "Accept": "application/json"})
    return kube_api.call_api(*request)


def test_warn_is_the_default_and_drops_the_fields(pods, kube_api):
    api, ns = pods
    resp = _raw(kube_api, "POST", f"/api/v1/namespaces/{ns}/pods", UNKNOWN, [])
    assert resp.status == 201
    assert resp.headers.getlist("Warning") == ['299 - "unknown field \\"metadata.namspace\\""',
                                               '299 - "unknown field \\"spec.containers[0].volumeMount\\""']
    stored = api.get(name="ta", namespace=ns).to_dict()
    assert "namspace" not in stored["metadata"] and "volumeMount" not in stored["spec"]["containers"][0]
    quiet = _raw(kube_api, "PATCH", f"/api/v1/namespaces/{ns}/pods/ta", {"metadata": {"labelz": {}}},
                 _validation("Ignore"), "application/merge-patch+json")
    assert quiet.status == 200 and not quiet.headers.getlist("Warning")


def test_missing_required_fields_are_422(kube_api, twin_namespace, tmp_path):
    apps = _dynamic(kube_api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    body = {"metadata": {"name": "web"}, "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                                             "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    with pytest.raises(ApiException) as err:
        apps.create(body=body, namespace=twin_namespace)  # the typed API would refuse it before sending
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == 'Deployment.apps "web" is invalid: spec.selector: Required value'
    assert status["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                            "field": "spec.selector"}]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_apply_validate(twin, twin_namespace, tmp_path):
    env = dict(os.environ, KUBECONFIG=twin.kubeconfig)

    def apply(validate: str, name: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--cache-dir", str(tmp_path), "-n", twin_namespace, "apply",
                               f"--validate={validate}", "-f", "-"], input=MANIFEST.format(name=name), env=env,
                              capture_output=True, text=True, timeout=60)

    strict = apply("strict", "strict")
    assert strict.returncode == 1
    assert strict.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" cannot be handled as a '
        'Pod: strict decoding error: unknown field "metadata.namspace", unknown field "spec.containers[0].volumeMount"')
    warn = apply("warn", "warned")
    assert warn.returncode == 0 and warn.stdout.strip() == "pod/warned created"
    # (kubectl also logs that it cannot tell whether the server validates fields: the twin serves no OpenAPI v3)
    assert [line for line in warn.stderr.splitlines() if line.startswith("Warning:")] == [
        'Warning: unknown field "metadata.namspace"', 'Warning: unknown field "spec.containers[0].volumeMount"']
