"""`drills schedule --apply` against a twin: the CronJob, its ServiceAccount and RBAC exist, kubectl lists
them, and applying again replaces them in place."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for

PROFILE = """\
name: nightly
cluster:
  mode: in-cluster
storage:
  checkpoint_store: from-twin
safety:
  allow: {nodes: ["gpu-*"], namespaces: [ai-platform]}
"""
NS = "gpu-drills"


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("twin-schedule"), profile="minimal")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("schedule") / "nightly.yaml"
    path.write_text(PROFILE)
    return str(path)


def drills(*args: str, kubeconfig: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    return subprocess.run([sys.executable, "-m", "drills.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def applied(twin, profile):
    proc = drills("schedule", "--profile", profile, "--image", "registry.local/gpu-drills:0.1.0", "--apply",
                  "--create-namespace", "--cron", "0 2 * * *", "-m", "inference", "--switch-secret", "switch-creds",
                  kubeconfig=twin.kubeconfig)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_apply_creates_the_cronjob_service_account_and_rbac(twin, applied):
    assert "created cronjob gpu-drills/gpu-drills" in applied.stdout.splitlines()
    api = api_client_for(twin)
    core, rbac, batch = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.BatchV1Api(api)
    assert core.read_namespaced_service_account("gpu-drills", NS).metadata.name == "gpu-drills"
    assert core.read_namespaced_config_map("gpu-drills-profile", NS).data["profile.yaml"] == PROFILE
    cron = batch.read_namespaced_cron_job("gpu-drills", NS)
    assert cron.spec.schedule == "0 2 * * *" and cron.spec.concurrency_policy == "Forbid"
    assert cron.spec.job_template.spec.template.spec.service_account_name == "gpu-drills"
    cluster_role = rbac.read_cluster_role("gpu-drills")
    assert {r for rule in cluster_role.rules for r in rule.resources} == {
        "nodes", "pods", "pods/eviction", "poddisruptionbudgets", "namespaces"}  # namespaces: kube-system's uid
    binding = rbac.read_cluster_role_binding("gpu-drills")
    assert (binding.subjects[0].name, binding.subjects[0].namespace) == ("gpu-drills", NS)
    workload = rbac.read_namespaced_role("gpu-drills", "ai-platform")
    assert any("pods/log" in rule.resources for rule in workload.rules)
    assert rbac.read_namespaced_role_binding("gpu-drills", "ai-platform").role_ref.name == "gpu-drills"
    home = rbac.read_namespaced_role("gpu-drills", NS)
    assert [rule.resource_names for rule in home.rules if "secrets" in rule.resources] == [["switch-creds"]]


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_lists_the_cronjob(twin, applied, tmp_path):
    env = dict(os.environ, KUBECONFIG=twin.kubeconfig)

    def kubectl(*args):
        proc = subprocess.run(["kubectl", "--cache-dir", str(tmp_path), *args], env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    lines = kubectl("get", "cronjob", "-A").splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [line.split()[:2] for line in lines[1:]] == [[NS, "gpu-drills"]]
    assert kubectl("-n", NS, "get", "sa", "gpu-drills", "-o", "name") == "serviceaccount/gpu-drills\n"
    assert "rolebinding.rbac.authorization.k8s.io/gpu-drills" in kubectl("-n", "ai-platform", "get", "rolebinding",
                                                                         "-o", "name")
    assert kubectl("get", "clusterrole", "gpu-drills", "-o", "jsonpath={.rules[0].resources[0]}") == "nodes"


def test_apply_again_replaces_in_place(twin, profile, applied):
    proc = drills("schedule", "--profile", profile, "--image", "registry.local/gpu-drills:0.2.0", "--apply",
                  "--cron", "@daily", kubeconfig=twin.kubeconfig)
    assert proc.returncode == 0, proc.stderr
    assert "replaced cronjob gpu-drills/gpu-drills" in proc.stdout.splitlines()
    api = api_client_for(twin)
    cron = client.BatchV1Api(api).read_namespaced_cron_job("gpu-drills", NS)
    assert cron.spec.schedule == "@daily"
    assert cron.spec.job_template.spec.template.spec.containers[0].image == "registry.local/gpu-drills:0.2.0"
    home = client.RbacAuthorizationV1Api(api).read_namespaced_role("gpu-drills", NS)
    assert not any("secrets" in rule.resources for rule in home.rules)  # no --switch-secret: no secret access


def test_apply_to_an_unreachable_cluster_is_one_line(profile, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: gone\nclusters:\n"
                          "- name: gone\n  cluster: {server: 'http://127.0.0.1:9'}\n"
                          "contexts:\n- name: gone\n  context: {cluster: gone, user: u}\nusers:\n- name: u\n  user: {}\n")
    proc = drills("schedule", "--profile", profile, "--image", "img", "--apply", kubeconfig=str(kubeconfig))
    err = proc.stderr.strip()
    assert proc.returncode != 0 and "\n" not in err
    assert err.startswith("drills: cannot apply ServiceAccount gpu-drills/gpu-drills") and "does not answer" in err


def test_apply_prunes_what_it_owns_and_no_longer_renders(twin, tmp_path):
    """A profile that no longer takes its run lock in `default` leaves no Role there after the next --apply; the
    features ConfigMap goes with --features; another schedule's objects (another name) are never touched."""
    features = tmp_path / "features"
    features.mkdir()
    shutil.copy(sorted((Path(__file__).resolve().parents[2] / "features" / "inference").glob("*.feature"))[0], features)
    v1, v2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    v1.write_text(PROFILE + "  lock_namespace: default\n")  # under PROFILE's last section, safety
    v2.write_text(PROFILE)
    common = ["--image", "registry.local/gpu-drills:0.1.0", "--apply", "--namespace", "prune", "--create-namespace"]
    for name, profile, extra in (("neighbour", v1, []), ("pruned", v1, ["--features", str(features)]),
                                 # issue 32: `pruned-prune` in its own namespace was named and labelled
                                 # `pruned-prune` like `pruned` in `prune`: one install pruned the other's objects
                                 ("pruned-prune", v1, ["--namespace", "pruned-prune"])):
        proc = drills("schedule", "--profile", str(profile), "--name", name, *common, *extra, kubeconfig=twin.kubeconfig)
        assert proc.returncode == 0, proc.stderr
    rbac, core = client.RbacAuthorizationV1Api(api_client_for(twin)), client.CoreV1Api(api_client_for(twin))
    assert {"pruned.prune", "neighbour.prune", "pruned-prune"} <= {
        r.metadata.name for r in rbac.list_namespaced_role("default").items}
    proc = drills("schedule", "--profile", str(v2), "--name", "pruned", *common, kubeconfig=twin.kubeconfig)
    assert proc.returncode == 0, proc.stderr
    pruned = sorted(line for line in proc.stdout.splitlines() if line.startswith("pruned "))
    assert pruned == ["pruned configmap prune/pruned-features", "pruned role default/pruned.prune",
                      "pruned rolebinding default/pruned.prune"], proc.stdout
    roles = {r.metadata.name for r in rbac.list_namespaced_role("default").items}
    assert "pruned.prune" not in roles and {"neighbour.prune", "pruned-prune"} <= roles
    assert "pruned-prune" in {r.metadata.name for r in rbac.list_cluster_role().items}  # the other install's, kept
    assert {c.metadata.name for c in core.list_namespaced_config_map("prune").items} >= {"pruned-profile",
                                                                                          "neighbour-profile"}
    again = drills("schedule", "--profile", str(v2), "--name", "pruned", *common, kubeconfig=twin.kubeconfig)
    assert again.returncode == 0 and not [ln for ln in again.stdout.splitlines() if ln.startswith("pruned ")]
