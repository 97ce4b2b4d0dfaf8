"""Storage saturation's pure parts: the Kubernetes Job for `job` mode, the `clients` argv, the record."""

import json

import pytest

from drills.core.errors import InvalidProfile
from drills.faults.storage.saturation import (
    SaturationRecord, SaturationSpec, clients_argv, render_fio_job, render_jobfile,
)


def job_spec(**kw) -> SaturationSpec:
    return SaturationSpec(**{"directory": "/store", "mode": "job", "claim": "ckpt-store", "namespace": "drills",
                             "parallelism": 6, "max_seconds": 600, **kw})


def test_job_runs_parallelism_pods_against_the_claim_with_a_deadline():
    manifest = render_fio_job(job_spec())
    assert (manifest["apiVersion"], manifest["kind"]) == ("batch/v1", "Job")
    assert manifest["metadata"]["namespace"] == "drills"
    spec = manifest["spec"]
    assert spec["parallelism"] == spec["completions"] == 6
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 720  # fio's own limit plus a margin
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["volumes"] == [{"name": "store", "persistentVolumeClaim": {"claimName": "ckpt-store"}}]
    container = pod["containers"][0]
    assert container["volumeMounts"] == [{"name": "store", "mountPath": "/store"}]
    assert container["env"][0] == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"job-name": "drills-fio-saturation"}
    assert json.loads(json.dumps(manifest)) == manifest  # plain data, ready for the API


def test_each_pod_runs_time_limited_fio_in_its_own_directory_and_cleans_up():
    script = render_fio_job(job_spec())["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "D='/store/.drills-fio-drills-fio-saturation/$(POD_NAME)'" in script  # kubelet expands $(POD_NAME)
    fio_line = next(line for line in script.splitlines() if line.startswith("fio "))
    for opt in ("--output-format=json", '--directory="$D"', "--runtime=600000ms", "--time_based",
                "--ioengine=libaio", "--direct=1", "--thread"):
        assert opt in fio_line.split()
    assert "trap" in script and 'rm -rf "$D"' in script


def test_job_mode_needs_the_claim():
    with pytest.raises(InvalidProfile, match="PersistentVolumeClaim"):
        render_fio_job(job_spec(claim=None))


def test_clients_argv_pairs_every_host_with_the_jobfile():
    spec = SaturationSpec(directory="/mnt/pfs", mode="clients", clients=("gpu-01", "gpu-02,8765"))
    assert clients_argv(spec, "/tmp/sat.fio", output="/tmp/out.json") == [
        "fio", "--output-format=json", "--output=/tmp/out.json",
        "--client=gpu-01", "/tmp/sat.fio", "--client=gpu-02,8765", "/tmp/sat.fio",
    ]
    jobfile = render_jobfile(spec).splitlines()
    assert jobfile[0] == "[drills-saturate]"
    assert {"directory=/mnt/pfs", "ioengine=libaio", "unlink=1", "runtime=900000ms", "time_based"} <= set(jobfile)


def test_clients_mode_needs_hosts():
    with pytest.raises(InvalidProfile, match="client host"):
        clients_argv(SaturationSpec(directory="/mnt/pfs", mode="clients"), "/tmp/sat.fio")


@pytest.mark.parametrize("kw, message", [({"mode": "cloud"}, "mode 'cloud'"), ({"max_seconds": 0}, "max_seconds")])
def test_invalid_specs_are_refused(kw, message):
    with pytest.raises(InvalidProfile, match=message):
        SaturationSpec(directory="/store", **kw)


def test_record_round_trips_through_json_and_ignores_unknown_keys():
    record = SaturationRecord(directory="/s", files_dir="/s/.drills-fio-1", pid=42, pgid=42, proc_start=123,
                              started="2026-12-02T11:00:00+00:00", output="/r/fio.json", max_seconds=900.0)
    data = json.loads(json.dumps(record.to_dict()))
    assert SaturationRecord.from_dict({**data, "journal_id": "x"}) == record


def test_per_node_mode_keeps_pods_apart_with_a_required_anti_affinity():
    pod = render_fio_job(job_spec(per_node=True, parallelism=4))["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in anti
    (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"job-name": "drills-fio-saturation"}}}


def test_clients_argv_gives_each_client_its_own_jobfile():
    argv = clients_argv(job_spec(mode="clients", clients=("ip:127.0.0.1,8765", "node-2")), ["/s/a.fio", "/s/b.fio"])
    assert argv[-4:] == ["--client=ip:127.0.0.1,8765", "/s/a.fio", "--client=node-2", "/s/b.fio"]


@pytest.mark.parametrize("host", ["10.0.0.5; rm -rf /", "--server", "a b", "host,port"])
def test_client_hosts_outside_fios_grammar_are_refused(host):
    from drills.profile.model import parse_profile

    with pytest.raises(InvalidProfile, match="fio server addresses"):
        parse_profile(f"storage: {{saturation: {{mode: clients, clients: [{json.dumps(host)}]}}}}")
