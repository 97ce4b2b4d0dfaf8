"""The one validation layer (drills/core/grammar.py): every kind refuses what would start another line, option or
path, every numeric profile value has a lower and an upper bound, and the fio writer is the last gate."""

from __future__ import annotations

import pytest

from drills.core.errors import InvalidProfile
from drills.core.grammar import KINDS, GrammarError, check, number_ranges
from drills.faults.storage.fio import FioJob
from drills.profile.model import TargetProfile, parse_profile

INJECTIONS = ["a\nb", "a\rb", "a\x00b", "a\x1b[31mb", "a\u2028b", "", " ", "x" * 5000]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("value", INJECTIONS, ids=["newline", "cr", "nul", "escape", "line-sep", "empty", "space",
                                                   "too-long"])
def test_no_kind_takes_a_control_character_or_an_overlong_value(kind, value):
    if value == "" and KINDS[kind].min_len == 0:
        return
    if value == " " and kind in ("local_path", "text"):  # a space is printable text on one line
        return
    with pytest.raises(GrammarError) as err:
        check(kind, value)
    assert err.value.kind == kind


@pytest.mark.parametrize("kind, good, bad", [
    ("dns_label", "ai-platform", "AI_platform"),
    ("dns_subdomain", "gpu-node-01.rack3", "gpu node"),
    ("label_key", "network.gpu-drills.io/leaf", "a/b/c"),
    ("label_value", "leaf-1", "leaf 1"),
    ("selector", "gpu-drills.io/role=new,zone!=b", "role=new;reboot"),
    ("remote_path", "/mnt/ckpt/run-1", "/mnt/ckpt:/etc"),
    ("remote_path", "/mnt/ckpt", "/mnt/../etc"),
    ("remote_path", "/mnt/ckpt", "relative/path"),
    ("remote_path", "/mnt/ckpt", "/mnt/${HOME}"),
    ("host", "10.0.0.5", "host;id"),
    ("fio_option", "rate", "--rate"),
    ("image", "registry.example.com/fio:3.36", "Registry/Fio"),
    ("run_id", "nightly-42", "../x"),
    ("time_zone", "Europe/Berlin", "Europe/Berlin; rm"),
    ("http_url", "http://prometheus.monitoring:9090", "http://user:pw@prometheus:9090"),
    ("http_url", "https://am.example.com/alertmanager", "file:///etc/passwd"),
    ("host_port", "10.0.0.5:9400", "10.0.0.5"),
])
def test_each_kind_takes_its_grammar_and_refuses_its_neighbour(kind, good, bad):
    assert check(kind, good) == good
    with pytest.raises(GrammarError):
        check(kind, bad)


def test_every_numeric_profile_value_has_a_documented_range():
    ranges = list(number_ranges(TargetProfile))
    assert len(ranges) > 50  # the walk reaches the nested sections
    unbounded = [path for path, low, high in ranges if low is None or high is None]
    assert unbounded == []


@pytest.mark.parametrize("yaml_text, field", [
    ("cluster: {twin: {scale: .inf}}", "cluster.twin.scale"),
    ("slo: {training_recovery_s: .inf}", "slo.training_recovery_s"),
    ("slo: {training_recovery_s: inf}", "slo.training_recovery_s"),
    ("slo: {inference_error_budget: .nan}", "slo.inference_error_budget"),
    ("storage: {probe_size_mb: 99999999999}", "storage.probe_size_mb"),
    ("acceptance: {thresholds: {gemm_gflops_min: .inf}}", "acceptance.thresholds.gemm_gflops_min"),
    ("acceptance: {jobs: {gpu: {image: 'x:1', command: [a], timeout_s: .inf}}}", "acceptance.jobs.gpu.timeout_s"),
    ("safety: {lock_duration_s: 0}", "safety.lock_duration_s"),
    ("safety: {stop_conditions: [{metric: not_ready_nodes, above: .inf}]}", "safety.stop_conditions.0.above"),
    ("storage: {checkpoint_store: \"/ckpt\\nexec_prerun=touch /tmp/x\"}", "storage.checkpoint_store"),
    ("storage: {fio_options: {\"rate\\nexec_prerun\": 1}}", "storage.fio_options"),
    ("storage: {fio_options: {\"--rate\": 1k}}", "storage.fio_options"),
    ("storage: {fio_options: {\" rate\": 1k}}", "storage.fio_options"),
    ("storage: {fio_options: {numjobs: 100000}}", "storage.fio_options"),
    ("storage: {saturation: {clients: [\"node-3\\n\"]}}", "storage.saturation.clients"),
    ("storage: {saturation: {size: \"1G\\n\"}}", "storage.saturation.size"),
    ("storage: {saturation: {mount_path: \"/store\\nrm\"}}", "storage.saturation.mount_path"),
    ("workloads: {training: {namespace: \"ai-platform\\nx\"}}", "workloads.training.namespace"),
    ("workloads: {inference: {label_selector: \"app=x\\n\"}}", "workloads.inference.label_selector"),
    ("acceptance: {store_dir: \"/mnt/store;reboot\"}", "acceptance.store_dir"),
    ("acceptance: {jobs: {gpu: {image: \"img\\n\", command: [a]}}}", "acceptance.jobs.gpu.image"),
])
def test_a_profile_value_outside_its_grammar_or_range_is_one_line(yaml_text, field):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(yaml_text + "\n", source="p.yaml")
    assert f"profile p.yaml: {field}" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, says", [
    ({"directory": "/ckpt\nexec_prerun=touch /tmp/x"}, "control character"),
    ({"directory": "/ckpt", "extra": (("rate\nexec_prerun", "1"),)}, "not a fio option name"),
    ({"directory": "/ckpt", "extra": (("--rate", "1k"),)}, "not a fio option name"),
    ({"directory": "/ckpt", "extra": (("rate", "1k\nexec_postrun=reboot"),)}, "control character"),
])
def test_the_fio_writer_is_the_last_gate(kwargs, says):
    """Whatever path a value came by, no job file or fio command line is written with it."""
    with pytest.raises(InvalidProfile, match=says):
        FioJob(name="drills-saturate", **kwargs)
