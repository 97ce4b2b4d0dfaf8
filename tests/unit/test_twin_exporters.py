"""The twin's exporters print what the real ones print: dcgm-exporter's fields are those of its default counters
file (verbatim in tests/data/real/metrics/), with its labels; the values follow the twin's GPU truth (an XID on a
broken GPU, no utilisation on a stalled job, a hot GPU); kube-state-metrics and vLLM series parse with
Prometheus's text format and carry their real names, labels and buckets."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from drills.twin.exporters.dcgm import COUNTERS, DcgmCollector, read_gpus
from drills.twin.exporters.text import exposition
from drills.twin.exporters.kube_state import KubeStateCollector
from drills.twin.exporters.vllm import ReplicaMetrics

REAL = Path(__file__).parents[1] / "data" / "real" / "metrics"
# The label names of one owned GPU's series in the GPU Operator's documented output (dcgm-exporter 4.x, read by
# hand from NVIDIA's GPU Operator docs "Verify that DCGM Exporter is hosting metrics"): gpu, UUID, pci_bus_id,
# device, modelName, Hostname, DCGM_FI_DRIVER_VERSION, container, namespace, pod.
DOCUMENTED_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
                     "container", "namespace", "pod"}


def _node(gpus=8, unhealthy=0, xid=None):
    ann = {}
    if unhealthy:
        ann = {"twin.gpu-drills.io/gpu-health": "unhealthy", "twin.gpu-drills.io/gpu-unhealthy": str(unhealthy)}
        if xid is not None:
            ann["twin.gpu-drills.io/gpu-xid"] = str(xid)
    return {"metadata": {"name": "gpu-train-01", "annotations": ann, "labels": {"nvidia.com/gpu.memory": "81559"}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}}}


def _pod(name, gpus, node="gpu-train-01", phase="Running", created="2026-01-01T00:00:00Z"):
    return {"metadata": {"name": name, "namespace": "ai-platform", "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "trainer",
                                                       "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def _scrape(collector) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return {f.name: f for f in text_string_to_metric_families(exposition(registry).decode())}


def _default_counters() -> dict[str, tuple[str, str]]:
    out = {}
    for line in (REAL / "dcgm-exporter-default-counters.csv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            field, kind, help_ = (part.strip() for part in line.split(",", 2))
            out[field] = (kind, help_)
    return out


def test_every_dcgm_field_served_is_a_default_counter_with_its_type_and_help():
    real = _default_counters()
    assert "DCGM_FI_DEV_XID_ERRORS" in real and real["DCGM_FI_DEV_GPU_UTIL"] == ("gauge", "GPU utilization (in %).")
    for field, kind, help_ in COUNTERS:
        assert real.get(field) == (kind, help_), field
    served = {f for f, _, _ in COUNTERS}
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"} <= served


def _dcgm(node, pods, busy=lambda p: 0.97, hot=None):
    return DcgmCollector("gpu-train-01", "NVIDIA H100 80GB HBM3", "550.90.07",
                         lambda: read_gpus(node, pods, busy, 34, 67, hot), {})


def test_an_owned_gpu_carries_the_documented_labels_and_its_owner():
    families = _scrape(_dcgm(_node(), [_pod("llm-finetune-8b-worker-0", 8)]))
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert len(util) == 8
    assert set(util[0].labels) == DOCUMENTED_LABELS
    assert (util[0].labels["pod"], util[0].labels["namespace"], util[0].labels["container"]) == (
        "llm-finetune-8b-worker-0", "ai-platform", "trainer")
    assert util[0].labels["Hostname"] == "gpu-train-01" and util[0].labels["device"] == "nvidia0"
    assert util[0].labels["UUID"].startswith("GPU-") and util[0].value == 97.0
    assert families["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"].type == "counter"


def test_the_broken_gpu_reports_the_nodes_xid_and_no_work():
    families = _scrape(_dcgm(_node(unhealthy=1, xid=79), [_pod("w0", 8)]))
    xid = {s.labels["gpu"]: s.value for s in families["DCGM_FI_DEV_XID_ERRORS"].samples}
    util = {s.labels["gpu"]: s.value for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert xid["7"] == 79 and all(v == 0 for g, v in xid.items() if g != "7")
    assert util["7"] == 0 and util["0"] == 97.0


def test_a_stalled_job_leaves_its_gpus_idle_and_cool():
    busy = _scrape(_dcgm(_node(), [_pod("w0", 8)]))
    stalled = _scrape(_dcgm(_node(), [_pod("w0", 8)], busy=lambda p: 0.0))
    assert {s.value for s in stalled["DCGM_FI_DEV_GPU_UTIL"].samples} == {0.0}
    assert max(s.value for s in stalled["DCGM_FI_DEV_GPU_TEMP"].samples) < min(
        s.value for s in busy["DCGM_FI_DEV_GPU_TEMP"].samples)


def test_a_hot_gpu_runs_at_its_fault_temperature_and_unowned_gpus_have_no_owner():
    families = _scrape(_dcgm(_node(), [_pod("w0", 4)], hot=(2, 88)))
    temp = {s.labels["gpu"]: s.value for s in families["DCGM_FI_DEV_GPU_TEMP"].samples}
    assert temp["2"] > 85 and temp["0"] < 70
    owner = {s.labels["gpu"]: s.labels.get("pod", "") for s in families["DCGM_FI_DEV_FB_USED"].samples}
    assert owner["3"] == "w0" and owner["4"] == ""


def test_gpu_owners_follow_allocation_order_and_skip_ended_pods():
    pods = [_pod("late", 4, created="2026-01-02T00:00:00Z"), _pod("early", 4), _pod("done", 4, phase="Succeeded")]
    families = _scrape(_dcgm(_node(), pods))
    owner = {s.labels["gpu"]: s.labels["pod"] for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert [owner[str(i)] for i in range(8)] == ["early"] * 4 + ["late"] * 4


def test_kube_state_series_the_rules_read():
    node = {"metadata": {"name": "gpu-train-01"}, "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "allocatable": {"nvidia.com/gpu": "7", "memory": "2Gi"}}}
    pod = {"metadata": {"name": "w0", "namespace": "ai-platform", "uid": "u1"}, "spec": {"nodeName": "gpu-train-01"},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                      "containerStatuses": [{"name": "trainer", "restartCount": 3, "ready": True}]}}
    dep = {"metadata": {"name": "llama", "namespace": "ai-platform"}, "spec": {"replicas": 2},
           "status": {"replicas": 2, "availableReplicas": 1, "unavailableReplicas": 1}}
    objects = {"nodes": [node], "pods": [pod], "deployments": [dep]}
    fam = _scrape(KubeStateCollector(lambda kind: objects[kind]))
    assert fam["kube_node_spec_unschedulable"].samples[0].value == 1
    ready = {s.labels["status"]: s.value for s in fam["kube_node_status_condition"].samples
             if s.labels["condition"] == "Ready"}
    assert ready == {"true": 0, "false": 1, "unknown": 0}
    alloc = {s.labels["resource"]: (s.value, s.labels["unit"]) for s in fam["kube_node_status_allocatable"].samples}
    assert alloc["nvidia_com_gpu"] == (7, "integer") and alloc["memory"] == (2 * 2 ** 30, "byte")
    restarts = fam["kube_pod_container_status_restarts"]
    assert restarts.type == "counter" and restarts.samples[0].name == "kube_pod_container_status_restarts_total"
    assert restarts.samples[0].value == 3 and set(restarts.samples[0].labels) == {"namespace", "pod", "uid", "container"}
    pod_ready = {s.labels["condition"]: s.value for s in fam["kube_pod_status_ready"].samples}
    assert pod_ready == {"true": 1, "false": 0, "unknown": 0}
    avail = fam["kube_deployment_status_replicas_available"].samples[0]
    assert (avail.labels, avail.value) == ({"namespace": "ai-platform", "deployment": "llama"}, 1)
    assert fam["kube_deployment_spec_replicas"].samples[0].value == 2


def test_vllm_metrics_have_vllms_names_labels_and_buckets():
    m = ReplicaMetrics("llama-7b", max_concurrency=32)
    m.served(latency_s=1.2, prompt_tokens=10, generated=64, first_token_s=0.35)
    m.served(latency_s=70.0, prompt_tokens=10, generated=64, first_token_s=0.35)
    fam = {f.name: f for f in text_string_to_metric_families(m.exposition(inflight=5).decode())}
    assert fam["vllm:num_requests_running"].samples[0].labels == {"model_name": "llama-7b"}
    assert fam["vllm:num_requests_running"].samples[0].value == 5
    buckets = {s.labels["le"]: s.value for s in fam["vllm:e2e_request_latency_seconds"].samples
               if s.name.endswith("_bucket")}
    assert list(buckets) == ["1.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0", "60.0", "+Inf"]
    assert (buckets["1.0"], buckets["2.5"], buckets["60.0"], buckets["+Inf"]) == (0, 1, 1, 2)
    assert fam["vllm:generation_tokens"].samples[0].name == "vllm:generation_tokens_total"
    assert fam["vllm:generation_tokens"].samples[0].value == 128
    success = fam["vllm:request_success"].samples[0]
    assert success.labels == {"model_name": "llama-7b", "finished_reason": "length"} and success.value == 2
    assert not any(s.name.endswith("_created") for f in fam.values() for s in f.samples)  # vLLM disables them


def test_an_empty_answer_is_a_finished_request_that_generated_nothing():
    """What vLLM counts for a completion that ends with no text (the serving defects' HTTP 200, finish_reason stop
    or abort): one more successful request under its finish reason, no generation token, one observation in the
    per-request token histogram's first bucket (build_1_2_5_buckets(4096): le 1, 2, 5 … 2000, +Inf) — what
    InferenceServingNothing reads; a 16-token answer lands above it."""
    m = ReplicaMetrics("llama-7b", max_concurrency=32)
    m.served(latency_s=0.5, prompt_tokens=8, generated=16, first_token_s=0.1)
    m.served(latency_s=0.2, prompt_tokens=8, generated=0, first_token_s=0.2, finished_reason="stop")
    m.served(latency_s=0.2, prompt_tokens=8, generated=0, first_token_s=0.2, finished_reason="abort")
    fam = {f.name: f for f in text_string_to_metric_families(m.exposition(inflight=0).decode())}
    assert fam["vllm:generation_tokens"].samples[0].value == 16
    assert {s.labels["finished_reason"]: s.value for s in fam["vllm:request_success"].samples} == {
        "length": 1, "stop": 1, "abort": 1}
    hist = fam["vllm:request_generation_tokens"]
    assert hist.type == "histogram" and hist.samples[0].labels["model_name"] == "llama-7b"
    buckets = {s.labels["le"]: s.value for s in hist.samples if s.name.endswith("_bucket")}
    assert list(buckets) == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0",
                             "2000.0", "+Inf"]
    assert (buckets["1.0"], buckets["10.0"], buckets["20.0"], buckets["+Inf"]) == (2, 2, 3, 3)


def test_a_go_exporters_counter_is_served_under_its_own_name():
    """dcgm-exporter and snmp_exporter (Go) serve a counter under the name they give it, no `_total` added: the
    rules read `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS` and `ifHCOutOctets` (prometheus_client would add it)."""
    from drills.twin.exporters.text import RawCounter

    class Two:
        def collect(self):
            octets = RawCounter("ifHCOutOctets", "octets out", ["ifName"])
            octets.add_metric(["Ethernet0"], 5)
            return [octets]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Two())
    assert exposition(registry).decode().splitlines() == [
        "# HELP ifHCOutOctets octets out", "# TYPE ifHCOutOctets counter", 'ifHCOutOctets{ifName="Ethernet0"} 5.0']


def test_snmp_exporters_interface_table_follows_the_fabric_both_ends_of_a_shut_cable():
    """snmp_exporter's if_mib for one switch (generator.yml: ifAdminStatus/ifOperStatus 1 up 2 down, ifHC*Octets,
    labels ifAlias/ifDescr/ifIndex/ifName): a leaf uplink shut by its operator reads admin and oper down on the leaf,
    oper down (admin up) on the spine's end of the cable; every other port up."""
    from drills.twin.exporters.snmp import IF_LABELS, IfMibCollector
    from drills.twin.fabric import Fabric, leaf_spine

    specs = leaf_spine(leaves=1, spines=1, dialects=("sonic",), downlinks=2)
    fabric = Fabric(specs)
    leaf, spine = specs[0], specs[1]
    uplink = leaf.uplinks[0]
    fabric.set_admin(leaf.name, uplink.iface, False)

    def table(switch):
        fams = _scrape(IfMibCollector(fabric, None, switch))
        assert set(fams) == {"ifAdminStatus", "ifOperStatus", "ifHCInOctets", "ifHCOutOctets"}
        assert all(set(s.labels) == set(IF_LABELS) for f in fams.values() for s in f.samples)
        return {s.labels["ifName"]: (fams["ifAdminStatus"].samples[i].value, s.value)
                for i, s in enumerate(fams["ifOperStatus"].samples)}

    on_leaf, on_spine = table(leaf.name), table(spine.name)
    assert on_leaf[uplink.iface] == (2, 2) and on_spine[uplink.peer_iface] == (1, 2)
    assert all(v == (1, 1) for k, v in on_leaf.items() if k != uplink.iface)
    assert [int(s.labels["ifIndex"]) for s in _scrape(IfMibCollector(fabric, None, leaf.name))["ifOperStatus"].samples] \
        == list(range(1, len(on_leaf) + 1))


def test_mountstats_of_the_store_has_node_exporters_names_and_follows_the_store_model():
    """node_exporter's mountstats for the checkpoint store's mount (collector/mountstats_linux.go@014ea4e5: names,
    `export`/`protocol`/`mountaddr`(/`operation`) labels): nothing without a modelled store; one writer alone never
    has more than one write in flight and waits for nobody; three writers on a store that gives each less than its
    own link keep three in flight and queue — the request time the rule reads is the queue length × time."""
    import threading
    import time

    from drills.twin.exporters.mountstats import MountStatsCollector
    from drills.twin.workloads.storefs import StoreModel

    assert _scrape(MountStatsCollector("checkpoint-store", lambda: None, lambda: 0.0)) == {}
    P = "node_mountstats_nfs_"

    def run(writers: int) -> tuple[dict, float]:
        model = StoreModel(bandwidth_mb_s=6, client_bandwidth_mb_s=4)  # 3 writers: 2 MB/s each, half their link
        threads = [threading.Thread(target=lambda c=c: [model.transfer(c, 1 << 17) for _ in range(2)])
                   for c in range(writers)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return _scrape(MountStatsCollector("checkpoint-store", model.op_totals, model.age_s)), time.monotonic() - began

    def write(fams, metric):
        [value] = [s.value for s in fams[metric].samples if s.labels["operation"] == "WRITE"]
        return value

    alone, wall_alone = run(1)
    assert {f"{P}operations_requests", f"{P}operations_request_time_seconds", f"{P}total_write_bytes"} <= set(alone)
    sample = alone[f"{P}operations_request_time_seconds"].samples[0]
    assert sample.name == f"{P}operations_request_time_seconds_total"
    assert set(sample.labels) == {"export", "protocol", "mountaddr", "operation"}
    assert sample.labels["export"].endswith(":/checkpoint-store") and sample.labels["protocol"] == "tcp"
    assert write(alone, f"{P}operations_requests") == 2 and alone[f"{P}total_write_bytes"].samples[0].value == 2 << 17
    assert write(alone, f"{P}operations_request_time_seconds") <= wall_alone * 1.05  # ≤ 1 in flight
    assert write(alone, f"{P}operations_queue_time_seconds") < 0.2 * write(alone, f"{P}operations_request_time_seconds")

    flood, wall_flood = run(3)
    assert write(flood, f"{P}operations_requests") == 6
    assert write(flood, f"{P}operations_request_time_seconds") > 2 * wall_flood  # ~3 in flight all along
    assert write(flood, f"{P}operations_queue_time_seconds") > 0.3 * write(flood, f"{P}operations_request_time_seconds")


def _generate_latest_exposition(families) -> bytes:
    """What `exposition` wrote before it had its own writer: generate_latest, then each HELP/TYPE `X_total` line whose
    next sample is named `X` renamed to `X` (the reference the writer must equal, byte for byte)."""
    import re

    from prometheus_client import generate_latest

    class Collected:
        def collect(self):
            return families

    lines = generate_latest(Collected()).split(b"\n")
    meta_re = re.compile(rb"^# (HELP|TYPE) (\S+)_total( .*)?$")
    out = []
    for i, line in enumerate(lines):
        meta = meta_re.match(line)
        if meta is not None:
            base = meta.group(2)
            sample = next((s for s in lines[i + 1:] if not s.startswith(b"#")), b"")
            if sample.startswith(base + b"{") or sample.startswith(base + b" "):
                line = b"# " + meta.group(1) + b" " + base + (meta.group(3) or b"")
        out.append(line)
    return b"\n".join(out)


def test_the_exposition_writer_writes_generate_latests_bytes_for_every_exporter():
    """`exposition` has its own writer (a managed Prometheus scrapes the twin every 0.1 s): its bytes are
    generate_latest's over every collector the twin serves, and over the text format's corners — label values with
    a backslash, a quote and a newline, a HELP with both, NaN/±Inf/1e+06 values, an unlabelled sample, an empty
    family, a family of prometheus_client's own Counter and Histogram (written by generate_latest itself)."""
    from prometheus_client import Counter, Histogram
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, UntypedMetricFamily

    from drills.twin.exporters.mountstats import MountStatsCollector
    from drills.twin.exporters.snmp import IfMibCollector
    from drills.twin.exporters.text import RawCounter
    from drills.twin.fabric import Fabric, leaf_spine
    from drills.twin.workloads.storefs import StoreModel

    specs = leaf_spine(leaves=2, spines=1, dialects=("sonic",), downlinks=2)
    fabric = Fabric(specs)
    fabric.set_admin(specs[0].name, specs[0].uplinks[0].iface, False)
    model = StoreModel(bandwidth_mb_s=6, client_bandwidth_mb_s=4)
    model.transfer(0, 1 << 12)
    ksm_objects = {"nodes": [_node(unhealthy=1) | {"spec": {"unschedulable": True, "taints": [
        {"key": "nvidia.com/gpu", "value": 'a"b\\c\nd', "effect": "NoSchedule"}]}}],
        "pods": [_pod("w0", 8) | {"status": {"phase": "Running", "containerStatuses": [
            {"name": "trainer", "restartCount": 2, "ready": False}]}}], "deployments": []}

    class Corners:
        def collect(self):
            g = GaugeMetricFamily("corner_gauge", 'help with \\ and\nnewline', labels=["zeta", "alpha"])
            g.add_metric(['back\\slash "quoted"\nline', "é"], float("nan"))
            g.add_metric(["inf", ""], float("inf"))
            g.add_metric(["-inf", "x"], float("-inf"))
            g.add_metric(["big", "x"], 1234567.0)
            u = UntypedMetricFamily("corner_untyped", "untyped")
            u.add_metric([], 3)
            c = CounterMetricFamily("corner_requests", "a counter")
            c.add_metric([], 7)
            r = RawCounter("CORNER_RAW_TOTAL", "a Go counter", ["gpu"])
            r.add_metric(["0"], 2e-7)
            return [g, u, GaugeMetricFamily("corner_empty", "no samples"), c, r]

    collectors = [_dcgm(_node(unhealthy=2, xid=79), [_pod("llm-finetune-8b-worker-0", 4), _pod("w1", 2)]),
                  KubeStateCollector(lambda kind: ksm_objects[kind]),
                  IfMibCollector(fabric, None, specs[0].name), IfMibCollector(fabric, None, specs[-1].name),
                  MountStatsCollector("checkpoint-store", model.op_totals, model.age_s), Corners()]
    for collector in collectors:
        families = list(collector.collect())
        registry = CollectorRegistry(auto_describe=False)
        registry.register(type("Fixed", (), {"collect": lambda self, f=families: f})())
        assert exposition(registry) == _generate_latest_exposition(families), type(collector).__name__

    own = CollectorRegistry(auto_describe=False)  # prometheus_client's own metrics: _created samples, buckets
    Counter("own_requests", "requests", ["model"], registry=own).labels("m").inc()
    Histogram("own_latency_seconds", "latency", registry=own).observe(0.3)
    assert exposition(own) == _generate_latest_exposition(list(own.collect()))
