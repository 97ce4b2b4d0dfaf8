"""metadata.managedFields written by server-side apply (pure functions)."""

import pytest

from drills.twin.api import managed, status as st

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "labels": {"name": "web"}},
       "spec": {"containers": [{"image": "nginx", "name": "nginx",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}


def test_an_applied_configuration_owns_its_leaves_and_list_items():
    # the shape of the Apply entries in https://kubernetes.io/docs/reference/using-api/server-side-apply/ (no `.`
    # for maps) and of a container port's key (listMapKeys containerPort, protocol)
    assert managed.fields_v1(POD, "Pod", "v1") == {
        "f:metadata": {"f:labels": {"f:name": {}}},
        "f:spec": {"f:containers": {'k:{"name":"nginx"}': {
            ".": {}, "f:image": {}, "f:name": {},
            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}, "f:protocol": {}}},
        }}},
    }


def test_sets_atomic_lists_and_the_fields_every_object_has():
    config = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p", "uid": "u", "finalizers": ["a.io/x"]},
              "spec": {"tolerations": [{"key": "k", "operator": "Exists"}], "nodeSelector": {}}}
    assert managed.fields_v1(config, "Pod", "v1") == {
        "f:metadata": {"f:finalizers": {'v:"a.io/x"': {}}},
        "f:spec": {"f:tolerations": {}, "f:nodeSelector": {}},
    }
    assert managed.fields_v1({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                             "ConfigMap", "v1") == {}


def test_applying_again_replaces_the_managers_entry_and_keeps_the_others():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": [
        {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}},
        {"manager": "me", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]},
        "data": {"a": "1"}}
    out = managed.applied(obj, {"data": {"a": "1"}}, "me", "2026-01-01T00:00:00Z")
    assert [(e["manager"], e["operation"]) for e in out["metadata"]["managedFields"]] == [
        ("kubectl", "Update"), ("me", "Apply")]
    assert out["metadata"]["managedFields"][-1] == {
        "manager": "me", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}


def test_apply_needs_a_field_manager_and_no_managed_fields():
    with pytest.raises(st.ApiError) as err:
        managed.check_apply({}, "")
    assert (err.value.code, err.value.message) == (
        422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch')
    with pytest.raises(st.ApiError) as err:
        managed.check_apply({"metadata": {"managedFields": [{"manager": "x"}]}}, "me")
    assert (err.value.code, err.value.message) == (400, "metadata.managedFields must be nil")
