"""drills validate's pure parts: which drills -m selects, and the profile's safety checks."""

from __future__ import annotations

import pytest

from drills.profile.model import parse_profile
from drills.core.errors import DrillError
from drills.validate.preflight import Check, profile_checks, selected_drills

INFERENCE = {"inference-pod-kill", "inference-rolling-restart", "inference-noisy-neighbour"}
ALL = {"gpu-node-loss", "switch-uplink", "storage-saturation", *INFERENCE}


def test_selection_by_area_drill_tag_and_expression():
    assert set(selected_drills(None)) == ALL
    assert selected_drills("training") == ["gpu-node-loss"]
    assert selected_drills("switch_uplink") == ["switch-uplink"]
    assert set(selected_drills("slo_15m")) == {"gpu-node-loss", "switch-uplink"}  # a feature file's own tag
    assert set(selected_drills("not inference")) == ALL - INFERENCE
    assert selected_drills("inference_noisy_neighbour") == ["inference-noisy-neighbour"]
    with pytest.raises(DrillError, match="not a valid marker expression"):
        selected_drills("training and (")


def test_empty_allowlists_fail_for_the_drills_that_need_them():
    profile = parse_profile("name: prod\ncluster: {mode: kubeconfig}\n")  # safety.allow left empty
    allow, caps = profile_checks(profile, ALL)
    assert not allow.ok and "safety.allow.nodes is empty" in allow.detail
    assert "safety.allow.switches is empty" in allow.detail and "namespace ai-platform" in allow.detail
    assert caps.ok
    (allow_inf, _) = profile_checks(profile, {"inference-pod-kill"})
    assert "nodes" not in allow_inf.detail and "namespace ai-platform is not in" in allow_inf.detail


def test_blast_radius_too_small_for_the_selected_drills():
    profile = parse_profile("safety:\n  allow: {nodes: ['*'], namespaces: [ai-platform], switches: ['*'], "
                            "interfaces: ['*']}\n  blast_radius: {max_nodes: 0, max_pods: 0, max_ports: 0}\n")
    allow, caps = profile_checks(profile, ALL)
    assert allow.ok
    assert not caps.ok and "max_nodes is 0" in caps.detail and "max_ports is 0" in caps.detail
    assert "max_pods 0 < faults.pods_to_kill 1" in caps.detail
    assert profile_checks(profile, {"storage-saturation"})[1].ok  # fio touches no node, pod or port


def test_lines_and_blocking():
    assert Check("x", True, "fine").line() == "✓ x: fine"
    assert Check("x", False, "do this").line() == "✗ x: do this" and Check("x", False, "d").blocking
    warn = Check("x", False, "maybe", warn=True)
    assert warn.line().startswith("⚠") and not warn.blocking
