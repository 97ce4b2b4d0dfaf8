"""Which Examples a site runs (drills/profile/variants.py): node-loss modes, kill sizes, switch OSes — a
refusal is a sentence naming the variant and the profile field; what the site supports is never refused."""

from __future__ import annotations

import pytest

from drills.core.errors import InvalidProfile
from drills.profile.model import parse_profile
from drills.profile.variants import dialect_refusal, kill_refusal, node_mode_refusal, supported_node_modes

TWIN = parse_profile("{}")
SITE = parse_profile("cluster: {mode: kubeconfig}\nfaults: {node_modes: [cordon-drain], inference: {max_kill: 1}}\n")


def test_the_twin_runs_every_node_mode():
    assert supported_node_modes(TWIN, on_twin=True) == ("cordon-drain", "taint-noexecute", "gpu-unhealthy",
                                                       "kubelet-stop")
    assert all(node_mode_refusal(m, TWIN, on_twin=True) is None for m in supported_node_modes(TWIN, True))


def test_a_real_target_never_runs_twin_only_modes_even_when_listed():
    listed = parse_profile("faults: {node_modes: [cordon-drain, kubelet-stop]}\n")
    assert supported_node_modes(listed, on_twin=False) == ("cordon-drain",)
    reason = node_mode_refusal("kubelet-stop", listed, on_twin=False)
    assert reason.startswith("node-loss mode kubelet-stop runs only on the twin")
    assert node_mode_refusal("kubelet-stop", TWIN, on_twin=False).startswith("node-loss mode kubelet-stop runs only")


def test_a_real_target_runs_the_gpu_fault_chain_only_when_its_profile_says_where_dcgm_runs():
    listed = parse_profile("faults: {node_modes: [cordon-drain, gpu-unhealthy]}\n")
    assert supported_node_modes(listed, on_twin=False) == ("cordon-drain",)
    assert node_mode_refusal("gpu-unhealthy", listed, on_twin=False).startswith(
        "node-loss mode gpu-unhealthy needs faults.gpu_fault in the profile on a real cluster")
    told = parse_profile("faults: {node_modes: [cordon-drain, gpu-unhealthy], gpu_fault: {remediation: site}}\n")
    assert supported_node_modes(told, on_twin=False) == ("cordon-drain", "gpu-unhealthy")
    assert node_mode_refusal("gpu-unhealthy", told, on_twin=False) is None
    not_listed = parse_profile("faults: {node_modes: [cordon-drain], gpu_fault: {}}\n")  # enabled wins over configured
    assert node_mode_refusal("gpu-unhealthy", not_listed, on_twin=False).startswith(
        "node-loss mode gpu-unhealthy is not enabled for this site")


def test_a_mode_the_profile_does_not_enable_is_refused_naming_the_field():
    assert node_mode_refusal("taint-noexecute", SITE, on_twin=False) == (
        "node-loss mode taint-noexecute is not enabled for this site (faults.node_modes: cordon-drain)")
    assert node_mode_refusal("cordon-drain", SITE, on_twin=False) is None


def test_an_unknown_mode_is_not_a_variant_to_skip():
    assert node_mode_refusal("unplug", SITE, on_twin=False) is None  # the fault's plan refuses it as an error


def test_kill_sizes_beyond_max_kill_are_refused_and_a_full_outage_is_named():
    assert kill_refusal(1, 2, SITE) is None
    assert kill_refusal(2, 2, SITE) == ("killing 2 of 2 replicas: a full outage of the endpoint is beyond this "
                                        "site's faults.inference.max_kill (1)")
    assert kill_refusal(2, 4, SITE) == "killing 2 of 4 replicas is beyond this site's faults.inference.max_kill (1)"
    assert kill_refusal(8, 8, TWIN) is None  # no limit set


def test_a_switch_os_not_in_the_inventory_is_refused_naming_what_the_fabric_runs():
    assert dialect_refusal("sonic", ["sonic"]) is None
    assert dialect_refusal("nvue", ["cumulus"]) is None  # an alias is the same OS
    assert dialect_refusal("nxos", ["sonic"]) == "no nxos switch in the inventory (this fabric runs: sonic): nothing to drill"
    assert dialect_refusal("eos", []) == "no eos switch in the inventory (this fabric runs: none): nothing to drill"


@pytest.mark.parametrize("text", ["faults: {node_modes: [unplug]}", "faults: {inference: {max_kill: 0}}"])
def test_bad_variant_fields_are_one_line(text):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(text)
    assert "\n" not in str(err.value) and "faults." in str(err.value)
