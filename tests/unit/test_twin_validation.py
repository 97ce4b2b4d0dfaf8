"""Unknown fields (fieldValidation) and the 422 field errors of the kinds the twin serves."""

from __future__ import annotations

import pytest

from drills.twin.api import schema, status as st
from drills.twin.api.resources import by_path
from drills.twin.api.validation import validate

PODS = by_path("", "v1", "pods")
DEPLOYMENTS = by_path("apps", "v1", "deployments")
JOBS = by_path("batch", "v1", "jobs")
SERVICES = by_path("", "v1", "services")
ROLES = by_path("rbac.authorization.k8s.io", "v1", "roles")
VCJOBS = by_path("batch.volcano.sh", "v1alpha1", "jobs")


def _pod() -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ta", "namspace": "type-a"},
            "spec": {"containers": [{"image": "busybox", "name": "busybox", "volumeMount": [],
                                     "resources": {"limits": {"nvidia.com/gpu": 8}}}],
                     "nodeSelector": {"gpu": "h100"}}}


def test_unknown_fields_are_named_by_path_and_dropped_outside_strict():
    pod = _pod()
    assert schema.unknown_fields(PODS, pod, drop=False) == ["metadata.namspace", "spec.containers[0].volumeMount"]
    assert "namspace" in pod["metadata"]
    assert schema.unknown_fields(PODS, pod, drop=True) == ["metadata.namspace", "spec.containers[0].volumeMount"]
    assert pod["metadata"] == {"name": "ta"} and "volumeMount" not in pod["spec"]["containers"][0]
    assert schema.unknown_fields(PODS, pod, drop=False) == []


def test_the_strict_error_and_the_warning_read_like_the_real_servers():
    err = schema.strict_error(PODS, ["metadata.namspace"])
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.message == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                           'unknown field "metadata.namspace"')
    assert schema.warning_header("spec.x") == '299 - "unknown field \\"spec.x\\""'


def test_patch_directives_are_not_fields_and_custom_resources_are_not_checked():
    patch = {"spec": {"$setElementOrder/containers": [{"name": "a"}],
                      "containers": [{"name": "a", "$patch": "delete", "imagee": "x"}]}}
    assert schema.unknown_fields(PODS, patch, drop=False, patch=True) == ["spec.containers[0].imagee"]
    assert schema.unknown_fields(VCJOBS, {"spec": {"anything": 1}}, drop=False) == []


def _invalid(rt, obj) -> st.ApiError:
    obj.setdefault("metadata", {}).setdefault("name", "web")
    with pytest.raises(st.ApiError) as err:
        validate(rt, obj)
    assert (err.value.code, err.value.reason) == (422, "Invalid")
    return err.value


def test_a_deployment_needs_a_selector_that_selects_its_template():
    containers = [{"name": "main", "image": "nginx"}, {"name": "main", "image": "nginx"}]
    err = _invalid(DEPLOYMENTS, {"spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                                       "spec": {"containers": containers}}}})
    assert err.message == ('Deployment.apps "web" is invalid: [spec.selector: Required value, '
                           'spec.template.spec.containers[1].name: Duplicate value: "main"]')
    assert [c["reason"] for c in err.details["causes"]] == ["FieldValueRequired", "FieldValueDuplicate"]
    err = _invalid(DEPLOYMENTS, {"spec": {"selector": {"matchLabels": {"app": "api"}},
                                          "template": {"metadata": {"labels": {"app": "web"}},
                                                       "spec": {"containers": containers[:1]}}}})
    assert err.message == ('Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
                           'map[string]string{"app":"web"}: `selector` does not match template `labels`')


def test_jobs_services_roles_and_pods_refuse_what_the_real_server_refuses():
    job = {"spec": {"template": {"spec": {"restartPolicy": "Always",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert _invalid(JOBS, job).message == ('Job.batch "web" is invalid: spec.template.spec.restartPolicy: '
                                           'Unsupported value: "Always": supported values: "OnFailure", "Never"')
    assert _invalid(SERVICES, {"spec": {"selector": {"app": "web"}}}).message == \
        'Service "web" is invalid: spec.ports: Required value'
    validate(SERVICES, {"metadata": {"name": "headless"}, "spec": {"clusterIP": "None"}})
    assert _invalid(ROLES, {"rules": [{"apiGroups": [""], "resources": ["pods"]}]}).message == \
        'Role.rbac.authorization.k8s.io "web" is invalid: rules[0].verbs: Required value: verbs must contain at ' \
        'least one value'
    assert _invalid(PODS, {"spec": {"containers": [{"name": "Main", "image": ""}]}}).message.startswith(
        'Pod "web" is invalid: [spec.containers[0].name: Invalid value: "Main": a lowercase RFC 1123 label')
