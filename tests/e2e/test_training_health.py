"""The training job's health after a fault cannot PASS on the log's word alone (issue 30 class 5, issue 33's second
key and unknown lines): the real `drills run` of both drills that watch the job after a fault, on one twin each with
the three constructions of bench/verdicts.yaml at once — every step after the resume logs a NaN loss
(diverges-after-resume), a worker is OOMKilled and restarted in place with a clean log (oom-after-resume), an
NVSwitch error line no reader knows (unclassified-error-after-resume); and, alone, the driver's Xid that the GPU
reader does know, printed while the job trains on (gpu-error-after-resume). Each alone passed every other check before; here every
one of the three checks says so, with its own category and reason (the rows' `check` and `reason`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.verdicts import rows
from tests.e2e.drill_helpers import REPO, drills, records

pytestmark = pytest.mark.slow

DEFECTS = ("diverges-after-resume", "oom-after-resume", "unclassified-error-after-resume")
# the node loss (cordon), the GPU fault chain (a DCGM XID, the GPU marked unhealthy, the node drained) and the uplink
RUNS = {"cordon": ("training", "cordon"), "gpu-chain": ("training", "unhealthy"),
        "uplink": ("network", "carrying and not sonic and not nxos")}


@pytest.mark.parametrize("run", list(RUNS))
def test_a_job_that_steps_but_diverges_oomkills_and_prints_an_unknown_error_is_never_a_pass(run, twin_factory,
                                                                                              tmp_path: Path):
    drill, keyword = RUNS[run]
    mine = [r for r in rows(drill) if r.defect in DEFECTS and r.keyword == keyword]
    assert len(mine) == 3 and all(r.test == "tests/e2e/test_training_health.py" for r in mine)
    twin = twin_factory(defects=list(DEFECTS), scale=mine[0].scale)
    done = drills("run", "-m", drill, "-k", keyword, "--no-html", "--reports", str(tmp_path),
                  "--run-id", drill, "--twin-state", str(twin.state_dir))
    (rec,) = records(tmp_path / drill)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # the first judged failure names the record: the job learns nothing
    assert rec["verdict"] == "fail" and rec["category"] == "diverged", (rec["category"], rec["reason"])
    checks = {c["name"]: c for c in rec["details"]["checks"]}
    assert all(c["verdict"] == "pass" for n, c in checks.items()
               if n not in {r.check for r in mine}), [(n, c["reason"]) for n, c in checks.items()]
    for row in mine:
        assert checks[row.check]["verdict"] == row.verdict and row.reason in checks[row.check]["reason"], \
            (row.defect, checks[row.check])
    d = rec["details"]
    (oom,) = d["container_exits"]  # the second key: the pod's own status, with where it was read
    assert oom["exit_code"] == 137 and oom["reason"] == "OOMKilled" and oom["restarts"] == 1
    assert "lastState.terminated" in oom["source"]
    assert d["first_nonfinite_loss"]["grad_norm"] == "nan" and d["loss_readings_before"] > 0
    assert any("detected NVSwitch fatal error" in line for line in d["unclassified_lines"])


def test_a_line_the_site_declares_harmless_in_log_ignore_passes_and_is_listed(twin_factory, tmp_path: Path):
    """The same unknown NVSwitch line, covered by the profile's `log_ignore`: explicit, so the window may pass — and the
    record still lists the line and the pattern that covered it."""
    pattern = r"detected NVSwitch fatal error \d+"
    text = (REPO / "drills/profile/twin.yaml").read_text()
    assert "    log_ignore: []\n" in text
    site = tmp_path / "site.yaml"
    site.write_text(text.replace("    log_ignore: []\n", f"    log_ignore: ['{pattern}']\n"))
    twin = twin_factory(defects=["unclassified-error-after-resume"], scale=600.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--no-html", "--reports", str(tmp_path), "--run-id", "ok",
                  "--twin-state", str(twin.state_dir), "--profile", str(site))
    (rec,) = records(tmp_path / "ok")
    assert done.returncode == 0 and rec["verdict"] == "pass", (rec["reason"], done.stdout[-2000:])
    health = next(c for c in rec["details"]["checks"] if c["name"] == "log health")
    assert "covered by the profile's log_ignore" in health["reason"] and "NVSwitch fatal" in health["reason"]
    assert rec["details"]["log_ignore"] == [pattern] and "NVSwitch fatal" in rec["details"]["ignored_lines"][0]


def test_a_gpu_error_the_reader_knows_and_a_loss_scaler_that_skips_every_step_each_fail_the_window(twin_factory,
                                                                                                    tmp_path: Path):
    """On one twin: the driver's Xid 74 printed after the resume — the GPU reader classifies it, so it is not an
    unknown line, and a known error while the job "trains on" is no more healthy than an unknown one (log errors:
    FAIL, worker_failed); and the loss scaler at its floor — every Megatron iteration line after the resume counts
    its interval's iterations as skipped and prints no loss (learning: FAIL, diverged, naming the count; before, the
    loss not printed made it inconclusive, and in DeepSpeed's format, whose loop prints the forward loss, a PASS).
    The record's category is the first failing check's, learning."""
    mine = [r for r in rows("training") if r.defect in ("gpu-error-after-resume", "loss-scale-floor")]
    assert len(mine) == 2 and {r.scale for r in mine} == {600} and all(r.exit == 1 for r in mine)
    twin = twin_factory(defects=[r.defect for r in mine], scale=mine[0].scale)
    done = drills("run", "-m", "training", "-k", mine[0].keyword, "--no-html", "--reports", str(tmp_path),
                  "--run-id", "xid", "--twin-state", str(twin.state_dir))
    (rec,) = records(tmp_path / "xid")
    assert done.returncode == 1 and (rec["verdict"], rec["category"]) == ("fail", "diverged"), rec["reason"]
    checks = {c["name"]: c for c in rec["details"]["checks"]}
    for row in mine:
        assert checks[row.check]["verdict"] == row.verdict and row.reason in checks[row.check]["reason"], \
            (row.defect, checks[row.check])
    skipped = rec["details"]["skipped_steps"]  # the count, and where it was read
    assert skipped["skipped"] == skipped["stepped"] > 1000 and skipped["pod"].startswith("llm-finetune-8b-worker-")
    xid = next(r for r in mine if r.defect == "gpu-error-after-resume")
    assert any(xid.reason in line for line in rec["details"]["errors_in_window"])
