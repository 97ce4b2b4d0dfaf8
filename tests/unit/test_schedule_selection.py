"""`drills schedule -m/-k` and `--features`: a selection is checked at render time against the features
the run will read (the same tests pytest collects), and a site's own features travel in a ConfigMap
mounted where the run reads them."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from drills.cli import main
from drills.core.errors import DrillError
from drills.core.runner import REPO
from drills.core.selection import select
from drills.schedule.cronjob import FEATURES_BINDER, FEATURES_DIR, ScheduleOptions, render

SITE_FEATURE = """\
@inference @inference_pod_kill @slo_5m
Feature: Our endpoint survives losing one replica
  Scenario Outline: Lose <killed>
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When <killed> are killed
    Then the endpoint serves again within 3 minutes

    @kill_one
    Examples:
      | killed              |
      | 1 of its 2 replicas |
"""


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text("cluster: {mode: in-cluster}\nsafety: {allow: {nodes: [\"gpu-*\"], namespaces: [ai-platform]}}\n")
    return str(path)


def _pytest_collects(markexpr: str | None, keyword: str | None) -> list[str]:
    args = [sys.executable, "-m", "pytest", "features", "--collect-only", "-q", "-p", "no:cacheprovider"]
    args += ["-m", markexpr] if markexpr else []
    args += ["-k", keyword] if keyword else []
    out = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120).stdout
    return sorted(line.split("::", 1)[1] for line in out.splitlines() if "::" in line)


@pytest.mark.parametrize("markexpr, keyword", [("network and not sonic", "exec"), ("gpu_unhealthy or kill_all", None),
                                               (None, "cordon or replicas")])
def test_selection_picks_what_pytest_collects(markexpr, keyword):
    expected = _pytest_collects(markexpr, keyword)
    assert expected  # a case that selects nothing would prove nothing
    assert sorted(c.name for c in select(REPO / "features", markexpr, keyword)) == expected


def _command(docs) -> list[str]:
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    return shlex.split(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][2]
                       .split(" && exec ")[1])


def test_k_reaches_the_run_command(profile):
    argv = _command(render(ScheduleOptions(profile=profile, image="img", markexpr="training", keyword="cordon")))
    assert argv[argv.index("-m") + 1] == "training" and argv[argv.index("-k") + 1] == "cordon"


@pytest.mark.parametrize("markexpr, keyword, says", [
    ("inferance", None, "-m 'inferance': unknown tag inferance"),
    (None, "uplink and (", "-k 'uplink and (' is not a selection expression"),
    ("training", "sonic", "-m 'training' -k 'sonic' selects no scenario of"),
])
def test_a_selection_that_cannot_work_is_refused_at_render_time(profile, markexpr, keyword, says):
    with pytest.raises(DrillError, match=says.replace("(", r"\(")):
        render(ScheduleOptions(profile=profile, image="img", markexpr=markexpr, keyword=keyword))


def test_cli_refuses_an_empty_selection_in_one_line(profile, capsys):
    rc = main(["schedule", "--profile", profile, "--image", "img", "-k", "no_such_drill"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and err.startswith("drills: -k 'no_such_drill' selects no scenario")


def test_site_features_travel_in_a_config_map_mounted_where_the_run_reads_them(profile, tmp_path):
    site = tmp_path / "features"
    (site / "inference").mkdir(parents=True)
    (site / "inference" / "our_kill.feature").write_text(SITE_FEATURE)
    docs = render(ScheduleOptions(profile=profile, image="img", markexpr="kill_one", features=str(site)))
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-drills-features"]
    assert cm["data"]["inference.our_kill.feature"] == SITE_FEATURE
    assert "scenarios(\".\")" in cm["data"][FEATURES_BINDER]
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "features"]
    assert {i["key"]: i["path"] for i in volume["configMap"]["items"]} == {
        "inference.our_kill.feature": "inference/our_kill.feature", FEATURES_BINDER: FEATURES_BINDER}
    assert {"name": "features", "mountPath": FEATURES_DIR, "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert _command(docs)[-1] == FEATURES_DIR


def test_the_selection_is_checked_against_the_site_features(profile, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "kill.feature").write_text(SITE_FEATURE)
    with pytest.raises(DrillError, match="-m 'network' selects no scenario of"):
        render(ScheduleOptions(profile=profile, image="img", markexpr="network", features=str(tmp_path / "f")))


def test_a_features_folder_without_features_is_one_line(profile, tmp_path):
    with pytest.raises(DrillError, match="no .feature file in it"):
        render(ScheduleOptions(profile=profile, image="img", features=str(tmp_path)))
    with pytest.raises(DrillError, match="not a folder"):
        render(ScheduleOptions(profile=profile, image="img", features=str(Path(tmp_path) / "nope")))
