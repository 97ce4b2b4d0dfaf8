"""PartialObjectMetadata(List) as the real server's transformObject renders them (pure functions)."""

import pytest

from drills.twin.api import partial, status as st
from drills.twin.api.resources import by_path

NODES = by_path("", "v1", "nodes")
DEPLOYMENTS = by_path("apps", "v1", "deployments")
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "labels": {"a": "b"}},
        "spec": {"taints": []}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}


@pytest.mark.parametrize("accept, want", [
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", ("PartialObjectMetadataList", "v1")),
    ("application/json; as=PartialObjectMetadata; v=v1beta1; g=meta.k8s.io", ("PartialObjectMetadata", "v1beta1")),
    # client-go's metadata client: the v1 form first, v1beta1 and plain JSON as fallbacks
    ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
     "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1,application/json",
     ("PartialObjectMetadataList", "v1")),
    ("application/json", None), (None, None), ("application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=example.com", None),
])
def test_the_first_clause_naming_a_partial_form_is_the_target(accept, want):
    got = partial.requested(accept)
    assert (got and (got.kind, got.version)) == (want or None)


def test_a_list_keeps_metadata_resource_version_and_continue_and_drops_the_rest():
    target = partial.requested("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
    body = partial.listed(target, NODES, [NODE], {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3})
    assert body == {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": "7", "continue": "tok"},
                    "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": NODE["metadata"]}]}
    assert partial.media_type(target) == "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


def test_one_object_as_a_list_and_a_list_as_one_object_are_not_acceptable():
    as_list = partial.requested("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
    with pytest.raises(st.ApiError) as err:
        partial.single(as_list, DEPLOYMENTS, {"metadata": {"name": "x"}})
    assert (err.value.code, err.value.reason) == (406, "NotAcceptable")
    assert err.value.message == ("you requested PartialObjectMetadataList, but the requested object is not a list "
                                 "(*apps.Deployment)")
    one = partial.requested("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
    with pytest.raises(st.ApiError) as err:
        partial.listed(one, NODES, [NODE], {"resourceVersion": "7"})
    assert err.value.message == "you requested PartialObjectMetadata, but the requested object is a list (*core.NodeList)"
    assert partial.single(one, NODES, NODE)["metadata"] == NODE["metadata"]
