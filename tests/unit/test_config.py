"""Target profile: defaults, YAML loading, one-line errors and the safety checks."""

import textwrap

import pytest

from drills.profile.model import TargetProfile, load_target, parse_duration, parse_profile
from drills.profile.safety import check_blast_radius, check_namespace_allowed, check_node_allowed, check_switch_allowed
from drills.core.errors import InvalidProfile, UnsafeTarget


def write(tmp_path, text, name="prod.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_line(tmp_path, text) -> str:
    path = write(tmp_path, text)
    with pytest.raises(InvalidProfile) as info:
        load_target(str(path))
    line = str(info.value)
    assert "\n" not in line
    return line


def test_builtin_twin_profile():
    profile = load_target(None)
    assert profile.cluster.mode == "twin"
    assert profile.workloads.training.job == "llm-finetune-8b"
    assert profile.workloads.training.namespace == "ai-platform"
    assert profile.workloads.inference.deployment == "llama-7b-infer"
    assert profile.slo.training_recovery_s == 900 and profile.slo.inference_recovery_s == 300
    assert profile.slo.model_fields_set == set()  # the built-in profile overrides no feature's number
    assert profile.slo.lost_steps_budget is None  # the feature's "no more than N steps are lost" holds
    assert not profile.safety.dry_run


def test_minimal_real_profile(tmp_path):
    path = write(tmp_path, """
        cluster: {mode: kubeconfig, kubeconfig: kube/config, context: prod-gpu}
        workloads:
          training: {job: pretrain-70b, namespace: llm, log_format: megatron, checkpoint_interval_steps: 500}
        slo: {training_recovery_s: "15m", inference_recovery_s: 300s}
    """)
    profile = load_target(str(path))
    assert profile.cluster.kubeconfig == str(tmp_path.resolve() / "kube" / "config")
    assert profile.slo.training_recovery_s == 900 and profile.slo.inference_recovery_s == 300
    assert profile.slo.model_fields_set == {"training_recovery_s", "inference_recovery_s"}
    assert profile.slo.lost_steps_budget is None  # no longer derived from the checkpoint interval
    assert profile.workloads.training.log_parser().name == "megatron"
    assert profile.safety.allow.nodes == []  # a real target allows nothing until it says so


def test_explicit_lost_steps_budget_is_kept_and_marked_set():
    profile = parse_profile("slo: {lost_steps_budget: 100}\nworkloads: {training: {checkpoint_interval_steps: 500}}")
    assert profile.slo.lost_steps_budget == 100 and "lost_steps_budget" in profile.slo.model_fields_set


@pytest.mark.parametrize("text,seconds", [(900, 900.0), ("900", 900.0), ("900s", 900.0), ("15m", 900.0),
                                          ("1h30m", 5400.0), ("500ms", 0.5), ("2m30s", 150.0), (1.5, 1.5)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["fifteen", "15 minutes", "", True, None])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError, match="must be a duration"):
        parse_duration(bad)


def test_bad_duration_is_one_line_with_file_field_and_fix(tmp_path):
    line = error_line(tmp_path, "slo: {training_recovery_s: fifteen}\n")
    assert line == ('profile ' + str(tmp_path / "prod.yaml") + ': slo.training_recovery_s: must be a duration '
                    'in seconds, like 900, "900s" or "15m" (got \'fifteen\')')


def test_non_positive_duration(tmp_path):
    line = error_line(tmp_path, "slo: {inference_recovery_s: -5}\n")
    assert line.endswith("slo.inference_recovery_s: must be > 0 (got -5)")


def test_unknown_field_suggests_the_right_name(tmp_path):
    line = error_line(tmp_path, "slo: {training_recovery: 900}\n")
    assert "slo.training_recovery: unknown field; did you mean 'training_recovery_s'?" in line
    assert "allowed here: training_recovery_s, inference_recovery_s" in line


def test_unknown_section(tmp_path):
    line = error_line(tmp_path, "clustr: {mode: twin}\n")
    assert "clustr: unknown field; did you mean 'cluster'?" in line


def test_bad_choice_lists_the_choices(tmp_path):
    line = error_line(tmp_path, "faults: {pod_kill_mode: reboot}\n")
    assert line.endswith("""faults.pod_kill_mode: must be 'delete', 'evict' or 'kill-container' (got "reboot")""")


def test_node_mode_is_gone_the_gherkin_examples_choose_it(tmp_path):
    line = error_line(tmp_path, "faults: {node_mode: cordon-drain}\n")
    assert "faults.node_mode: unknown field" in line


def test_several_problems_are_counted(tmp_path):
    line = error_line(tmp_path, "slo: {training_recovery_s: x, inference_recovery_s: y}\nfaults: {pods_to_kill: 0}\n")
    assert line.endswith("(and 2 more problems)")


def test_invalid_yaml_and_missing_file(tmp_path):
    line = error_line(tmp_path, "slo: {training_recovery_s: 900\n")
    assert "not valid YAML at line" in line
    with pytest.raises(InvalidProfile, match="file not found"):
        load_target(str(tmp_path / "nope.yaml"))
    with pytest.raises(InvalidProfile, match="must be a YAML mapping"):
        parse_profile("- a\n- b\n")


def test_password_is_never_echoed():
    with pytest.raises(InvalidProfile) as info:
        parse_profile("switches: {devices: [{name: leaf1, host: 10.0.0.1, password_env: 'hunter2!'}]}")
    assert "hunter2" not in str(info.value)
    assert "switches.devices.0.password_env: must name an environment variable" in str(info.value)
    with pytest.raises(InvalidProfile) as info:
        parse_profile("switches: {devices: [{name: leaf1, host: 10.0.0.1, password: hunter2}]}")
    assert "hunter2" not in str(info.value) and "did you mean 'password_env'" in str(info.value)


def test_switch_inventory_file_relative_to_profile(tmp_path):
    (tmp_path / "net").mkdir()
    write(tmp_path, """
        - {name: leaf1, host: 10.0.0.1, port: 2201, key_file: keys/leaf1, uplinks: [Ethernet48, Ethernet52]}
        - {name: leaf2, host: 10.0.0.2, password_env: LEAF_PASSWORD}
    """, name="net/switches.yaml")
    path = write(tmp_path, "switches: {inventory: net/switches.yaml}\n")
    profile = load_target(str(path))
    leaf1, leaf2 = profile.switches.devices
    assert (leaf1.port, leaf1.uplinks) == (2201, ["Ethernet48", "Ethernet52"])
    assert leaf1.key_file == str(tmp_path.resolve() / "net" / "keys" / "leaf1")
    assert leaf2.password_env == "LEAF_PASSWORD" and not profile.switches.accept_unknown_host_keys


def test_inventory_and_inline_devices_conflict(tmp_path):
    write(tmp_path, "[]\n", name="inv.yaml")
    line = error_line(tmp_path, "switches: {inventory: inv.yaml, devices: [{name: a, host: b}]}\n")
    assert "set either inventory or devices" in line


def test_custom_log_patterns_validated(tmp_path):
    profile = parse_profile("workloads: {training: {log_format: twin, log_patterns: {step: 'it (?P<step>\\d+)'}}}")
    from drills.measure.logformats import parse_line
    assert parse_line(profile.workloads.training.log_parser(), "it 42").step == 42
    with pytest.raises(InvalidProfile, match=r"workloads.training.log_patterns: .*needs a \(\?P<step>"):
        parse_profile("workloads: {training: {log_patterns: {resumed: 'from (\\d+)'}}}")


def test_endpoint_must_be_url_or_from_twin():
    assert parse_profile("workloads: {inference: {endpoint: 'http://10.0.0.9:8000'}}").workloads.inference.endpoint
    with pytest.raises(InvalidProfile, match="must be an http"):
        parse_profile("workloads: {inference: {endpoint: 'llama.svc'}}")


def test_profiles_are_immutable():
    profile = TargetProfile()
    with pytest.raises(Exception):
        profile.name = "x"


SAFE = parse_profile("""
safety:
  allow:
    nodes: ["gpu-node-*"]
    node_labels: {nvidia.com/gpu.present: "true"}
    namespaces: [ai-platform]
    switches: ["leaf-*"]
    interfaces: ["Ethernet4*"]
  blast_radius: {max_nodes: 1, max_pods: 2, max_ports: 1}
""")


def test_node_allowlist():
    check_node_allowed(SAFE, "gpu-node-3", {"nvidia.com/gpu.present": "true"})
    with pytest.raises(UnsafeTarget, match=r"node cpu-1 is not in the profile's allowlist \(safety.allow.nodes: gpu-node-\*\)"):
        check_node_allowed(SAFE, "cpu-1", {"nvidia.com/gpu.present": "true"})
    with pytest.raises(UnsafeTarget, match="has no label nvidia.com/gpu.present"):
        check_node_allowed(SAFE, "gpu-node-3", {})
    with pytest.raises(UnsafeTarget, match="allowlist"):
        check_node_allowed(TargetProfile(), "gpu-node-3")  # empty allowlist allows nothing


def test_namespace_and_switch_allowlists():
    check_namespace_allowed(SAFE, "ai-platform")
    with pytest.raises(UnsafeTarget, match="namespace kube-system"):
        check_namespace_allowed(SAFE, "kube-system")
    check_switch_allowed(SAFE, "leaf-1", "Ethernet48")
    with pytest.raises(UnsafeTarget, match="switch spine-1"):
        check_switch_allowed(SAFE, "spine-1")
    with pytest.raises(UnsafeTarget, match="interface Management0 on switch leaf-1"):
        check_switch_allowed(SAFE, "leaf-1", "Management0")


def test_blast_radius():
    check_blast_radius(SAFE, nodes=1, pods=2, ports=1)
    with pytest.raises(UnsafeTarget, match=r"3 pods, over the cap of 2 \(safety.blast_radius.max_pods\)"):
        check_blast_radius(SAFE, pods=3)
    with pytest.raises(UnsafeTarget, match="2 nodes"):
        check_blast_radius(SAFE, nodes=2)
