"""The switch-uplink drill cannot pass on a broken platform (issue 12, item 6 and 9) and passes on a
healthy one for every switch OS it speaks (issue 15): the real `drills run -m network` against twins
built to break it, asserting the exit code and the record's verdict and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import drills, records, write_profile

pytestmark = [pytest.mark.slow, pytest.mark.network]

SCALE = "300"
ONE = "carrying and not sonic and not nxos"  # -k: the plain scenario (not the dialect outline)
DIALECTS = ("sonic", "nxos", "eos", "cumulus", "onyx")

FIVE_DIALECTS = """\
name: twin-five-dialects
cluster:
  mode: twin
  twin: {profile: fabric-dialects}
workloads:
  training: {job: llm-finetune-8b, namespace: ai-platform, log_format: twin, checkpoint_interval_steps: 2000}
switches: {devices: [], accept_unknown_host_keys: false}
safety:
  allow: {nodes: ["*"], namespaces: [ai-platform], switches: ["*"], interfaces: ["*"]}
  blast_radius: {max_nodes: 1, max_pods: 8, max_ports: 1}
"""


def _run(tmp_path: Path, run_id: str, *args: str) -> tuple:
    done = drills("run", "-m", "network", "--scale", SCALE, "--no-html", "--reports", str(tmp_path), "--run-id", run_id,
                  *args)
    return done, records(tmp_path / run_id)


def _truth(rec: dict) -> list[dict]:
    return json.loads((Path(rec["details"]["twin_state"]) / "truth.json").read_text())["records"]


def test_an_uplink_that_carries_no_traffic_is_inconclusive_not_a_pass(tmp_path):
    """idle-uplink: the shut port is outside the leaf's ECMP group; the twin's truth shows no fabric fault."""
    done, (rec,) = _run(tmp_path, "idle", "-k", ONE, "--defect", "idle-uplink")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", rec
    assert rec["reason"].startswith("inconclusive: the fault had no effect: leaf-1 ")
    assert "carried no traffic before the shutdown" in rec["reason"]
    assert not [r for r in _truth(rec) if r["kind"] == "fabric_fault"]  # the job never noticed
    assert [c["name"] for c in rec["details"]["checks"]] == ["fault effect"]  # recovery was not judged


def test_a_socket_fallback_after_recovery_fails_inside_the_stability_window(tmp_path):
    """late-socket-fallback: NCCL drops to NET/Socket 90 s after the job recovered (past the 60 s sustain)."""
    done, (rec,) = _run(tmp_path, "late", "-k", ONE, "--defect", "late-socket-fallback")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "socket_fallback", rec
    assert "fell back to NET/Socket" in rec["reason"] and "after throughput had recovered" in rec["reason"]
    assert "inside the 5m stability window" in rec["reason"]
    late = [r for r in _truth(rec) if r["kind"] == "nccl_transport" and r.get("late")]
    restored = next(r for r in _truth(rec) if r["kind"] == "throughput_restored")
    assert late and late[0]["at"] - restored["at"] >= 60  # past the old watch (recovery + sustain)
    assert rec["details"]["transport_seen"] == "NET/Socket"


def test_healthy_twin_passes_for_every_switch_os_over_netmiko_with_strict_host_keys(tmp_path):
    """One scenario per OS through netmiko (the shell Examples), on a twin with a leaf of each under the job.
    SONiC and NX-OS over netmiko pass in test_drill_network.py's healthy run (the minimal twin's leaves): here
    the three OSes only this twin has."""
    profile = write_profile(tmp_path / "five.yaml", FIVE_DIALECTS)
    done, recs = _run(tmp_path, "five", "-k", "shell and not sonic and not nxos", "--profile", profile)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted((r["details"]["dialect"], r["details"]["ssh_transport"]) for r in recs) == \
        sorted((d, "shell") for d in DIALECTS if d not in ("sonic", "nxos"))
    for rec in recs:
        d = rec["details"]
        assert rec["verdict"] == "pass" and d["path"] == "rerouted", rec["reason"]
        assert d["transport_seen"] in ("NET/IB", "NET/RoCE")
        assert (d["checks"][0]["name"], d["checks"][0]["verdict"]) == ("fault effect", "pass")
        assert d["switch"] == f"leaf-{d['dialect']}"
