"""`drills schedule`: the rendered manifests parse as the official client's models, grant the least
privileges the drills need, carry no secret value, and bad input is one clear line."""

from __future__ import annotations

import shlex

import pytest
import yaml
from kubernetes.client import ApiClient

from drills.cli import main
from drills.core.errors import DrillError
from drills.schedule.cronjob import SWITCH_DIR, ScheduleOptions, render, render_yaml, validate_cron

MODELS = {"Namespace": "V1Namespace", "ServiceAccount": "V1ServiceAccount", "ConfigMap": "V1ConfigMap",
          "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding", "Role": "V1Role",
          "RoleBinding": "V1RoleBinding", "CronJob": "V1CronJob"}
SWITCH_PASSWORD = "hunter2-switch-secret"
API_KEY = "sk-load-api-key-secret"

PROFILE = f"""\
name: prod
cluster:
  mode: in-cluster
workloads:
  training: {{job: llm-finetune-8b, namespace: ai-platform}}
  inference: {{deployment: llama-7b-infer, namespace: serving, endpoint: "http://llama.serving:8000"}}
switches:
  devices:
    - name: leaf1
      host: 10.0.0.1
      key_file: {SWITCH_DIR}/id_ed25519
      known_hosts: {SWITCH_DIR}/known_hosts
      password_env: SWITCH_PASSWORD
storage:
  checkpoint_store: /ckpt
  saturation: {{mode: job, namespace: storage, claim: ckpt}}
safety:
  allow: {{nodes: ["gpu-*"], namespaces: [ai-platform, serving]}}
"""


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "prod.yaml"
    path.write_text(PROFILE)
    return str(path)


@pytest.fixture
def docs(profile, monkeypatch):
    monkeypatch.setenv("SWITCH_PASSWORD", SWITCH_PASSWORD)
    monkeypatch.setenv("DRILLS_LOAD_API_KEY", API_KEY)
    return render(ScheduleOptions(profile=profile, image="registry.example.com/gpu-drills:0.1.0",
                                  cron="30 1 * * MON-FRI", markexpr="inference or training",
                                  reports_pvc="drills-reports", switch_secret="switch-creds",
                                  load_secret="llm-key:token", checkpoint_pvc="ckpt", create_namespace=True))


def by_kind(docs, kind, namespace=None):
    return [d for d in docs if d["kind"] == kind and (namespace is None or d["metadata"].get("namespace") == namespace)]


def cronjob(docs):
    (cj,) = by_kind(docs, "CronJob")
    return cj


def rules_of(doc):
    return {(g, r, v, tuple(rule.get("resourceNames", ())))
            for rule in doc["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_every_manifest_parses_as_the_clients_model(docs):
    text = render_yaml(docs)
    assert list(yaml.safe_load_all(text)) == docs
    client = ApiClient()
    for doc in docs:
        model = client._ApiClient__deserialize(doc, MODELS[doc["kind"]])
        assert model.metadata.name == doc["metadata"]["name"]
    parsed = client._ApiClient__deserialize(cronjob(docs), "V1CronJob")
    assert parsed.spec.schedule == "30 1 * * MON-FRI"
    assert parsed.spec.concurrency_policy == "Forbid"
    pod = parsed.spec.job_template.spec.template.spec
    assert pod.service_account_name == "gpu-drills" and pod.restart_policy == "Never"
    assert pod.containers[0].image == "registry.example.com/gpu-drills:0.1.0"
    assert [d["kind"] for d in docs][:3] == ["Namespace", "ServiceAccount", "ConfigMap"]


def test_cluster_role_only_what_a_node_drill_needs(docs):
    (role,) = by_kind(docs, "ClusterRole")
    assert rules_of(role) == {
        ("", "nodes", "get", ()), ("", "nodes", "list", ()), ("", "nodes", "watch", ()), ("", "nodes", "patch", ()),
        ("", "pods", "list", ()), ("", "pods", "watch", ()),
        ("", "pods/eviction", "create", ()),
        ("policy", "poddisruptionbudgets", "list", ()), ("policy", "poddisruptionbudgets", "watch", ()),
        ("", "namespaces", "get", ("kube-system",)),  # the cluster's identity for the journal, nothing more
    }
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-drills"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-drills", "namespace": "gpu-drills"}]


def test_workload_namespaces_get_their_own_roles(docs):
    workload = {("", "pods", "delete", ()), ("", "pods/log", "get", ()), ("", "events", "list", ()),
                ("", "events", "watch", ())}
    workload |= {(g, r, v, ()) for g, r in (("apps", "deployments"), ("", "endpoints"), ("batch.volcano.sh", "jobs"))
                 for v in ("get", "list", "watch")}
    lease = {("coordination.k8s.io", "leases", v, ()) for v in ("get", "create", "update")}
    reader = {("", "pods", "create", ()), ("", "pods/exec", "get", ())}  # pods delete is the workload rule's
    burst = {("batch.volcano.sh", "jobs", v, ()) for v in ("create", "delete")}  # the noisy-neighbour drill
    rollout = {("apps", "deployments", "patch", ())}  # the rolling-restart drill
    for ns in ("ai-platform", "serving"):
        (role,) = by_kind(docs, "Role", ns)
        # the training namespace also holds the run lock's Lease, the checkpoint store reader's pod and the burst;
        # the inference namespace the serving Deployment's restart
        assert rules_of(role) == (workload | lease | reader | burst if ns == "ai-platform" else workload | rollout)
        (binding,) = by_kind(docs, "RoleBinding", ns)
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (storage,) = by_kind(docs, "Role", "storage")  # saturation.mode: job
    assert rules_of(storage) == {("batch", "jobs", "create", ()), ("batch", "jobs", "delete", ()),
                                 ("", "pods/log", "get", ()),  # fio's reports; the pod reading and sweeping its files:
                                 ("", "pods", "create", ()), ("", "pods", "delete", ()), ("", "pods/exec", "get", ())}


def test_home_namespace_holds_only_the_named_secret_and_the_lock_namespace_the_lease(docs):
    (home,) = by_kind(docs, "Role", "gpu-drills")
    rules = rules_of(home)
    assert {r for r in rules if r[1] == "secrets"} == {("", "secrets", "get", ("switch-creds",))}
    assert not {r for r in rules if r[1] == "leases"}
    # the run lock defaults to the training namespace, where manual runs take it too (drills/lock.py)
    (lock_role,) = by_kind(docs, "Role", "ai-platform")
    assert {v for g, r, v, _ in rules_of(lock_role) if r == "leases"} == {"get", "create", "update"}


def test_nothing_is_a_wildcard_or_an_escalation(docs):
    for doc in by_kind(docs, "Role") + by_kind(docs, "ClusterRole"):
        for group, resource, verb, names in rules_of(doc):
            assert "*" not in (group, resource, verb)
            assert verb not in ("escalate", "bind", "impersonate", "deletecollection")
            assert resource != "secrets" or names == ("switch-creds",)
            assert not (resource == "nodes" and verb in ("create", "delete", "update"))


def test_no_storage_job_role_without_job_mode(tmp_path):
    path = tmp_path / "local.yaml"
    path.write_text(PROFILE.replace("mode: job,", "mode: local,"))
    docs = render(ScheduleOptions(profile=str(path), image="img"))
    assert {d["metadata"]["namespace"] for d in by_kind(docs, "Role")} == {"ai-platform", "serving", "gpu-drills"}
    assert all(r[0] != "batch" for d in by_kind(docs, "Role") for r in rules_of(d))
    assert all(r[1] != "secrets" for d in by_kind(docs, "Role") for r in rules_of(d))  # no --switch-secret
    assert not by_kind(docs, "Namespace")


def test_no_secret_value_is_rendered(docs):
    text = render_yaml(docs)
    assert SWITCH_PASSWORD not in text and API_KEY not in text
    assert not by_kind(docs, "Secret")
    container = cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["DRILLS_LOAD_API_KEY"] == {"name": "DRILLS_LOAD_API_KEY",
                                          "valueFrom": {"secretKeyRef": {"name": "llm-key", "key": "token"}}}
    assert env["SWITCH_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "switch-creds"
    assert all("value" not in e for name, e in env.items() if name not in ("HOME", "MPLCONFIGDIR"))


def test_cronjob_pod(docs):
    spec = cronjob(docs)["spec"]
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] > 0
    pod = job["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["switch"] == {"name": "switch", "mountPath": SWITCH_DIR, "readOnly": True}
    assert volumes["switch"]["secret"]["secretName"] == "switch-creds"
    assert mounts["profile"]["readOnly"] and volumes["profile"]["configMap"]["name"] == "gpu-drills-profile"
    assert volumes["reports"] == {"name": "reports", "persistentVolumeClaim": {"claimName": "drills-reports"}}
    assert mounts["checkpoints"]["mountPath"] == "/ckpt"
    shell, flag, script = container["args"]
    assert (shell, flag) == ("sh", "-c")
    revert, validate, run = script.replace(" && exec ", " && ").split(" && ")
    assert shlex.split(revert) == ["drills", "revert", "--reports", mounts["reports"]["mountPath"]]
    # the profile and the cluster are checked (read-only) before any fault: a ✗ ends the Job red here
    assert shlex.split(validate) == ["drills", "validate", "--profile", mounts["profile"]["mountPath"] + "/profile.yaml",
                                     "-m", "inference or training"]
    assert " && exec drills run " in script
    argv = shlex.split(run)
    assert argv[:2] == ["drills", "run"] and argv[argv.index("-m") + 1] == "inference or training"
    assert argv[argv.index("--profile") + 1] == mounts["profile"]["mountPath"] + "/profile.yaml"
    (cm,) = by_kind(docs, "ConfigMap")
    assert cm["data"]["profile.yaml"] == PROFILE


def test_reports_default_to_an_empty_dir_and_html_can_be_skipped(profile):
    docs = render(ScheduleOptions(profile=profile, image="img", html=False, time_zone="Europe/Berlin"))
    spec = cronjob(docs)["spec"]
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert {"name": "reports", "emptyDir": {}} in pod["volumes"]
    assert pod["containers"][0]["args"][2].endswith("--no-html")
    assert spec["timeZone"] == "Europe/Berlin" and spec["schedule"] == "0 2 * * *"


def test_inventory_beside_the_profile_travels_in_the_config_map(tmp_path):
    (tmp_path / "switches.yaml").write_text("- {name: leaf1, host: 10.0.0.1}\n")
    path = tmp_path / "p.yaml"
    path.write_text("cluster: {mode: in-cluster}\nswitches: {inventory: switches.yaml}\nsafety: {allow: {nodes: [\"gpu-*\"], namespaces: [ai-platform]}}\n")
    (cm,) = by_kind(render(ScheduleOptions(profile=str(path), image="img")), "ConfigMap")
    assert cm["data"]["switches.yaml"] == "- {name: leaf1, host: 10.0.0.1}\n"


@pytest.mark.parametrize("expr", ["0 2 * * *", "*/15 * * * *", "0 1-5/2 * * MON-FRI", "0 0 1,15 JAN,jul ?",
                                  "@daily", "59 23 31 12 6"])
def test_valid_cron(expr):
    validate_cron(expr)


@pytest.mark.parametrize("expr, says", [("0 2 * *", "expected 5 fields"), ("60 2 * * *", "minute field"),
                                        ("0 24 * * *", "hour field"), ("0 2 0 * *", "day of month"),
                                        ("0 2 * 13 *", "month field"), ("0 2 * * 7", "day of week"),
                                        ("*/0 * * * *", "bad step"), ("0 5-1 * * *", "backwards"),
                                        ("@sometimes", "unknown macro"), ("TZ=UTC 0 2 * * *", "--time-zone"),
                                        ("0 2 * * FUNDAY", "day of week")])
def test_invalid_cron_says_which_field(expr, says):
    with pytest.raises(DrillError, match=says):
        validate_cron(expr)


def test_cli_bad_cron_is_one_line(profile, capsys):
    rc = main(["schedule", "--profile", profile, "--image", "img", "--cron", "0 2 * *"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err and err.startswith("drills: --cron '0 2 * *': expected 5 fields")


def test_cli_missing_profile_is_one_line(tmp_path, capsys):
    rc = main(["schedule", "--profile", str(tmp_path / "nope.yaml"), "--image", "img"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err and "nope.yaml: file not found" in err


def test_cli_refuses_a_kubeconfig_profile(tmp_path, capsys):
    path = tmp_path / "kc.yaml"
    path.write_text("cluster: {mode: kubeconfig}\n")
    rc = main(["schedule", "--profile", str(path), "--image", "img"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err and "set cluster.mode: in-cluster" in err


def test_cli_writes_the_file_and_warns_about_unmounted_paths(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("cluster: {mode: in-cluster}\nswitches:\n  devices: [{name: leaf1, host: h, key_file: id_rsa}]\n"
                    "safety: {allow: {nodes: [\"gpu-*\"], namespaces: [ai-platform]}}\n")
    out = tmp_path / "schedule.yaml"
    assert main(["schedule", "--profile", str(path), "--image", "img", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "switch leaf1: key_file" in captured.err and "--switch-secret" in captured.err
    assert [d["kind"] for d in yaml.safe_load_all(out.read_text())][-1] == "CronJob"


def test_the_runs_pod_placement_and_priority(profile):
    from drills.schedule.cronjob import parse_node_selector, parse_toleration

    opts = ScheduleOptions(profile=profile, image="img", node_selector=parse_node_selector(["pool=system"]),
                           tolerations=(parse_toleration("dedicated=drills:NoSchedule"),
                                        parse_toleration("nvidia.com/gpu:NoSchedule")),
                           priority_class_name="system-cluster-critical")
    pod = cronjob(render(opts))["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "system"} and pod["priorityClassName"] == "system-cluster-critical"
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "drills", "effect": "NoSchedule"},
                                  {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    plain = cronjob(render(ScheduleOptions(profile=profile, image="img")))
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(
        plain["spec"]["jobTemplate"]["spec"]["template"]["spec"])


@pytest.mark.parametrize("bad", ["pool", "=x", "pool=a b"])
def test_a_bad_node_selector_is_one_line(bad):
    from drills.schedule.cronjob import parse_node_selector

    with pytest.raises(DrillError, match="--node-selector"):
        parse_node_selector([bad])


@pytest.mark.parametrize("bad", ["key", "key:Never", "key=a b:NoSchedule"])
def test_a_bad_toleration_is_one_line(bad):
    from drills.schedule.cronjob import parse_toleration

    with pytest.raises(DrillError, match="KEY\\[=VALUE\\]:EFFECT"):
        parse_toleration(bad)


def test_pods_load_generator_gets_its_role_and_local_load_none(tmp_path):
    path = tmp_path / "p.yaml"
    text = PROFILE.replace('endpoint: "http://llama.serving:8000"}',
                           'endpoint: "http://llama.serving:8000", load_generator: {mode: pods, workers: 2, '
                           'namespace: loadgen, image: "r.example.com/gpu-drills:1"}}')
    assert "loadgen" in text
    path.write_text(text)
    docs = render(ScheduleOptions(profile=str(path), image="img"))
    (role,) = [d for d in by_kind(docs, "Role", "loadgen")]
    assert {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]} == {
        ("batch", "jobs"): ["create", "delete"], ("", "services"): ["create", "delete"], ("", "pods"): ["delete"],
        ("", "pods/log"): ["get"]}
    assert not by_kind(render(ScheduleOptions(profile=profile_path(tmp_path), image="img")), "Role", "loadgen")


def profile_path(tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text(PROFILE)
    return str(path)


def test_a_nightly_run_can_rotate_its_targets(profile):
    """`drills schedule --random`: the scheduled run draws a fresh seed each night (recorded in its records), so
    the node, uplink and replica it hits rotate over the allowlist; without it the run hits the same ones."""
    def command(**kw):
        return cronjob(render(ScheduleOptions(profile=profile, image="img", **kw)))["spec"]["jobTemplate"]["spec"][
            "template"]["spec"]["containers"][0]["args"][2]

    assert command(random=True).endswith("--random auto") and "--random" not in command()
