"""Every pod drills renders passes Pod Security "restricted" (drills/schedule/podsecurity.py), and each rule of
the profile fails a pod built to break it, for the right reason."""

from __future__ import annotations

import copy

import pytest

from drills.faults.storage.saturation import SaturationSpec, render_fio_job
from drills.load.pods import LoadPodsSpec, render_load_objects
from drills.profile.images import FIO_IMAGE
from drills.profile.model import parse_profile
from drills.schedule.cronjob import ScheduleOptions, render
from drills.schedule.podsecurity import pod_specs, restricted_violations
from drills.faults.storage.spec import saturation_spec

PROFILE = """\
cluster:
  mode: in-cluster
workloads:
  inference:
    load_generator: {mode: pods, workers: 2, image: registry.example.com/gpu-drills:0.1.0}
storage:
  saturation: {mode: job, namespace: storage, claim: ckpt, priority_class_name: drills-low}
safety:
  allow: {nodes: ["gpu-*"], namespaces: [ai-platform, serving, storage]}
"""


def _load_objects(**kw):
    spec = LoadPodsSpec(**{"name": "drills-load-0123456789", "namespace": "serving", "image": "img:1",
                           "host": "http://llm", "workers": 2, "users": 8, "spawn_rate": 8.0,
                           "locust_args": ("--model", "m"), "run_time_s": 600, "deadline_s": 1200, **kw})
    return render_load_objects(spec)


def _pods(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text(PROFILE)
    profile = parse_profile(PROFILE)
    docs = render(ScheduleOptions(profile=str(path), image="registry.example.com/gpu-drills:0.1.0"))
    fio = render_fio_job(saturation_spec(profile, "/store"))
    return {"cronjob": [p for d in docs for p in pod_specs(d)],
            "fio": pod_specs(fio), **{d["metadata"]["name"]: pod_specs(d) for d in _load_objects() if d["kind"] == "Job"}}


def test_every_rendered_pod_passes_restricted(tmp_path):
    pods = _pods(tmp_path)
    assert sorted(pods) == ["cronjob", "drills-load-0123456789-master", "drills-load-0123456789-worker", "fio"]
    for name, specs in pods.items():
        assert len(specs) == 1, name
        assert restricted_violations(specs[0]) == [], name


def test_fio_pods_carry_resources_and_the_profiles_priority_class(tmp_path):
    (fio,) = _pods(tmp_path)["fio"]
    container = fio["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    assert fio["priorityClassName"] == "drills-low"
    assert container["image"] == FIO_IMAGE


@pytest.mark.parametrize("breaks, says", [
    (lambda p: p.update(hostNetwork=True), "hostNetwork must be unset or false"),
    (lambda p: p["volumes"].append({"name": "root", "hostPath": {"path": "/"}}), "volume 'root' of type hostPath"),
    (lambda p: p["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
     "allowPrivilegeEscalation=false"),
    (lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "allowPrivilegeEscalation=false"),
    (lambda p: (p["securityContext"].pop("runAsNonRoot"), p["containers"][0]["securityContext"].pop("runAsNonRoot")),
     "runAsNonRoot=true"),
    (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "must not set runAsUser=0"),
    (lambda p: (p["securityContext"].pop("seccompProfile"), p["containers"][0]["securityContext"].pop("seccompProfile")),
     "seccompProfile.type"),
    (lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}), "'Unconfined' must be RuntimeDefault"),
    (lambda p: p["containers"][0]["securityContext"].update(capabilities={"drop": ["NET_RAW"]}), "drop ALL"),
    (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
     "must not add capabilities SYS_ADMIN"),
    (lambda p: p["containers"][0]["securityContext"].update(privileged=True), "must not be privileged"),
    (lambda p: p["containers"][0].setdefault("ports", []).append({"containerPort": 80, "hostPort": 80}), "hostPort"),
])
def test_each_restricted_rule_fails_a_pod_that_breaks_it(breaks, says):
    master = next(d for d in _load_objects() if d["metadata"]["name"].endswith("-master"))
    pod = copy.deepcopy(pod_specs(master)[0])
    breaks(pod)
    violations = restricted_violations(pod)
    assert len(violations) == 1 and says in violations[0], violations


def test_pods_load_generator_renders_placement_and_labels():
    docs = _load_objects(node_selector={"pool": "cpu"}, tolerations=[{"key": "x", "operator": "Exists"}],
                         priority_class_name="drills-low", resources={"requests": {"cpu": "1"}},
                         api_key_secret=("llm-key", "api-key"))
    service, master, worker = docs
    assert service["kind"] == "Service" and service["spec"]["selector"]["drills/load-role"] == "master"
    assert worker["spec"]["parallelism"] == worker["spec"]["completions"] == 2
    assert master["spec"]["parallelism"] == 1 and master["spec"]["activeDeadlineSeconds"] == 1200
    pod = worker["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "cpu"} and pod["priorityClassName"] == "drills-low"
    argv = pod["containers"][0]["command"]
    assert argv[argv.index("--master-host") + 1] == service["metadata"]["name"]
    assert argv[argv.index("-f") + 1] == "/opt/gpu-drills/drills/load/locustfile.py"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["DRILLS_LOAD_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "llm-key", "key": "api-key"}
    assert all("api" not in a.lower() or a == "--replica-header" for a in argv)  # the key is never on a command line
    assert {d["metadata"]["labels"]["drills/load"] for d in docs} == {"drills-load-0123456789"}


def test_load_generator_profile_refuses_an_unpinned_image_and_pods_without_workers():
    from drills.core.errors import InvalidProfile

    with pytest.raises(InvalidProfile, match="pinned"):
        parse_profile("workloads: {inference: {load_generator: {image: 'registry.example.com/gpu-drills:latest'}}}")
    with pytest.raises(InvalidProfile, match="workers"):
        parse_profile("workloads: {inference: {load_generator: {mode: pods, workers: 0}}}")
    with pytest.raises(InvalidProfile, match="by digest"):
        parse_profile("storage: {saturation: {image: 'docker.io/xridge/fio:latest'}}")


def test_saturation_spec_keeps_resources_hashable():
    spec = SaturationSpec(directory="/s", mode="job", claim="c", resources={"requests": {"cpu": "1"}})
    assert hash(spec) and spec.resources == (("requests", (("cpu", "1"),)),)
