"""Detection judges (drills/detect/judge.py), the stack's timing in cluster time (drills/detect/stack.py) and the
profile's `monitoring:` section (drills/profile/monitoring.py): small literal inputs, expectations by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from drills.core.catalog import drill_for_tags
from drills.core.errors import InvalidProfile
from drills.core.record import Category
from drills.detect.judge import judge_detection, judge_resolution, judge_storm
from drills.detect.pack import RULES_DIR
from drills.detect.stack import Timing, missing_tools
from drills.profile.model import parse_profile

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_an_alert_raised_within_the_budget_passes_with_its_delay_measured():
    verdict = judge_detection("GpuXidError", T0, at(35), 60)
    assert verdict.passed and verdict.measured == 35 and verdict.target == 60
    assert verdict.reason == "the monitoring raised GpuXidError 35s after the fault, within 1m"


@pytest.mark.parametrize("raised, measured, says", [
    (None, None, "no alert TrainingNodeLost within 1m: the platform's on-call would not have known"),
    (at(75), 75, "the monitoring raised TrainingNodeLost only 1m15s after the fault, over 1m: the platform's on-call "
                 "would not have known"),
])
def test_a_missing_or_late_alert_fails_in_its_own_category(raised, measured, says):
    verdict = judge_detection("TrainingNodeLost", T0, raised, 60)
    assert not verdict.passed and not verdict.inconclusive and not verdict.never_reached
    assert verdict.measured == measured and verdict.reason == says
    for tag in ("gpu_node_loss", "inference_pod_kill", "switch_uplink", "storage_saturation"):
        assert drill_for_tags([tag]).category(verdict.name) is Category.NOT_DETECTED


def test_a_missing_alert_names_a_rule_its_prometheus_does_not_have():
    verdict = judge_detection("TrainingNodeLost", T0, None, 60, rules=["GpuXidError"])
    assert verdict.reason == ("no alert TrainingNodeLost within 1m (its Prometheus has no alerting rule named "
                              "TrainingNodeLost): the platform's on-call would not have known")
    assert "no alerting rule" not in judge_detection("GpuXidError", T0, None, 60, rules=["GpuXidError"]).reason


def test_a_twin_too_fast_for_the_sites_cadence_makes_a_missing_alert_inconclusive_not_a_fail():
    verdict = judge_detection("TrainingNodeLost", T0, None, 60, slowed=True, resolution_s=120)
    assert verdict.inconclusive and not verdict.passed
    assert "one scrape + evaluation = 2m of cluster time" in verdict.reason
    assert judge_detection("TrainingNodeLost", T0, at(20), 60, slowed=True).passed  # in time is in time


def test_nothing_injected_is_nothing_to_detect():
    assert judge_detection("GpuXidError", None, None, 60).inconclusive


def test_resolution_is_judged_from_the_recovery():
    assert judge_resolution("TrainingNodeLost", T0, at(40), 600).passed
    stuck = judge_resolution("TrainingNodeLost", T0, None, 600)
    assert not stuck.passed and stuck.reason.startswith("TrainingNodeLost still firing 10m after the recovery")
    assert drill_for_tags(["gpu_node_loss"]).category(stuck.name) is Category.NOT_RESTORED
    assert judge_resolution("TrainingNodeLost", None, None, 600).inconclusive


def test_more_distinct_alerts_than_the_budget_is_a_storm():
    assert judge_storm(["TrainingNodeLost", "GpuXidError"], 3).passed
    storm = judge_storm(["GpuXidError"] * 8, 3)  # one per GPU: 8 label sets, 8 pages
    assert not storm.passed and (storm.measured, storm.target) == (8, 3)
    assert storm.reason.startswith("alert storm: 8 distinct alerts for one fault (GpuXidError), over the budget of 3")
    assert drill_for_tags(["gpu_node_loss"]).category(storm.name) is Category.ALERT_STORM


@pytest.mark.parametrize("scale, scrape_wall, resolution, slowed", [
    (1, 15, 30, False),  # a site's own: wall time is cluster time
    (60, 0.25, 30, False),  # the twin's default: the site's cadence, dilated
    (150, 0.1, 30, False),  # the fastest twin that keeps a 15 s cadence
    (600, 0.1, 120, True),  # 0.1 s wall floor: 60 cluster s per scrape — too coarse to time a 1 minute budget
])
def test_the_stacks_cadence_is_the_sites_in_cluster_time_down_to_a_wall_floor(scale, scrape_wall, resolution, slowed):
    timing = Timing(scale=scale, scrape_s=15, evaluation_s=15)
    assert timing.wall(15) == pytest.approx(scrape_wall)
    assert timing.resolution_s == pytest.approx(resolution) and timing.slowed is slowed


def test_the_profiles_monitoring_section():
    assert parse_profile("name: x").monitoring is None  # no section: detection off
    managed = parse_profile("monitoring: {prometheus: managed, targets: ['10.0.0.5:9400'], scrape_interval: 30s}")
    assert managed.monitoring.managed and managed.monitoring.scrape_interval == 30
    assert managed.monitoring.rules == ["gpu", "training", "network", "inference", "storage"]
    site = parse_profile("monitoring: {prometheus: 'http://prometheus.monitoring:9090', "
                         "alertmanager: 'http://alertmanager.monitoring:9093', alert_budget: 5}")
    assert not site.monitoring.managed and site.monitoring.alert_budget == 5


@pytest.mark.parametrize("text, says", [
    ("monitoring: {prometheus: 'http://prometheus:9090'}", "needs its Alertmanager too"),
    ("monitoring: {prometheus: 'http://user:pw@prometheus:9090', alertmanager: 'http://am:9093'}", "http(s) URL"),
    ("monitoring: {alert_budget: 0}", "monitoring.alert_budget"),
    ("monitoring: {targets: ['10.0.0.5']}", "host:port"),
    ("monitoring: {prometheus: managed, alertmanagr: 'http://am:9093'}", "alertmanagr"),
])
def test_a_bad_monitoring_section_is_one_line_naming_the_field(text, says):
    with pytest.raises(InvalidProfile, match=None) as err:
        parse_profile(text)
    assert says in str(err.value)


def test_validate_names_what_detection_needs(tmp_path, monkeypatch):
    from drills.profile.monitoring import OPT_OUT
    from drills.validate.monitoring import expected_alerts, monitoring_checks

    monkeypatch.setenv(OPT_OUT, "off")  # the run's opt-out: nothing to check
    [opted] = monitoring_checks(parse_profile("monitoring: {prometheus: managed}"))
    assert opted.ok and f"{OPT_OUT}=off" in opted.detail
    monkeypatch.delenv(OPT_OUT)

    assert expected_alerts() == ["CheckpointStoreSaturated", "FabricLinkDown", "InferenceReplicasUnavailable",
                                 "InferenceUnavailable", "TrainingNodeLost"]  # the features' detection steps (an outline: its Examples)
    [off] = monitoring_checks(parse_profile("name: x"))
    assert off.ok and "not judged" in off.detail
    lines = monitoring_checks(parse_profile("monitoring: {prometheus: managed}"))
    if missing_tools():
        assert not lines[0].ok and lines[0].warn and "not installed" in lines[0].detail  # the steps skip, naming it
    else:
        assert all(c.ok for c in lines), [c.line() for c in lines]
        bad = tmp_path / "seed-only.yaml"
        bad.write_text((RULES_DIR / "seed.yaml").read_text())
        lines = monitoring_checks(parse_profile(f"monitoring: {{prometheus: managed, rules: ['{bad}']}}"))
        assert [c.ok for c in lines] == [True, False] and "TrainingNodeLost" in lines[1].detail
    [am, rules] = monitoring_checks(parse_profile("monitoring: {prometheus: 'http://127.0.0.1:9', "
                                                  "alertmanager: 'http://127.0.0.1:9'}"))  # nothing listens on 9
    assert not am.ok and "does not answer" in am.detail and not rules.ok and "cannot be read" in rules.detail


def test_a_detection_through_a_held_twin_clock_is_measured_at_the_stacks_own_cadence():
    """The twin's clock held still at the fault (its controllers catching up) while the wall-clock Prometheus
    scraped, evaluated and fired: on the cluster clock the alert came 0 s after the fault, a cadence no site has.
    The watch measures the longer way, wall seconds × scale: 0.4 wall s at 60× is 24 s."""
    from drills.core.clock import DilatedClock
    from drills.detect.alerts import Alert, AlertWatch, Seen

    fault = datetime(2026, 12, 5, 15, 0, tzinfo=timezone.utc)
    watch = AlertWatch("http://unused", DilatedClock(scale=60.0))
    watch.history = [(99.9, fault - timedelta(seconds=6)), (100.0, fault), (100.2, fault), (100.4, fault)]
    watch.seen["f1"] = Seen(Alert("TrainingNodeLost", "f1", {}, "active"), fault, fault, notified=True,
                            first_wall=100.4)
    assert watch.raised("TrainingNodeLost") == fault  # the cluster clock alone: "at the very instant"
    assert watch.raised_since("TrainingNodeLost", fault, 60.0) == fault + timedelta(seconds=24)
    assert watch.raised_since("TrainingNodeLost", fault, 1.0) == fault + timedelta(seconds=0.4)  # a real cluster
    assert watch.raised_since("GpuXidError", fault, 60.0) is None


def test_an_alert_already_firing_before_the_fault_is_never_its_detection():
    """Issue 30, class 1 for detection (red team, wave 7): the drill's alert about the very node started firing after
    the watch was armed and before the fault (the node was already flapping). Before: `raised_since` took its first
    sighting, 0 s "after" the fault — PASS "raised 0s after the fault"; one in Alertmanager's baseline was a FAIL
    not_detected, blaming a monitoring that was alerting all along. Now neither is the fault's detection: with no new
    instance the check is inconclusive (not observed), naming what was firing; a new instance is judged as usual."""
    from drills.core.clock import DilatedClock
    from drills.detect.alerts import Alert, AlertWatch, Seen

    fault = datetime(2026, 12, 5, 15, 0, tzinfo=timezone.utc)
    watch = AlertWatch("http://unused", DilatedClock(scale=60.0))  # one poll = 0.2 wall s = 12 cluster s
    watch.history = [(90.0, fault - timedelta(seconds=600)), (100.0, fault), (100.5, fault + timedelta(seconds=30))]
    early = Alert("TrainingNodeLost", "f1", {"alertname": "TrainingNodeLost", "node": "gpu-train-01"}, "active")
    watch.seen["f1"] = Seen(early, fault - timedelta(seconds=600), fault + timedelta(seconds=30), notified=True,
                            first_wall=90.0)
    assert watch.raised("TrainingNodeLost") == fault - timedelta(seconds=600)  # what the drill credited before
    assert watch.raised_since("TrainingNodeLost", fault, 60.0) is None
    assert watch.raised("TrainingNodeLost", fault) is None
    assert watch.firing_before("TrainingNodeLost", fault) == [early]
    verdict = judge_detection("TrainingNodeLost", fault, None, 60.0, already=["node=gpu-train-01"])
    assert verdict.inconclusive and verdict.unobserved and not verdict.passed
    assert "already firing before the fault (node=gpu-train-01)" in verdict.reason
    # in the baseline (firing when the watch started): the same, never a miss blamed on the monitoring
    watch.seen.clear()
    watch.baseline = {"f1": early}
    assert watch.firing_before("TrainingNodeLost", fault) == [early]
    # a new instance (another fingerprint, after the fault) is the detection, judged as always
    fresh = Alert("TrainingNodeLost", "f2", {"alertname": "TrainingNodeLost", "node": "gpu-train-02"}, "active")
    watch.seen["f2"] = Seen(fresh, fault + timedelta(seconds=30), fault + timedelta(seconds=30), notified=True,
                            first_wall=100.5)
    raised = watch.raised_since("TrainingNodeLost", fault, 60.0)
    assert raised == fault + timedelta(seconds=30)
    assert judge_detection("TrainingNodeLost", fault, raised, 60.0, already=["node=gpu-train-01"]).passed
    # an instance first seen within one poll before the fault's stamp is the fault's (the poll's own lag)
    watch.seen["f3"] = Seen(fresh, fault - timedelta(seconds=5), fault, notified=True, first_wall=99.9)
    assert watch.firing_before("TrainingNodeLost", fault) == [early]


def test_quiet_monitoring_with_an_alert_firing_since_before_the_fault_is_inconclusive():
    """The same for "raises none of": an instance first seen before the fault is neither a page the planned operation
    caused (FAIL before) nor silence (inconclusive, already firing)."""
    from drills.detect.judge import judge_quiet

    fault = datetime(2026, 12, 5, 15, 0, tzinfo=timezone.utc)
    verdict = judge_quiet(["InferenceUnavailable"], fault, {"InferenceUnavailable": None}, {"InferenceUnavailable": None},
                          already=["InferenceUnavailable"])
    assert verdict.inconclusive and "already firing before the fault" in verdict.reason


def test_an_alert_about_another_node_is_not_the_faulted_nodes_detection():
    """Issue 30, class 3 for detection (red team, wave 7): the drill cordons gpu-train-01; its TrainingNodeLost is
    muted (a maintenance silence left on it: suppressed, nobody told) while someone cordons gpu-train-03 during the
    drill and TrainingNodeLost{node="gpu-train-03"} pages. Before: the first notifying instance of the name was the
    detection — PASS. Now an instance naming a node counts only for a node the fault reached; the miss names the
    other node's alert. One naming no node (a Deployment's) still counts."""
    from drills.core.clock import DilatedClock
    from drills.detect.alerts import Alert, AlertWatch, Seen
    from drills.detect.objects import about_faults

    fault = datetime(2026, 12, 5, 15, 0, tzinfo=timezone.utc)
    watch = AlertWatch("http://unused", DilatedClock(scale=60.0))
    watch.history = [(100.0, fault), (100.5, fault + timedelta(seconds=30))]
    muted = Alert("TrainingNodeLost", "f1", {"alertname": "TrainingNodeLost", "node": "gpu-train-01"}, "suppressed")
    other = Alert("TrainingNodeLost", "f2", {"alertname": "TrainingNodeLost", "node": "gpu-train-03"}, "active")
    for fp, alert in (("f1", muted), ("f2", other)):
        watch.seen[fp] = Seen(alert, fault + timedelta(seconds=30), fault + timedelta(seconds=30),
                              notified=alert.notifies, first_wall=100.5)
    about = about_faults([{"node": "gpu-train-01"}])
    assert watch.raised_since("TrainingNodeLost", fault, 60.0) == fault + timedelta(seconds=30)  # credited before
    assert watch.raised_since("TrainingNodeLost", fault, 60.0, about) is None
    assert watch.elsewhere("TrainingNodeLost", fault, about) == [other]
    verdict = judge_detection("TrainingNodeLost", fault, None, 60.0, elsewhere=["node=gpu-train-03"])
    assert not verdict.passed and not verdict.inconclusive and verdict.name == "detection"
    assert "no alert TrainingNodeLost within 1m about the faulted object; it fired about another (node=gpu-train-03)" \
        in verdict.reason
    assert about(Alert("InferenceReplicasUnavailable", "f3", {"deployment": "llama-7b-infer"}, "active"))
    assert about(Alert("GpuXidError", "f4", {"Hostname": "gpu-train-01", "gpu": "2"}, "active"))
    assert not about(Alert("GpuXidError", "f5", {"Hostname": "gpu-train-02", "gpu": "2"}, "active"))
    assert about_faults([])(other)  # a fault that reached no node binds nothing
    # kube-state-metrics' Deployment series carry the node kube-state-metrics runs on (the scrape's relabel): not
    # the object's node
    assert about(Alert("InferenceReplicasUnavailable", "f6", {"deployment": "llama-7b-infer",
                                                              "kubernetes_node": "cpu-system-01"}, "active"))


@pytest.mark.parametrize("labels, about", [
    ({"instance": "leaf-1", "ifName": "Ethernet240", "ifIndex": "31"}, True),
    ({"instance": "spine-1", "ifName": "Ethernet0"}, True),  # the far end of the same cable
    ({"instance": "10.0.0.11:161", "ifName": "Eth1/49", "ifDescr": "Ethernet1/49"}, True),  # by host, NX-OS ifName
    ({"instance": "leaf-1", "ifName": "Ethernet248"}, False),  # another port of the same leaf
    ({"instance": "leaf-2", "ifName": "Ethernet240"}, False),  # the same port name on another leaf
    ({"namespace": "ai-platform", "deployment": "llama-7b-infer"}, True),
    ({"namespace": "ai-platform", "deployment": "embedder"}, False),  # another Deployment went down
    ({"namespace": "other", "deployment": "llama-7b-infer"}, False),
    ({"kubernetes_node": "cpu-system-01", "job": "x"}, True),  # a node the faults did not reach: no node was
])
def test_an_alert_about_another_port_or_deployment_is_not_the_faults_detection(labels, about):
    """Class 3 for detection beyond nodes (issue 30, wave 8): the faults' ports (both ends of the cable, by the
    inventory's name or host, IF-MIB's or the CLI's interface name) and Deployments bind the alerts that name one."""
    from drills.detect.alerts import Alert
    from drills.detect.objects import about_faults

    objects = [{"switch": "leaf-1", "host": "10.0.0.1", "interface": "Ethernet240"},
               {"switch": "spine-1", "host": "10.0.0.11", "interface": "Ethernet0"},
               {"switch": "spine-1", "host": "10.0.0.11", "interface": "Ethernet1/49"},
               {"namespace": "ai-platform", "deployment": "llama-7b-infer"}]
    assert about_faults(objects)(Alert("X", "f", labels, "active")) is about


def test_an_alert_gone_with_its_data_is_a_failed_resolution_and_one_unread_is_not_evidence():
    """Class 2 for detection (issue 30): a resolution in time is a pass only with its data — Prometheus read the
    object after the alert went; gone with its data (an exporter that went quiet, the fault still in place) fails,
    naming the object; not readable back is inconclusive."""
    recovered = T0 + timedelta(minutes=5)
    early = T0 + timedelta(minutes=2)  # gone before the recovery: measured 0 s
    seen = judge_resolution("TrainingNodeLost", recovered, early, 600, seen=["node=gpu-train-01"])
    assert seen.passed and seen.measured == 0 and "Prometheus still read node=gpu-train-01 after it went" in seen.reason
    blind = judge_resolution("TrainingNodeLost", recovered, early, 600, blind=["node=gpu-train-01 (TrainingNodeLost)"])
    assert not blind.passed and not blind.inconclusive
    assert "went away, but with its data" in blind.reason and "node=gpu-train-01" in blind.reason
    assert drill_for_tags(["gpu_node_loss"]).category(blind.name) is Category.NOT_RESTORED
    unread = judge_resolution("TrainingNodeLost", recovered, early, 600, unread=["node=gpu-train-01: no answer"])
    assert unread.inconclusive and unread.unobserved
    late = judge_resolution("TrainingNodeLost", recovered, None, 600, blind=["node=gpu-train-01 (TrainingNodeLost)"])
    assert not late.passed and "still firing" in late.reason  # still firing is its own failure, first


@pytest.mark.parametrize("labels, about", [
    ({"alertname": "TrainingNodeLost", "node": "n1", "severity": "critical"}, {"node": "n1"}),
    ({"alertname": "GpuXidError", "Hostname": "n1", "gpu": "3", "UUID": "GPU-3", "namespace": "ai", "pod": "w-0"},
     {"Hostname": "n1", "gpu": "3", "UUID": "GPU-3"}),  # the owner pod moves when the platform recovers
    ({"alertname": "FabricLinkDown", "instance": "leaf-1", "ifName": "Ethernet240", "ifIndex": "31", "job": "snmp"},
     {"instance": "leaf-1", "ifName": "Ethernet240", "ifIndex": "31"}),
    ({"alertname": "InferenceUnavailable", "namespace": "serving", "deployment": "llama", "instance": "10.0.0.5:8080"},
     {"namespace": "serving", "deployment": "llama"}),  # the exporter's own instance is not the object
    ({"alertname": "CheckpointStoreSaturated", "export": "nfs:/checkpoint-store"}, {"export": "nfs:/checkpoint-store"}),
    ({"alertname": "Custom", "instance": "10.0.0.5:8080", "job": "x"}, {}),
])
def test_an_alerts_object_is_named_by_its_identity_labels(labels, about):
    from drills.detect.objects import identity

    assert identity(labels) == about


def test_the_killed_pods_deployment_is_read_from_their_replicaset_owner():
    """Plan.about of a pod kill: the Deployment named by each pod's ReplicaSet owner, `<deployment>-<pod-template-hash>`
    (how the Deployment controller names its ReplicaSets); a bare pod or another owner names none."""
    from drills.faults.pods import owning_deployments

    def pod(owner_kind: str, owner: str, hash_: str | None) -> dict:
        labels = {"app": "llama"} | ({"pod-template-hash": hash_} if hash_ else {})
        return {"metadata": {"labels": labels, "ownerReferences": [{"kind": owner_kind, "name": owner}]}}

    pods = [pod("ReplicaSet", "llama-7b-infer-59846bdbd", "59846bdbd"),
            pod("ReplicaSet", "llama-7b-infer-59846bdbd", "59846bdbd"),
            pod("StatefulSet", "embedder", None), pod("ReplicaSet", "odd-name", "59846bdbd")]
    assert owning_deployments(pods) == ["llama-7b-infer"]
