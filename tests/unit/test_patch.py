"""PATCH semantics the twin must share with the real API server (what kubectl and client-go send)."""

import copy

import pytest

from drills.twin.api.patch import (APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, PatchError,
                                   apply_patch, merge_keys)


def node():
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"a": "1"}},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                                      {"type": "MemoryPressure", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                     {"type": "Hostname", "address": "gpu-1"}]}}


def pod():
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "trainer-0", "finalizers": ["a", "b"],
                         "ownerReferences": [{"uid": "u1", "kind": "Job", "name": "j"}]},
            "spec": {"containers": [{"name": "main", "image": "trainer:1", "env": [{"name": "A", "value": "1"},
                                                                                   {"name": "B", "value": "2"}],
                                     "ports": [{"containerPort": 8080}], "args": ["--x"]},
                                    {"name": "sidecar", "image": "log:1"}],
                     "volumes": [{"name": "data", "emptyDir": {}}],
                     "tolerations": [{"key": "gpu", "operator": "Exists"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "main", "ready": True}, {"name": "sidecar", "ready": True}]}}


# -- strategic merge patch ------------------------------------------------------------------------------
def test_cordon_and_uncordon_as_kubectl_sends_them():
    cordoned = apply_patch(node(), {"spec": {"unschedulable": True}}, STRATEGIC_MERGE_PATCH, "Node")
    assert cordoned["spec"] == {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "unschedulable": True}
    uncordoned = apply_patch(cordoned, {"spec": {"unschedulable": None}}, STRATEGIC_MERGE_PATCH, "Node")
    assert uncordoned["spec"] == {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}


def test_input_object_is_not_modified():
    original = pod()
    apply_patch(original, {"spec": {"containers": [{"name": "main", "image": "trainer:2"}]}},
                STRATEGIC_MERGE_PATCH, "Pod")
    assert original == pod()


def test_container_image_change_merges_by_name():
    out = apply_patch(pod(), {"spec": {"containers": [{"name": "main", "image": "trainer:2"}]}},
                      STRATEGIC_MERGE_PATCH, "Pod")
    main, sidecar = out["spec"]["containers"]
    assert main["image"] == "trainer:2" and main["env"] == pod()["spec"]["containers"][0]["env"]
    assert sidecar == {"name": "sidecar", "image": "log:1"}


def test_nested_lists_merge_by_their_own_keys():
    patch = {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                                      "ports": [{"containerPort": 9090}], "args": ["--y"]}]}}
    main = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in main["env"]} == {"A": "1", "B": "20", "C": "3"}
    assert [p["containerPort"] for p in main["ports"]] == [9090, 8080]  # new items first, as upstream
    assert main["args"] == ["--y"]  # args has no merge strategy: replaced


def test_deployment_template_containers_merge_by_name():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a", "image": "x:1"},
                                                                            {"name": "b", "image": "y:1"}]}}}}
    out = apply_patch(deploy, {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "y:2"}]}}}},
                      STRATEGIC_MERGE_PATCH, "Deployment")
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "x:1"},
                                                             {"name": "b", "image": "y:2"}]


def test_condition_update_by_type_keeps_order_and_other_conditions():
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}}
    out = apply_patch(node(), patch, STRATEGIC_MERGE_PATCH, "Node")
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
        {"type": "MemoryPressure", "status": "False"}]


def test_node_addresses_merge_by_type_and_taints_are_replaced():
    patch = {"spec": {"taints": [{"key": "drain", "effect": "NoExecute"}]},
             "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}}
    out = apply_patch(node(), patch, STRATEGIC_MERGE_PATCH, "Node")
    assert out["spec"]["taints"] == [{"key": "drain", "effect": "NoExecute"}]
    assert out["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.9"},
                                          {"type": "Hostname", "address": "gpu-1"}]


def test_tolerations_and_container_statuses_are_replaced():
    patch = {"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]},
             "status": {"containerStatuses": [{"name": "main", "ready": False}]}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert out["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]
    assert out["status"]["containerStatuses"] == [{"name": "main", "ready": False}]


def test_patch_delete_directive_in_list_item():
    patch = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["main"]


def test_patch_replace_directive_in_list_and_map():
    patch = {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}, {"$patch": "replace"}]},
             "metadata": {"labels": {"b": "2", "$patch": "replace"}}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert out["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert out["metadata"]["labels"] == {"b": "2"}


def test_patch_delete_directive_on_map_empties_it():
    out = apply_patch(node(), {"metadata": {"labels": {"$patch": "delete"}}}, STRATEGIC_MERGE_PATCH, "Node")
    assert out["metadata"]["labels"] == {}


def test_null_deletes_map_keys_and_is_dropped_from_new_values():
    patch = {"metadata": {"labels": {"a": None, "b": "2"}, "annotations": {"x": "1", "y": None}}}
    out = apply_patch(node(), patch, STRATEGIC_MERGE_PATCH, "Node")
    assert out["metadata"]["labels"] == {"b": "2"}
    assert out["metadata"]["annotations"] == {"x": "1"}


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list():
    out = apply_patch(pod(), {"metadata": {"finalizers": ["b", "c"]}}, STRATEGIC_MERGE_PATCH, "Pod")
    assert sorted(out["metadata"]["finalizers"]) == ["a", "b", "c"]
    out = apply_patch(pod(), {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, STRATEGIC_MERGE_PATCH, "Pod")
    assert out["metadata"]["finalizers"] == ["b"]


def test_owner_references_merge_by_uid():
    patch = {"metadata": {"ownerReferences": [{"uid": "u1", "name": "j2"}, {"uid": "u2", "kind": "PodGroup"}]}}
    refs = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")["metadata"]["ownerReferences"]
    assert {r["uid"]: r.get("name") for r in refs} == {"u1": "j2", "u2": None}


def test_set_element_order_is_honoured():
    patch = {"status": {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"},
                                                         {"type": "Initialized"}],
                        "conditions": [{"type": "Initialized", "status": "True"}]}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "PodScheduled", "Initialized"]


def test_set_element_order_for_primitives_with_deletion():
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "c"], "finalizers": ["c"],
                          "$deleteFromPrimitiveList/finalizers": ["a"]}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert out["metadata"]["finalizers"] == ["b", "c"]


def test_retain_keys_clears_unlisted_fields():
    patch = {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}]}}
    out = apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert out["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/d"}}]


def test_service_ports_merge_by_port():
    svc = {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80, "name": "http"},
                                                                     {"port": 443, "name": "https"}]}}
    out = apply_patch(svc, {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}, STRATEGIC_MERGE_PATCH, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}]


def test_pdb_selector_is_replaced_whole():
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a", "tier": "t"}}}}
    out = apply_patch(pdb, {"spec": {"selector": {"matchLabels": {"app": "b"}}}}, STRATEGIC_MERGE_PATCH,
                      "PodDisruptionBudget")
    assert out["spec"]["selector"] == {"matchLabels": {"app": "b"}}


def test_custom_resources_merge_like_merge_patch():
    vcjob = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
             "spec": {"tasks": [{"name": "worker", "replicas": 4}, {"name": "ps", "replicas": 1}]}}
    out = apply_patch(vcjob, {"spec": {"tasks": [{"name": "worker", "replicas": 2}]}}, STRATEGIC_MERGE_PATCH, "Job")
    assert out["spec"]["tasks"] == [{"name": "worker", "replicas": 2}]  # no merge key: replaced
    assert merge_keys("Job", "batch/v1")["spec.template.spec.containers"] == "name"
    assert "spec.template.spec.containers" not in merge_keys("Job", "batch.volcano.sh/v1alpha1")


@pytest.mark.parametrize("patch, message", [
    ({"spec": {"containers": [{"image": "x"}]}}, "merge key 'name'"),
    ({"spec": {"containers": [{"$patch": "delete"}]}}, "merge key 'name'"),
    ({"spec": {"$patch": "explode"}}, "explode"),
    ({"spec": {"$bogus": 1}}, "$bogus"),
    ({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name"], "hostPath": {}}]}}, "hostPath"),
    (["not", "a", "map"], "JSON object"),
])
def test_strategic_merge_errors(patch, message):
    with pytest.raises(PatchError) as err:
        apply_patch(pod(), patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert message in str(err.value)


# -- merge patch ----------------------------------------------------------------------------------------
def test_merge_patch_replaces_lists_and_null_deletes():
    out = apply_patch(pod(), {"metadata": {"labels": {"x": "1"}, "finalizers": None},
                              "spec": {"containers": [{"name": "only", "image": "i"}]}}, MERGE_PATCH, "Pod")
    assert out["spec"]["containers"] == [{"name": "only", "image": "i"}]
    assert "finalizers" not in out["metadata"] and out["metadata"]["labels"] == {"x": "1"}
    assert out["spec"]["volumes"] == pod()["spec"]["volumes"]


def test_merge_patch_accepts_json_text_and_content_type_parameters():
    out = apply_patch(node(), b'{"spec":{"unschedulable":true}}', "application/merge-patch+json; charset=utf-8")
    assert out["spec"]["unschedulable"] is True


# -- JSON patch -----------------------------------------------------------------------------------------
def test_json_patch_add_replace_remove():
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"b": "2"}},
           {"op": "replace", "path": "/spec/containers/0/image", "value": "trainer:3"},
           {"op": "remove", "path": "/spec/containers/1"},
           {"op": "test", "path": "/status/phase", "value": "Running"}]
    out = apply_patch(pod(), ops, JSON_PATCH)
    assert out["metadata"].get("labels") == {"b": "2"}
    assert [c["image"] for c in out["spec"]["containers"]] == ["trainer:3"]


@pytest.mark.parametrize("ops, message", [
    ([{"op": "test", "path": "/status/phase", "value": "Failed"}], "test operation failed"),
    ([{"op": "remove", "path": "/spec/nope"}], "could not be applied"),
    ([{"op": "add", "path": "/metadata/labels/b", "value": "2"}], "could not be applied"),  # parent must exist
    ([{"op": "replace", "path": "/spec/containers/9/image", "value": "x"}], "could not be applied"),
    ([{"op": "frobnicate", "path": "/spec"}], "could not be applied"),
    ({"op": "add", "path": "/x", "value": 1}, "list of operations"),
    ([{"op": "replace", "path": "", "value": 5}], "not a JSON object"),
])
def test_json_patch_errors(ops, message):
    original = pod()
    with pytest.raises(PatchError) as err:
        apply_patch(original, copy.deepcopy(ops), JSON_PATCH)
    assert message in str(err.value)
    assert original == pod()


# -- server-side apply (simplified) and content types ----------------------------------------------------
def test_apply_patch_merges_yaml_configuration():
    body = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels:\n    role: gpu\nspec:\n  unschedulable: true\n"
    out = apply_patch(node(), body, APPLY_PATCH, "Node")
    assert out["metadata"]["labels"] == {"a": "1", "role": "gpu"}
    assert out["spec"]["unschedulable"] is True and out["status"] == node()["status"]


def test_unsupported_content_type():
    with pytest.raises(PatchError, match="not a supported patch type"):
        apply_patch(node(), {}, "application/json")


def test_undecodable_body():
    with pytest.raises(PatchError, match="error decoding patch"):
        apply_patch(node(), "{not json", MERGE_PATCH)
