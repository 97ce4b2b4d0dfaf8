"""The HTTP SD bridge attaches kubernetes_sd_configs' own meta labels (prometheus/prometheus discovery/kubernetes
pod.go and node.go; the kubernetes_sd_config docs), so relabel rules written for Kubernetes discovery work on it;
and the scrape jobs reach pods and kubelets through the API server's proxy paths."""

from __future__ import annotations

from drills.detect.k8s_sd import node_groups, pod_groups, scrape_configs

NODE = {"metadata": {"name": "gpu-train-01", "labels": {"nvidia.com/gpu.present": "true"},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"providerID": "twin://training/gpu-train-01"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"},
                                 {"type": "Hostname", "address": "gpu-train-01"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
POD = {"metadata": {"name": "nvidia-dcgm-exporter-abcde", "namespace": "gpu-operator", "uid": "u-1",
                    "labels": {"app": "nvidia-dcgm-exporter"}, "annotations": {"prometheus.io/scrape": "true"},
                    "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-dcgm-exporter", "controller": True}]},
       "spec": {"nodeName": "gpu-train-01", "containers": [
           {"name": "nvidia-dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
            "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]},
           {"name": "sidecar", "image": "busybox"}]},
       "status": {"phase": "Running", "podIP": "10.128.2.16", "hostIP": "10.0.0.2",
                  "conditions": [{"type": "Ready", "status": "True"}]}}


def test_a_node_target_is_its_kubelet_with_the_node_meta_labels():
    (group,) = node_groups([NODE])
    assert group["targets"] == ["10.0.0.2:10250"]
    labels = group["labels"]
    assert labels["instance"] == labels["__meta_kubernetes_node_name"] == "gpu-train-01"
    assert labels["__meta_kubernetes_node_label_nvidia_com_gpu_present"] == "true"
    assert labels["__meta_kubernetes_node_labelpresent_nvidia_com_gpu_present"] == "true"
    assert labels["__meta_kubernetes_node_annotation_node_alpha_kubernetes_io_ttl"] == "0"
    assert labels["__meta_kubernetes_node_address_InternalIP"] == "10.0.0.2"
    assert labels["__meta_kubernetes_node_provider_id"] == "twin://training/gpu-train-01"


def test_a_pod_has_a_target_per_port_and_one_for_a_container_without_ports():
    groups = pod_groups([POD])
    assert [g["targets"] for g in groups] == [["10.128.2.16:9400"], ["10.128.2.16"]]
    port = groups[0]["labels"]
    assert port["__meta_kubernetes_pod_container_port_number"] == "9400"
    assert port["__meta_kubernetes_pod_container_port_name"] == "metrics"
    assert port["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] == "true"
    assert (port["__meta_kubernetes_pod_controller_kind"], port["__meta_kubernetes_pod_ready"],
            port["__meta_kubernetes_pod_node_name"]) == ("DaemonSet", "true", "gpu-train-01")
    assert "__meta_kubernetes_pod_container_port_number" not in groups[1]["labels"]
    assert groups[1]["labels"]["__meta_kubernetes_pod_container_name"] == "sidecar"


def test_a_pod_without_an_ip_is_not_a_target():
    assert pod_groups([{**POD, "status": {"phase": "Pending"}}]) == []


def test_the_scrape_jobs_go_through_the_api_servers_proxy():
    nodes, pods = scrape_configs("http://127.0.0.1:9999", "https://10.0.0.1:6443", refresh_s=2,
                                 tls_config={"ca_file": "/ca.crt"})
    assert nodes["scheme"] == pods["scheme"] == "https" and pods["tls_config"] == {"ca_file": "/ca.crt"}
    assert pods["http_sd_configs"] == [{"url": "http://127.0.0.1:9999/sd/pod", "refresh_interval": "2000ms"}]
    rules = {r.get("target_label"): r for r in pods["relabel_configs"]}
    assert rules["__address__"]["replacement"] == "10.0.0.1:6443"
    assert rules["__metrics_path__"]["replacement"] == "/api/v1/namespaces/${1}/pods/${2}:${3}/proxy/metrics"
    assert {r.get("target_label"): r for r in nodes["relabel_configs"]}["__metrics_path__"]["replacement"] == \
        "/api/v1/nodes/${1}/proxy/metrics"


def test_requests_that_arrive_while_a_listing_runs_share_it_and_listings_never_run_side_by_side():
    """Prometheus asks again when an answer is slower than its refresh interval: eight requests at once against an
    API server that takes 1.5 s per list get the same answer from at most two listings, never two at a time (1.5 s:
    on a busy machine the eight threads may start a few hundred milliseconds apart)."""
    import json
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from types import SimpleNamespace

    import requests
    from kubernetes import client

    from drills.detect.k8s_sd import KubernetesSD

    seen = {"lists": 0, "at_once": 0, "most": 0}
    lock = threading.Lock()

    class SlowApiServer(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            with lock:
                seen["lists"] += 1
                seen["at_once"] += 1
                seen["most"] = max(seen["most"], seen["at_once"])
            time.sleep(1.5)
            body = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [POD]}).encode()
            with lock:
                seen["at_once"] -= 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            return

    api = ThreadingHTTPServer(("127.0.0.1", 0), SlowApiServer)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    config = client.Configuration(host=f"http://127.0.0.1:{api.server_address[1]}")
    sd = KubernetesSD(SimpleNamespace(core=client.CoreV1Api(client.ApiClient(config))))
    try:
        sd.start()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: requests.get(f"{sd.url}/sd/pod", timeout=30), range(8)))
    finally:
        sd.stop()
        api.shutdown()
    assert {a.status_code for a in answers} == {200}
    assert len({a.text for a in answers}) == 1 and json.loads(answers[0].text) == pod_groups([POD])
    assert seen["most"] == 1 and seen["lists"] == sd.listings <= 2, seen
