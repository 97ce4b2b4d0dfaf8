"""`drills validate` end to end: a healthy twin passes every check; a scaled-to-0 inference Deployment, a
profile naming a missing job, and a switch whose known_hosts holds another key each give their ✗ line and
exit 2; the twin's audit log shows no write by validate (the scale-down by the test itself is there)."""

from __future__ import annotations

import importlib.resources

import pytest
import yaml

from drills.twin.launcher import start_twin
from tests.e2e.drill_helpers import DRILL_AGENT, audit_of, drills, write_profile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def healthy_twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("validate-twin"), scale=60.0)
    try:
        yield handle
    finally:
        handle.stop()


def _check_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln[:1] in "✓✗⚠"]


def _profile(tmp_path, **changes) -> str:
    """The built-in twin profile with some sections replaced."""
    data = yaml.safe_load((importlib.resources.files("drills.profile") / "twin.yaml").read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return write_profile(tmp_path / "profile.yaml", yaml.safe_dump(data))


def _validate(*args: str):
    return drills("validate", *args, timeout=120)


def _ours(audit: list[dict]) -> list[dict]:
    return [r for r in audit if str(r.get("userAgent", "")).startswith(DRILL_AGENT)]


def test_healthy_default_twin_every_check_passes():
    """Default target: validate starts its own twin, checks everything, stops it."""
    done = _validate()
    lines = _check_lines(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lines) >= 15 and all(ln.startswith("✓") for ln in lines), done.stdout
    for name in ("training job", "training log format", "inference endpoint", "inference PDB", "switch leaf-1",
                 "checkpoint store", "locust"):
        assert any(ln.startswith(f"✓ {name}:") for ln in lines), name


def test_running_twin_passes_and_validate_writes_nothing(healthy_twin):
    done = _validate("--twin-state", str(healthy_twin.state_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(ln.startswith("✓") for ln in _check_lines(done.stdout)), done.stdout
    assert _ours(audit_of(healthy_twin)) == []


def test_missing_job_is_a_failed_line(healthy_twin, tmp_path):
    profile = _profile(tmp_path, workloads__training__job="no-such-job")
    done = _validate("--twin-state", str(healthy_twin.state_dir), "--profile", profile, "-m", "training")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "✗ training job: training job ai-platform/no-such-job not found" in done.stdout
    assert "set workloads.training.job" in done.stdout
    assert not any("inference" in ln for ln in _check_lines(done.stdout))  # -m training selects only its drill


def test_wrong_log_format_names_the_preset_that_reads_the_logs(healthy_twin, tmp_path):
    profile = _profile(tmp_path, workloads__training__log_format="hf-trainer")  # the twin prints Megatron-LM
    done = _validate("--twin-state", str(healthy_twin.state_dir), "--profile", profile, "-m", "training")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [ln for ln in _check_lines(done.stdout) if "training log format" in ln]
    assert line.startswith("✗ training log format: hf-trainer finds no step line"), line
    assert line.endswith("set workloads.training.log_format: megatron"), line


def test_missing_pdb_is_only_a_warning(tmp_path_factory):
    with start_twin(tmp_path_factory.mktemp("validate-nopdb"), defects=["no-pdb"], scale=60.0) as twin:
        done = _validate("--twin-state", str(twin.state_dir), "-m", "inference")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "⚠ inference PDB: no PodDisruptionBudget covers ai-platform/llama-7b-infer's pods" in done.stdout
    assert "✓ inference deployment" in done.stdout


def test_wrong_known_hosts_is_a_failed_switch_line(healthy_twin, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from drills.profile.model import SwitchConfig
    from drills.faults.switch.session import host_key_name

    leaf = dict(healthy_twin.info["switches"][0])
    other = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                   serialization.PublicFormat.OpenSSH).decode()
    known = tmp_path / "known_hosts"
    known.write_text(f"{host_key_name(SwitchConfig.model_validate(leaf))} {other}\n")
    leaf["known_hosts"] = str(known)
    profile = _profile(tmp_path, switches__devices=[leaf])
    done = _validate("--twin-state", str(healthy_twin.state_dir), "--profile", profile, "-m", "network")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [ln for ln in _check_lines(done.stdout) if ln[2:].startswith(f"switch {leaf['name']}:")]
    assert line.startswith("✗") and "does not match known_hosts" in line, line
    assert "✓ training job" in done.stdout  # only the switch is wrong


def test_scaled_to_zero_inference_fails_and_only_the_test_wrote(tmp_path_factory):
    from kubernetes import client

    from fixtures.twin import api_client_for

    with start_twin(tmp_path_factory.mktemp("validate-zero"), scale=60.0) as twin:
        api = api_client_for(twin)
        try:
            client.AppsV1Api(api).patch_namespaced_deployment_scale("llama-7b-infer", "ai-platform",
                                                                    {"spec": {"replicas": 0}})
        finally:
            api.close()
        done = _validate("--twin-state", str(twin.state_dir), "-m", "inference")
        audit = audit_of(twin)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "✗ inference deployment: Deployment ai-platform/llama-7b-infer is scaled to 0 replicas" in done.stdout
    assert "✗ inference endpoint:" in done.stdout
    assert any(r.get("verb") == "patch" and r.get("subresource") == "scale" for r in audit)  # writes are recorded
    assert _ours(audit) == []
