"""The alert rule pack (drills/detect/rules): `promtool check rules` and `promtool test rules` pass on every file,
every alert has a unit test that makes it fire, and the dilation for the twin rewrites every duration a rule holds
(and says when it had to widen one). promtool tests are skipped, naming why, where Debian's `prometheus` is absent."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from drills.detect.pack import BUILTIN, RULES_DIR, alert_names, dilate, pack_files, parse_promql_duration
from drills.core.errors import InvalidProfile

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package `prometheus`; "
                                                             "`make bootstrap` installs it as root)")
TESTS = sorted((RULES_DIR / "tests").glob("*_test.yaml"))


def test_the_pack_ships_the_seeds_two_rules_verbatim_and_ours():
    assert BUILTIN == ("gpu", "inference", "network", "seed", "storage", "training")
    seed = {r["alert"]: r for g in yaml.safe_load((RULES_DIR / "seed.yaml").read_text())["groups"] for r in g["rules"]}
    assert seed["GPUMemUtilHigh"]["expr"] == "max by (pod) (DCGM_FI_DEV_MEM_UTIL) > 90"
    assert seed["GPUMemUtilHigh"]["for"] == "15m"
    assert seed["NvidiaXidError"]["expr"] == "increase(NVIDIA_XID_ERRORS_TOTAL[5m]) > 0"
    assert seed["NvidiaXidError"]["for"] == "1m"
    assert set(alert_names(pack_files())) >= {"GpuXidError", "GpuDoubleBitEcc", "GpuTelemetryMissing",
                                               "TrainingNodeLost", "TrainingStalled", "NcclSocketFallback",
                                               "InferenceUnavailable", "InferenceReplicasUnavailable", "InferenceLatencyBurn", "InferenceServingNothing",
                                               "CheckpointStoreFull", "FabricLinkDown"}


def test_every_alert_of_the_pack_has_a_unit_test_that_expects_it_to_fire():
    fired = {case["alertname"] for path in TESTS for test in yaml.safe_load(path.read_text())["tests"]
             for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert set(alert_names(pack_files())) - fired == set()


@needs_promtool
def test_promtool_check_rules_accepts_every_rule_file():
    done = subprocess.run([PROMTOOL, "check", "rules", *map(str, pack_files())], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_test_rules_passes_every_unit_test():
    done = subprocess.run([PROMTOOL, "test", "rules", *map(str, TESTS)], capture_output=True, text=True,
                          cwd=RULES_DIR / "tests", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_test_rules_fails_a_rule_that_reads_a_wrong_metric_name(tmp_path):
    """The unit tests can fail: the GPU rule with one letter of its metric name wrong no longer fires."""
    text = (RULES_DIR / "gpu.yaml").read_text().replace("(DCGM_FI_DEV_XID_ERRORS)", "(DCGM_FI_DEV_XID_ERROR)")
    (tmp_path / "gpu.yaml").write_text(text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "gpu_test.yaml").write_text((RULES_DIR / "tests" / "gpu_test.yaml").read_text())
    done = subprocess.run([PROMTOOL, "test", "rules", "gpu_test.yaml"], capture_output=True, text=True,
                          cwd=tmp_path / "tests", timeout=60)
    assert done.returncode != 0
    assert "alertname: GpuXidError" in done.stdout + done.stderr


def test_dilation_divides_every_duration_of_a_rule_by_the_scale():
    doc = {"groups": [{"name": "g", "interval": "30s", "rules": [{
        "alert": "A", "for": "1m",
        "expr": 'increase(x{le="10.0"}[5m]) > 0 and max_over_time(y[1h:5m]) > 1 and z offset 30m and w[2m:]'}]}]}
    out, widened = dilate(doc, scale=60, scrape_wall_s=0.25)
    rule = out["groups"][0]["rules"][0]
    assert rule["for"] == "1000ms"
    assert rule["expr"] == ('increase(x{le="10.0"}[5000ms]) > 0 and max_over_time(y[60000ms:5000ms]) > 1 '
                            'and z offset 30000ms and w[2000ms:]')
    assert "interval" not in out["groups"][0]  # the stack's evaluation interval governs
    assert widened == []


def test_a_range_too_short_for_the_scrape_interval_is_widened_and_reported():
    doc = {"groups": [{"name": "g", "rules": [{"alert": "NvidiaXidError", "expr": "increase(x[5m]) > 0"}]}]}
    out, widened = dilate(doc, scale=600, scrape_wall_s=0.25)
    assert out["groups"][0]["rules"][0]["expr"] == "increase(x[1000ms]) > 0"  # 4 scrapes, not 500 ms
    assert [(w.rule, w.what, w.declared_s, w.effective_s) for w in widened] == [
        ("NvidiaXidError", "range [5m]", 300, 600.0)]


@pytest.mark.parametrize("text, seconds", [("5m", 300), ("1h30m", 5400), ("500ms", 0.5), ("2d", 172800)])
def test_prometheus_durations_read_as_seconds(text, seconds):
    assert parse_promql_duration(text) == seconds


def test_an_unknown_rule_file_is_refused_naming_the_built_in_ones():
    with pytest.raises(InvalidProfile, match="neither a built-in rule file"):
        pack_files(["gpus"])
