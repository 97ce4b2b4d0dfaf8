"""fio as a non-root user in job mode, through the real `drills run -m storage`, on a store whose volume ignores
fsGroup and belongs to the training user (defect store-ignores-fsgroup: an NFS export or a parallel file system):
fio as its default user (10001, fsGroup 10001) may not create its directory and the drill fails naming the
shell's own error; fio as the store's owner (the site's run_as_user/run_as_group, fs_group: null) saturates it
and the drill passes. The healthy twin's volume applies fsGroup: test_storage_job.py's drill run passes with the
defaults. The twin decides as Linux does (drills/twin/workloads/volume_access.py). And the root file system is
read-only: the rendered Job's fio writes only on the store's volume; one whose directory is elsewhere fails.
"""

from __future__ import annotations

import time

import pytest

from drills.core.kube import connect_twin
from drills.faults.storage.saturation import SaturationSpec, render_fio_job
from tests.e2e.drill_helpers import drills, records, write_profile

pytestmark = [pytest.mark.slow, pytest.mark.storage]

PROFILE = """\
storage:
  checkpoint_store: from-twin
  probe_size_mb: 4
  probe_shards: 4
  probe_save_limit_s: 5s
  bandwidth_target_mb_s: 20
  saturation: {{mode: job, claim: ckpt-store, namespace: ai-platform, parallelism: 2, rw: write, block_size: 1M,
               size: 16M, numjobs: 1, iodepth: 2, runtime_s: 3m, tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
               {user}}}
safety:
  allow: {{nodes: ["*"], namespaces: [ai-platform]}}
"""


def _run(tmp_path, run_id: str, user: str = "") -> tuple:
    profile = write_profile(tmp_path / f"{run_id}.yaml", PROFILE.format(user=user))
    done = drills("run", "-m", "storage", "--profile", profile, "--defect", "store-ignores-fsgroup", "--no-html",
                  "--reports", str(tmp_path / "r"), "--run-id", run_id, timeout=600)
    recs = records(tmp_path / "r" / run_id)
    assert len(recs) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done, recs[0]


def test_fio_as_another_user_cannot_write_a_store_that_ignores_fs_group(tmp_path):
    done, rec = _run(tmp_path, "default-user")
    assert done.returncode == 1, done.stdout[-3000:]
    denied = "mkdir: can't create directory '/store/.drills-fio-drills-fio-saturation': Permission denied"
    # The container starts, then its shell fails at once: the drill sees the pod fail while it waits for them all
    # to run (the saturation could not start), or after they all ran (fio left no report): both name the cause.
    if rec["category"] == "injector_failed":
        assert rec["verdict"] == "fail" and f"failed before saturating; its log ends: {denied}" in rec["reason"], rec
    else:
        assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", rec
        assert "fio left no report (" in rec["reason"] and f"fio report is not JSON: {denied}" in rec["reason"], rec


def test_fio_as_the_stores_owner_saturates_it(tmp_path):
    done, rec = _run(tmp_path, "owner", ", run_as_user: 1000, run_as_group: 1000, fs_group: null")
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
    fio = rec["details"]["fio"]
    assert fio["jobs"] == ["drills-saturate #1", "drills-saturate #2"] and fio["write"]["io_bytes"] > 0
    assert {c["name"]: c["verdict"] for c in rec["details"]["checks"]}["saturation effect"] == "pass"


def test_a_read_only_root_leaves_fio_only_the_store_volume(twin_factory):
    """The rendered Job with its store mounted elsewhere than fio's directory: with the root file system read-only
    the shell cannot create that directory, as on a node (EROFS), and the pod fails saying so."""
    from kubernetes import client

    twin = twin_factory(scale=600.0)
    conn = connect_twin(twin.kubeconfig, twin.url)
    try:
        spec = SaturationSpec(directory="/store", mode="job", namespace="ai-platform", claim="ckpt-store",
                              job_name="drills-fio-rofs", parallelism=1, size="8m", numjobs=1, rw="write",
                              max_seconds=600, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
        job = render_fio_job(spec)
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        container["volumeMounts"][0]["mountPath"] = "/data"  # fio's directory stays under /store: the image's root
        client.BatchV1Api(conn.api).create_namespaced_job("ai-platform", job)
        pod = _until(lambda: next((p for p in conn.core.list_namespaced_pod(
            "ai-platform", label_selector="job-name=drills-fio-rofs").items if p.status.phase == "Failed"), None))
        text = conn.core.read_namespaced_pod_log(pod.metadata.name, "ai-platform")
        assert text.strip() == "mkdir: can't create directory '/store': Read-only file system", text
    finally:
        conn.close()


def _until(read, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while not (value := read()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value
