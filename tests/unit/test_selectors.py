"""Label/field selectors parse and match like the Kubernetes API server."""

import pytest

from drills.twin.api.selectors import (SelectorError, match_label_selector, parse_field_selector,
                                       parse_label_selector)

GPU = {"app": "trainer", "tier": "gpu", "volcano.sh/job-name": "llm-8b", "canary": ""}


@pytest.mark.parametrize("text, expected", [
    (None, True),
    ("", True),
    ("   ", True),
    ("app=trainer", True),
    ("app==trainer", True),
    ("app = trainer", True),
    ("app=other", False),
    ("missing=x", False),
    ("app!=other", True),
    ("app!=trainer", False),
    ("missing!=x", True),               # != matches objects without the label
    ("tier in (gpu,cpu)", True),
    ("tier in ( cpu , gpu )", True),
    ("tier in (cpu)", False),
    ("missing in (x)", False),
    ("tier notin (gpu)", False),
    ("tier notin (cpu,tpu)", True),
    ("missing notin (x)", True),
    ("tier", True),
    ("missing", False),
    ("!missing", True),
    ("! missing", True),
    ("!tier", False),
    ("volcano.sh/job-name=llm-8b", True),
    ("volcano.sh/job-name in (llm-8b,llm-70b)", True),
    ("canary=", True),                  # empty value equals the empty label value
    ("app=trainer,tier=gpu,!missing", True),
    ("app=trainer, tier=cpu", False),
    ("app=trainer,tier in (gpu),volcano.sh/job-name", True),
])
def test_label_selector_matches(text, expected):
    assert parse_label_selector(text)(GPU) is expected


def test_label_selector_on_missing_labels():
    assert parse_label_selector("!gpu")(None) is True
    assert parse_label_selector("gpu")({}) is False


@pytest.mark.parametrize("text, expected", [
    ("gpus>4", True), ("gpus>8", False), ("gpus<9", True), ("gpus<8", False), ("name>1", False),
])
def test_label_selector_integer_comparisons(text, expected):
    assert parse_label_selector(text)({"gpus": "8", "name": "x"}) is expected


@pytest.mark.parametrize("text, bad_term", [
    ("app=x,,tier=y", "empty term"),
    ("app=x,", "empty term"),
    ("app=x y", "app=x y"),
    ("app in (x", "app in (x"),
    ("app in x", "app in x"),
    ("in (a)", "in (a)"),
    ("-app=x", "-app=x"),
    ("app=x!", "app=x!"),
    ("app=-x", "app=-x"),
    ("Bad_Prefix/app=x", "Bad_Prefix/app=x"),
    ("/app=x", "/app=x"),
    ("gpus>four", "gpus>four"),
    ("app=" + "x" * 64, "app="),
    ("a" * 64, "a" * 64),
])
def test_label_selector_errors_name_the_term(text, bad_term):
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert bad_term in str(err.value)


POD = {
    "metadata": {"name": "trainer-0", "namespace": "ml"},
    "spec": {"nodeName": "gpu-node-1", "restartPolicy": "Never", "hostNetwork": True},
    "status": {"phase": "Running", "podIP": "10.0.0.7"},
}
PENDING = {"metadata": {"name": "trainer-1", "namespace": "ml"}, "spec": {}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize("text, running, pending", [
    (None, True, True),
    ("", True, True),
    ("metadata.name=trainer-0", True, False),
    ("metadata.name==trainer-0", True, False),
    ("metadata.namespace=ml", True, True),
    ("spec.nodeName=gpu-node-1", True, False),
    ("spec.nodeName=", False, True),        # kubectl's "unscheduled pods" selector
    ("spec.nodeName!=", True, False),
    ("status.phase!=Running", False, True),
    ("status.phase=Running,spec.nodeName=gpu-node-1", True, False),
    ("status.phase=Running,spec.nodeName=other", False, False),
    ("spec.hostNetwork=true", True, False),
    ("spec.hostNetwork=false", False, True),  # missing booleans read as false
    ("status.podIP=10.0.0.7", True, False),
    ("status.phase=Running,", True, False),   # trailing comma: empty term skipped
])
def test_field_selector_on_pods(text, running, pending):
    match = parse_field_selector(text)
    assert (match(POD), match(PENDING)) == (running, pending)


def test_field_selector_node_unschedulable_defaults_to_false():
    cordoned = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}
    fresh = {"metadata": {"name": "n2"}, "spec": {}}
    match = parse_field_selector("spec.unschedulable=false")
    assert (match(cordoned), match(fresh)) == (False, True)
    assert parse_field_selector("spec.unschedulable=true")(cordoned) is True


def test_field_selector_on_events():
    event = {"metadata": {"name": "e1", "namespace": "ml"}, "type": "Warning", "reason": "Evicted",
             "involvedObject": {"kind": "Pod", "name": "trainer-0", "uid": "u-1", "namespace": "ml"},
             "source": {"component": "kubelet"}}
    match = parse_field_selector("involvedObject.kind=Pod,involvedObject.name=trainer-0,"
                                 "involvedObject.uid=u-1,involvedObject.namespace=ml,type=Warning,reason=Evicted")
    assert match(event) is True
    assert parse_field_selector("source=kubelet")(event) is True
    assert parse_field_selector("type=Normal")(event) is False


def test_field_selector_escapes():
    obj = {"metadata": {"name": "a,b=c\\d"}}
    assert parse_field_selector(r"metadata.name=a\,b\=c\\d")(obj) is True
    assert parse_field_selector(r"metadata.name!=a\,b")(obj) is True


@pytest.mark.parametrize("text, message", [
    ("spec.foo=bar", "field label not supported: spec.foo"),
    ("metadata.labels=x", "field label not supported: metadata.labels"),
    ("metadata.name", "metadata.name"),
    ("=x", "missing field name"),
    ("metadata.name=a=b", "metadata.name=a=b"),
    ("metadata.name=a\\x", "invalid escape"),
])
def test_field_selector_errors(text, message):
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text)
    assert message in str(err.value)


def test_field_selector_per_kind():
    assert parse_field_selector("spec.unschedulable=true", kind="Node")
    with pytest.raises(SelectorError, match="field label not supported: spec.nodeName"):
        parse_field_selector("spec.nodeName=x", kind="Node")
    # metadata fields work for any kind, including custom resources
    assert parse_field_selector("metadata.name=j", kind="Job")({"metadata": {"name": "j"}})


LABELS = {"app": "trainer", "gpu": "h100"}


@pytest.mark.parametrize("selector, expected", [
    (None, False),                                                    # null selects nothing
    ({}, True),                                                       # empty selects everything
    ({"matchLabels": {"app": "trainer"}}, True),
    ({"matchLabels": {"app": "other"}}, False),
    ({"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100", "a100"]}]}, True),
    ({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["h100"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
    ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, False),
    ({"matchLabels": {"app": "trainer"},
      "matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ({"app": "trainer"}, True),                                       # a Service's plain selector map
    ({"app": "trainer", "gpu": "a100"}, False),
])
def test_match_label_selector(selector, expected):
    assert match_label_selector(selector, LABELS) is expected


@pytest.mark.parametrize("expr", [
    {"key": "gpu", "operator": "In", "values": []},
    {"key": "gpu", "operator": "Exists", "values": ["x"]},
    {"key": "gpu", "operator": "Equals", "values": ["x"]},
])
def test_match_label_selector_rejects_bad_expressions(expr):
    with pytest.raises(SelectorError, match="gpu"):
        match_label_selector({"matchExpressions": [expr]}, LABELS)
