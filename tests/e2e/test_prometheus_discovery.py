"""A real Prometheus (Debian's) finds the twin's nodes and pods through Kubernetes discovery (served over HTTP SD
by drills/detect/k8s_sd.py: Debian builds Prometheus without kubernetes_sd) and scrapes the twin's exporters —
dcgm-exporter per GPU node, kube-state-metrics on the system pool, vLLM on each replica — through the API server's
pod proxy; the series follow the twin's truth (an XID on the GPU the twin broke) and a node without an exporter
has no GPU series at all."""

from __future__ import annotations

import time

import pytest
import requests

from drills.core.kube import connect_twin
from drills.detect.k8s_sd import KubernetesSD, scrape_configs, snmp_scrape_config
from drills.detect.prometheus_proc import PrometheusProcess, find_prometheus
from drills.twin.launcher import start_twin
from drills.twin.profile import load_profile
from drills.twin.seed import seed_objects

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_prometheus() is None, reason="prometheus is not installed (Debian `prometheus`)")]

GPU_NODES = {"gpu-train-01": 8, "gpu-train-02": 8, "gpu-train-03": 8, "gpu-train-04": 8, "gpu-infer-01": 4,
             "gpu-infer-02": 4}
CPU_NODES = {"cpu-system-01", "cpu-system-02"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("twin-prom"), profile="minimal")
    sd = prom = None
    try:
        sd = KubernetesSD(connect_twin(handle.kubeconfig, handle.url))
        sd.start()
        prom = PrometheusProcess({"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                                             "evaluation_interval": "1s"},
                                  "scrape_configs": [*scrape_configs(sd.url, handle.url, refresh_s=1),
                                                     snmp_scrape_config(_switches(handle), handle.url)]},
                                 tmp_path_factory.mktemp("prometheus"))
        prom.start()
        yield handle, prom
    finally:
        for part in (prom, sd, handle):
            if part is not None:
                part.stop()


def _switches(handle) -> list[str]:
    return [s["name"] for s in handle.info.get("switches") or []]


def _until(predicate, what: str, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)
    return value


def _by(series: list[dict], label: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for s in series:
        out.setdefault(s["metric"].get(label, ""), []).append(s)
    return out


def test_discovery_finds_every_node_and_the_annotated_pods_and_scrapes_them(stack):
    handle, prom = stack

    def annotated_pods():  # the twin may still be creating its DaemonSets' pods when the module's first test runs
        pods = requests.get(f"{handle.url}/api/v1/pods", timeout=10).json()["items"]
        names = {p["metadata"]["name"] for p in pods
                 if (p["metadata"].get("annotations") or {}).get("prometheus.io/scrape") == "true"}
        # dcgm-exporter per GPU node, 2 vLLM replicas, kube-state-metrics, node_exporter per system node
        return names if len(names) >= 6 + 2 + 1 + len(CPU_NODES) else None

    annotated = _until(annotated_pods, "every exporter pod created")
    assert len(annotated) == 6 + 2 + 1 + len(CPU_NODES)

    found: set = set()
    nodes: set = set()

    def up():  # each target seen up once (on a busy machine one scrape of 1 s may time out while another is up)
        targets = prom.targets()
        found.update(t["labels"].get("kubernetes_pod_name") for t in targets
                     if t["labels"]["job"] == "kubernetes-pods" and t["health"] == "up")
        nodes.update(t["discoveredLabels"].get("__meta_kubernetes_node_name") for t in targets
                     if t["labels"]["job"] == "kubernetes-nodes" and t["health"] == "up")
        return (found, nodes) if found == annotated and nodes == set(GPU_NODES) | CPU_NODES else None

    found, nodes = _until(up, "every node and annotated pod discovered and up")
    node_target = next(t for t in prom.targets() if t["labels"]["job"] == "kubernetes-nodes")
    assert node_target["labels"].get("nvidia_com_gpu_present") in ("true", None)  # node labels mapped
    assert any(t["discoveredLabels"].get("__meta_kubernetes_pod_container_port_number") == "9400"
               for t in prom.targets() if t["labels"]["job"] == "kubernetes-pods")


def test_every_gpu_reports_through_its_nodes_exporter_with_its_owner(stack):
    _, prom = stack
    util = _until(lambda: (s := prom.query("DCGM_FI_DEV_GPU_UTIL")) and len(s) == sum(GPU_NODES.values()) and s,
                  "a utilisation series per GPU")
    per_host = {h: len(v) for h, v in _by(util, "Hostname").items()}
    assert per_host == GPU_NODES  # no GPU series for the CPU nodes
    owned = [s["metric"] for s in util if s["metric"].get("pod", "").startswith("llm-finetune-8b-worker-")]
    assert len(owned) == 16 and all(m["namespace"] == "ai-platform" and m["container"] for m in owned)
    assert {m["modelName"] for m in owned} == {"NVIDIA H100 80GB HBM3"}
    assert len(_until(lambda: prom.query("kube_node_spec_unschedulable"), "kube-state-metrics")) == 8
    assert len(_until(lambda: prom.query("vllm:num_requests_running"), "vLLM's own metrics")) == 2
    store = _until(lambda: prom.query('node_mountstats_nfs_operations_request_time_seconds_total{operation="WRITE"}'),
                   "node_exporter's mountstats of the checkpoint store")
    assert {s["metric"]["kubernetes_node"] for s in store} == CPU_NODES  # the system pool's node_exporters
    assert {s["metric"]["export"] for s in store} == {"ckpt-store.storage.twin:/checkpoint-store"}


def test_an_xid_on_a_broken_gpu_reaches_prometheus_and_clears(stack):
    handle, prom = stack
    node = "gpu-train-03"
    expr = f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{node}"}} > 0'
    assert prom.query(expr) == []
    requests.post(f"{handle.url}/twin/v1/nodes/{node}/gpu", json={"state": "unhealthy", "xid": 79, "count": 1},
                  timeout=10).raise_for_status()
    try:
        (hit,) = _until(lambda: prom.query(expr), "the XID in Prometheus")
        assert hit["value"][1] == "79" and hit["metric"]["gpu"] == "7" and hit["metric"]["UUID"].startswith("GPU-")
        alloc = f'kube_node_status_allocatable{{node="{node}",resource="nvidia_com_gpu"}}'
        _until(lambda: [s for s in prom.query(alloc) if s["value"][1] == "7"], "the device plugin's allocatable 7")
    finally:
        requests.post(f"{handle.url}/twin/v1/nodes/{node}/gpu", json={"state": "healthy"}, timeout=10)
    _until(lambda: prom.query(expr) == [], "the XID gone after the GPU is healthy again")


def test_a_node_without_an_exporter_has_no_gpu_series(stack):
    """The GPU Operator's switch off on one node (what the dcgm-exporter-off-training defect does to the training
    pool): its exporter pod goes, its GPU series go stale, an XID there reaches no one."""
    handle, prom = stack
    node = "gpu-train-04"
    label = "nvidia.com~1gpu.deploy.dcgm-exporter"
    patch = {"metadata": {"labels": {"nvidia.com/gpu.deploy.dcgm-exporter": "false"}}}
    requests.patch(f"{handle.url}/api/v1/nodes/{node}", json=patch,
                   headers={"Content-Type": "application/merge-patch+json"}, timeout=10).raise_for_status()
    requests.post(f"{handle.url}/twin/v1/nodes/{node}/gpu", json={"state": "unhealthy", "xid": 79, "count": 1},
                  timeout=10).raise_for_status()
    try:
        _until(lambda: prom.query(f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{node}"}}') == [], "the node's series stale")
        time.sleep(2.0)  # two scrape intervals: an exporter would have reported the XID by now
        assert prom.query(f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{node}"}}') == []
        assert _by(prom.query("DCGM_FI_DEV_GPU_UTIL"), "Hostname").keys() == set(GPU_NODES) - {node}
    finally:
        requests.post(f"{handle.url}/twin/v1/nodes/{node}/gpu", json={"state": "healthy"}, timeout=10)
        requests.patch(f"{handle.url}/api/v1/nodes/{node}", json=[{"op": "replace", "path": f"/metadata/labels/{label}",
                                                                    "value": "true"}],
                       headers={"Content-Type": "application/json-patch+json"}, timeout=10)


def test_the_defect_takes_the_exporter_off_the_training_nodes_only():
    objects = seed_objects(load_profile("minimal", defects=["dcgm-exporter-off-training"]))
    ds = next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-dcgm-exporter")
    selector = ds["spec"]["template"]["spec"]["nodeSelector"]
    chosen = {o["metadata"]["name"] for o in objects if o["kind"] == "Node"
              and all(o["metadata"]["labels"].get(k) == v for k, v in selector.items())}
    assert chosen == {"gpu-infer-01", "gpu-infer-02"}


def test_every_switch_port_reports_through_snmp_exporter_and_a_shut_uplink_goes_down(stack):
    """The switches, through the twin's snmp_exporter (its `if_mib` module, reached through the API server's Service
    proxy as a Prometheus beside the drills reaches it): every port of every switch with its state and counters
    (`ifHCOutOctets`, no `_total`: snmp_exporter's name); the uplinks under the training job count its traffic.
    A shut uplink going down and paging FabricLinkDown is the uplink drill's (tests/e2e/test_detect_stack.py)."""
    handle, prom = stack
    switches = _switches(handle)
    assert switches and {t["labels"]["instance"] for t in _until(
        lambda: [t for t in prom.targets() if t["labels"]["job"] == "snmp" and t["health"] == "up"] or None,
        "the snmp job up")} <= set(switches)
    oper = _until(lambda: (s := prom.query('ifOperStatus{job="snmp"}')) and
                  {x["metric"]["instance"] for x in s} == set(switches) and s, "every switch's interfaces")
    assert all(x["value"][1] == "1" for x in oper)  # a healthy fabric: every port up
    busy = _until(lambda: prom.query('rate(ifHCOutOctets{job="snmp"}[5s]) > 0'), "the job's traffic on uplinks")
    leaves = {x["metric"]["instance"] for x in busy}
    assert leaves and all(x["metric"]["ifName"].startswith("Ethernet") for x in busy)


def _node_exporter_metrics(handle) -> dict[str, str]:
    """Each node_exporter pod's `/metrics`, read as Prometheus reads it: through the API server's pod proxy."""
    pods = requests.get(f"{handle.url}/api/v1/pods", timeout=10).json()["items"]
    out = {}
    for pod in pods:
        if not any("/node-exporter:" in c.get("image", "") for c in pod["spec"]["containers"]):
            continue
        meta = pod["metadata"]
        url = f"{handle.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}:9100/proxy/metrics"
        out[pod["spec"].get("nodeName", "")] = requests.get(url, timeout=10).text
    return out


def test_node_exporter_as_it_ships_reports_nothing_of_the_store_a_flood_could_page_on(stack, tmp_path):
    """Defect node-exporter-defaults: the system pool's node_exporter without `--collector.mountstats` (its default)
    serves its metrics but no `node_mountstats_*` series — CheckpointStoreSaturated has nothing to fire on (the
    drill-level FAIL not_detected of a rule with no series: test_detect_stack.py's blind copy). The module's twin,
    with the collector on, serves them from every system node."""
    handle, _ = stack
    on = _until(lambda: (m := _node_exporter_metrics(handle)) and len(m) == len(CPU_NODES) and m, "node_exporters")
    assert all("node_mountstats_nfs_operations_request_time_seconds_total" in text for text in on.values())
    shipped = start_twin(tmp_path / "twin", profile="minimal", defects=["node-exporter-defaults"])
    try:
        off = _until(lambda: (m := _node_exporter_metrics(shipped)) and len(m) == len(CPU_NODES) and m,
                     "node_exporters as they ship")
    finally:
        shipped.stop()
    assert all(text and "node_mountstats" not in text for text in off.values()), off
