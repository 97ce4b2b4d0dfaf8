"""drills validate, what the site's profile asks of its target (drills/validate/site.py): modes a real cluster
cannot run are refused up front, modes it will skip are a warning, wildcard allowlists on a real target are
a warning."""

from drills.profile.model import parse_profile
from drills.validate.site import site_checks

ALL = {"gpu-node-loss", "switch-uplink", "inference-pod-kill", "storage-saturation"}
REAL = "cluster: {mode: kubeconfig}\n"


def _by_name(checks):
    return {c.name: c for c in checks}


def test_the_twin_profile_runs_every_mode_and_its_wildcards_are_not_flagged():
    checks = _by_name(site_checks(parse_profile("safety: {allow: {nodes: ['*']}}"), ALL, on_twin=True))
    assert checks["fault modes"].ok and "allowlist scope" not in checks


def test_a_real_target_refuses_modes_with_no_kubernetes_api():
    profile = parse_profile(REAL + "faults: {pod_kill_mode: kill-container, node_modes: [gpu-unhealthy]}\n")
    modes = _by_name(site_checks(profile, ALL, on_twin=False))["fault modes"]
    assert modes.blocking
    assert "no node-loss mode this target runs (faults.node_modes: gpu-unhealthy" in modes.detail
    assert "kill-container has no Kubernetes API on a real cluster" in modes.detail
    inference_only = _by_name(site_checks(profile, {"gpu-node-loss"}, on_twin=False))["fault modes"]
    assert "kill-container" not in inference_only.detail  # only what the selected drills need


def test_listed_modes_a_real_target_will_skip_are_a_warning():
    profile = parse_profile(REAL + "faults: {node_modes: [cordon-drain, gpu-unhealthy]}\n")
    modes = _by_name(site_checks(profile, ALL, on_twin=False))["fault modes"]
    assert modes.warn and not modes.blocking and modes.detail.startswith("gpu-unhealthy: not run on this target")


def test_clients_mode_without_fio_servers_is_refused():
    profile = parse_profile(REAL + "storage: {saturation: {mode: clients}}\n")
    assert "lists no fio server" in _by_name(site_checks(profile, ALL, on_twin=False))["fault modes"].detail


def test_wildcard_allowlists_on_a_real_target_are_a_warning():
    profile = parse_profile(REAL + "safety: {allow: {nodes: ['gpu-*'], switches: ['*'], interfaces: ['**']}}\n")
    scope = _by_name(site_checks(profile, ALL, on_twin=False))["allowlist scope"]
    assert scope.warn and not scope.ok
    assert scope.detail.startswith("safety.allow.switches, safety.allow.interfaces match everything")
    narrow = parse_profile(REAL + "safety: {allow: {nodes: ['gpu-*'], switches: ['leaf-*']}}\n")
    assert _by_name(site_checks(narrow, ALL, on_twin=False))["allowlist scope"].ok
