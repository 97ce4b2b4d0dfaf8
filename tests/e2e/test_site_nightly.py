"""The scheduled nightly, as its CronJob pod runs it on a healthy cluster configured like a real site: it ends
green, with what the site does not run skipped and named (issue 17), under exactly the RBAC `drills schedule`
renders — nothing refused, and every granted verb needed by some request (issue 16: least privilege).

The site: one switch OS (every leaf SONiC), reached in-cluster (the pod's service-account token over HTTPS,
so the target is a real cluster to every decision: twin-only node faults are refused; only its served clock
is dilated), a profile that kills at most one replica (`faults.inference.max_kill: 1`) and stops on more
than 3 NotReady nodes (the node census of a stop condition is what watches nodes), and features read from
the ConfigMap `drills schedule --features` renders, materialised as the kubelet mounts it (`..data` and
symlinks). The CronJob's `drills validate` passes first. The run must exit 0, every drill it ran must pass,
and every Example it did not run must be skipped with its reason — gpu-unhealthy (no faults.gpu_fault), every replica
(beyond max_kill), the four switch OSes it does not have.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import requests
import yaml

from drills.schedule.cronjob import ScheduleOptions, render
from drills.twin.profile import PROFILES_DIR
from drills.twin.launcher import start_twin
from tests.e2e.drill_helpers import REPO, drills, records
from tests.e2e.test_revert_in_cluster import in_cluster
from tests.e2e.test_twin_rbac import apply_as_admin, refused, sa_requests, schedule_rbac, unused_grants

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")]

OTHER_OSES = ("nxos", "eos", "cumulus", "onyx")
# What the nightly proves (sufficient, minimal RBAC; green; skips named) is not a timing, but its rolling restart is
# judged on the answers the load got during the rollout (~130 cluster s): at 600x that is 0.2 s of wall time, 67
# answers on a busy CI machine (374 on a quiet one), too few for a p99. At 150x the window is 0.9 s (~2,400 answers
# quiet): 62 s alone, not 46.
SCALE = 150.0


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("site-twin"), tls=True, scale=SCALE,
                        profile=sonic_twin_profile(tmp_path_factory.mktemp("site-twin-profile")))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def site_profile(tmp_path_factory, twin) -> Path:
    site = site_profile_of(twin.info, {"mode": "in-cluster"})
    site["safety"]["stop_conditions"] = [{"metric": "not_ready_nodes", "above": 3}]
    path = tmp_path_factory.mktemp("site") / "site.yaml"
    path.write_text(yaml.safe_dump(site))
    return path


@pytest.fixture(scope="module")
def rbac(twin, site_profile) -> list[dict]:
    """What `drills schedule` renders for the site, installed by a cluster admin."""
    docs = schedule_rbac(site_profile)
    apply_as_admin(twin, docs)
    return docs


def sonic_twin_profile(folder: Path) -> str:
    """The minimal twin with every switch on SONiC (a site's single-OS fabric) and a leaf per training node:
    the drills run one after another on this one cluster, and after two node losses the job may sit on two
    nodes that would share a leaf in the minimal topology, where no uplink carries its traffic (the network
    drill is then rightly inconclusive)."""
    raw = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    for switch in raw["fabric"]["switches"].values():
        switch["dialect"] = "sonic"
    raw["fabric"]["switches"].update({"leaf-3": {"role": "leaf", "dialect": "sonic"},
                                      "leaf-4": {"role": "leaf", "dialect": "sonic"}})
    raw["node_pools"]["training"]["leaves"] = ["leaf-1", "leaf-2", "leaf-3", "leaf-4"]
    raw["name"] = "site-sonic"
    path = folder / "site-sonic.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def site_profile_of(info: dict, cluster: dict) -> dict:
    """The site's profile for a twin started from `sonic_twin_profile` (its twin.json `info`), reached as
    `cluster` says."""
    switches = [s for s in info["switches"] if s.get("role") == "leaf"]
    assert {s["dialect"] for s in switches} == {"sonic"}
    return {
        "name": "site",
        "cluster": cluster,
        "workloads": {"training": {"checkpoint_interval_steps": 1500},
                      # 16 users (the site's load shape): the feature's 4 users answer too few requests in a
                      # 2-minute rollout for a p99 (issue 30, class 4: drills/verdicts/latency.py); see SCALE
                      "inference": {"endpoint": info["gateway"], "replica_header": "x-twin-replica",
                                    "load": {"users": 16}}},
        "switches": {"devices": switches},
        "storage": {"checkpoint_store": info["checkpoint_store"], "probe_size_mb": 4, "probe_shards": 4,
                    "probe_save_limit_s": "5s", "bandwidth_target_mb_s": 40,
                    "saturation": {"mode": "local", "size": "16M", "numjobs": 2, "iodepth": 4, "runtime_s": "5m"}},
        "faults": {"inference": {"max_kill": 1}},
        "safety": {"allow": {"nodes": ["gpu-train-*", "gpu-infer-*"], "namespaces": ["ai-platform"],
                             "switches": ["leaf-*"], "interfaces": ["Ethernet*"]}},
    }


@pytest.fixture(scope="module")
def mounted_features(tmp_path_factory, site_profile) -> Path:
    """The features ConfigMap of `drills schedule --features features/`, laid out as the kubelet mounts it."""
    docs = render(ScheduleOptions(profile=str(site_profile), image="img", features=str(REPO / "features")))
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-features")]
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    (volume,) = [v for v in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
                 if v["name"] == "features"]
    mount = tmp_path_factory.mktemp("mount") / "features"
    data = mount / "..2026_12_02_02_00_00.000000001"
    for item in volume["configMap"]["items"]:
        (data / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (data / item["path"]).write_text(cm["data"][item["key"]])
    os.symlink(data.name, mount / "..data")
    for top in {Path(item["path"]).parts[0] for item in volume["configMap"]["items"]}:
        os.symlink(f"..data/{top}", mount / top)
    return mount


@pytest.fixture(scope="module")
def nightly(twin, rbac, site_profile, mounted_features, tmp_path_factory):
    """The CronJob's commands in its pod: `drills validate`, then `drills run` over the mounted features."""
    _until_serving(twin)  # the nightly runs on a settled cluster: a just-started twin is still loading its model
    pod = in_cluster(twin)
    checked = drills("validate", "--profile", str(site_profile), env=pod, timeout=300)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    reports = tmp_path_factory.mktemp("reports")
    proc = drills("run", "--profile", str(site_profile), "--reports", str(reports), "--run-id", "nightly",
                  "--no-html", "--lanes", "1", str(mounted_features), env=pod, timeout=1500)
    return proc, reports / "nightly"


def _until_serving(twin, timeout_s: float = 120.0) -> None:
    """Until the inference Deployment has every replica Ready (vLLM's start is minutes of twin time)."""
    url = f"{twin.url}/apis/apps/v1/namespaces/ai-platform/deployments/llama-7b-infer"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = requests.get(url, timeout=10).json().get("status") or {}
        if status.get("replicas") and status.get("readyReplicas") == status.get("replicas"):
            return
        time.sleep(0.2)
    raise AssertionError(f"the twin's inference replicas were not Ready after {timeout_s:.0f} s: {status}")


def test_the_site_like_nightly_ends_green(nightly):
    proc, run_dir = nightly
    recs = records(run_dir)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-2000:],
                                  [(r["scenario"], r["verdict"], r["reason"]) for r in recs])
    assert recs and all(r["verdict"] == "pass" for r in recs)
    assert {r["drill"] for r in recs} == {"gpu-node-loss", "inference-pod-kill", "switch-uplink", "storage-saturation",
                                          "inference-rolling-restart", "inference-noisy-neighbour"}
    ran = {r["scenario"] for r in recs}
    assert not any("gpu-unhealthy" in s or "all its replicas" in s or any(os_ in s for os_ in OTHER_OSES)
                   for s in ran)


def test_what_the_site_does_not_run_is_skipped_and_named(nightly):
    proc, run_dir = nightly
    skipped = [json.loads(line) for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    reasons = {s["test"].split("[", 1)[1].rstrip("]"): s["reason"] for s in skipped}
    assert reasons.pop("gpu-unhealthy").startswith("node-loss mode gpu-unhealthy needs faults.gpu_fault in the profile")
    assert reasons.pop("all its replicas-InferenceUnavailable").startswith("killing 2 of 2 replicas: a full outage")
    assert set(reasons) == {f"{os_}-{t}" for os_ in OTHER_OSES for t in ("shell", "exec")} - {"onyx-exec"}
    assert all(r.startswith(f"no {k.split('-')[0]} switch in the inventory (this fabric runs: sonic)")
               for k, r in reasons.items())
    summary = [line for line in proc.stdout.splitlines() if line.startswith("skipped on this target: ")]
    assert len(summary) == 1  # named at the end of the run in one line, and in JUnit as skipped (not hidden)
    assert f"{len(skipped)} Examples (" in summary[0] and str(run_dir / "skipped.jsonl") in summary[0]
    assert all(s["test"].split("[", 1)[1].rstrip("]") in summary[0] for s in skipped)
    junit = (run_dir / "junit.xml").read_text()
    assert junit.count("<skipped ") == len(skipped) and 'failures="0"' in junit and 'errors="0"' in junit


def test_the_nightly_needed_every_granted_rule_and_none_was_refused(nightly, twin, rbac):
    proc, _ = nightly
    assert proc.returncode == 0
    made = sa_requests(twin)
    assert refused(made) == []
    assert unused_grants(rbac, made) == []
