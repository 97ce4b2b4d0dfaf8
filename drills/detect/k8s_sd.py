"""Kubernetes service discovery for a Prometheus built without it, over Prometheus's HTTP SD.

Debian's `prometheus` (2.42.0+ds) is built with Kubernetes discovery removed ("Kubernetes support has been
completely removed, due to the insane amount of dependencies in their client library", NEWS.Debian 1.5.0+ds-1;
`kubernetes_sd_configs` is rejected as an unknown field). So the run discovers for it: this bridge lists the
cluster's nodes and pods with the official client (the one code path every drill uses, twin or real) and
serves them at `/sd/node` and `/sd/pod` in HTTP SD's format (a JSON list of `{"targets": [...], "labels":
{...}}`) with the very `__meta_kubernetes_*` labels `kubernetes_sd_configs` (role node / role pod) attaches,
so relabel rules written for `kubernetes_sd_configs` work unchanged — and a Prometheus that has Kubernetes SD
can use it directly instead.

Label set (prometheus/prometheus discovery/kubernetes/node.go and pod.go; docs "kubernetes_sd_config"):
- node: `__address__` = InternalIP:kubelet port, `instance` = node name, `__meta_kubernetes_node_name`,
  `_provider_id`, `_label_<l>`, `_labelpresent_<l>`, `_annotation_<a>`, `_annotationpresent_<a>`,
  `_address_<type>`;
- pod (one target per declared container port; one without port for a container that declares none):
  `__address__` = podIP:port, `__meta_kubernetes_namespace`, `_pod_name`, `_pod_ip`, `_pod_label_<l>`,
  `_pod_labelpresent_<l>`, `_pod_annotation_<a>`, `_pod_annotationpresent_<a>`, `_pod_container_name`,
  `_pod_container_image`, `_pod_container_init`, `_pod_container_port_name`, `_pod_container_port_number`,
  `_pod_container_port_protocol`, `_pod_ready`, `_pod_phase`, `_pod_node_name`, `_pod_host_ip`, `_pod_uid`,
  `_pod_controller_kind`, `_pod_controller_name`. Pods without an IP yet are left out, as there.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["KubernetesSD", "node_groups", "pod_groups", "scrape_configs", "snmp_scrape_config", "SNMP_EXPORTER"]

log = logging.getLogger(__name__)

_M = "__meta_kubernetes_"
SNMP_EXPORTER = "kube-system/snmp-exporter:9116"  # namespace/Service:port of the twin's snmp_exporter
_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def node_groups(nodes: list[dict]) -> list[dict]:
    """HTTP SD target groups for `role: node`."""
    out = []
    for n in nodes:
        meta, status = n.get("metadata") or {}, n.get("status") or {}
        addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
        host = addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname") or ""
        port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250
        labels = {"instance": meta.get("name", ""), f"{_M}node_name": meta.get("name", ""),
                  f"{_M}node_provider_id": (n.get("spec") or {}).get("providerID", "")}
        labels.update(_kv(f"{_M}node_label", f"{_M}node_labelpresent", meta.get("labels")))
        labels.update(_kv(f"{_M}node_annotation", f"{_M}node_annotationpresent", meta.get("annotations")))
        for kind, address in addresses.items():
            labels[f"{_M}node_address_{_name(kind or '')}"] = address or ""
        out.append({"targets": [f"{host}:{port}"], "labels": labels})
    return out


def pod_groups(pods: list[dict]) -> list[dict]:
    """HTTP SD target groups for `role: pod`: one group per pod, one target per container port."""
    out = []
    for p in pods:
        meta, spec, status = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
        ip = status.get("podIP")
        if not ip:
            continue
        ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), "unknown")
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
        common = {f"{_M}namespace": meta.get("namespace", ""), f"{_M}pod_name": meta.get("name", ""),
                  f"{_M}pod_ip": ip, f"{_M}pod_ready": str(ready).lower(), f"{_M}pod_phase": status.get("phase", ""),
                  f"{_M}pod_node_name": spec.get("nodeName", ""), f"{_M}pod_host_ip": status.get("hostIP", ""),
                  f"{_M}pod_uid": meta.get("uid", ""), f"{_M}pod_controller_kind": owner.get("kind", ""),
                  f"{_M}pod_controller_name": owner.get("name", "")}
        common.update(_kv(f"{_M}pod_label", f"{_M}pod_labelpresent", meta.get("labels")))
        common.update(_kv(f"{_M}pod_annotation", f"{_M}pod_annotationpresent", meta.get("annotations")))
        targets = []
        for init, containers in (("false", spec.get("containers") or []), ("true", spec.get("initContainers") or [])):
            for c in containers:
                base = {f"{_M}pod_container_name": c.get("name", ""), f"{_M}pod_container_image": c.get("image", ""),
                        f"{_M}pod_container_init": init}
                ports = c.get("ports") or []
                if not ports and init == "false":
                    targets.append((ip, base))
                for port in ports:
                    targets.append((f"{ip}:{port.get('containerPort')}", {
                        **base, f"{_M}pod_container_port_name": port.get("name", ""),
                        f"{_M}pod_container_port_number": str(port.get("containerPort", "")),
                        f"{_M}pod_container_port_protocol": port.get("protocol", "TCP")}))
        # HTTP SD labels apply to a whole group: one group per target keeps each container's own labels
        out.extend({"targets": [address], "labels": {**common, **extra}} for address, extra in targets)
    return out


def scrape_configs(sd_url: str, api_server: str, refresh_s: float = 5.0, **client: Any) -> list[dict]:
    """The two jobs of Prometheus's own Kubernetes example (documentation/examples/prometheus-kubernetes.yml),
    fed by this bridge: `kubernetes-nodes` (each node's kubelet through the API server's node proxy) and
    `kubernetes-pods` (pods annotated `prometheus.io/scrape: "true"`, on their `prometheus.io/port`, through the
    API server's pod proxy — a Prometheus beside the drills reaches no pod IP). `api_server` is the URL the
    drills use; `client` adds the scrape's `tls_config` / `authorization` for an HTTPS one. Target labels are
    `kubernetes_namespace`, `kubernetes_pod_name`, `kubernetes_node` (the example's), so an exporter's own
    `namespace`/`pod` labels (dcgm-exporter's GPU owner) are kept as they are."""
    parsed = urllib.parse.urlsplit(api_server)
    common = {"scheme": parsed.scheme or "https", **client}
    to_api = {"target_label": "__address__", "replacement": parsed.netloc}
    return [
        {"job_name": "kubernetes-nodes", **common,
         "http_sd_configs": [{"url": f"{sd_url}/sd/node", "refresh_interval": f"{round(refresh_s * 1000)}ms"}],
         "relabel_configs": [
             {"action": "labelmap", "regex": "__meta_kubernetes_node_label_(.+)"}, to_api,
             {"source_labels": ["__meta_kubernetes_node_name"], "regex": "(.+)", "target_label": "__metrics_path__",
              "replacement": "/api/v1/nodes/${1}/proxy/metrics"}]},
        {"job_name": "kubernetes-pods", **common,
         "http_sd_configs": [{"url": f"{sd_url}/sd/pod", "refresh_interval": f"{round(refresh_s * 1000)}ms"}],
         "relabel_configs": [
             {"source_labels": [f"{_M}pod_annotation_prometheus_io_scrape"], "action": "keep", "regex": "true"},
             {"source_labels": [f"{_M}namespace", f"{_M}pod_name", f"{_M}pod_annotation_prometheus_io_port"],
              "regex": "(.+);(.+);([0-9]+)", "target_label": "__metrics_path__",
              "replacement": "/api/v1/namespaces/${1}/pods/${2}:${3}/proxy/metrics"},
             to_api,
             {"source_labels": [f"{_M}namespace"], "target_label": "kubernetes_namespace"},
             {"source_labels": [f"{_M}pod_name"], "target_label": "kubernetes_pod_name"},
             {"source_labels": [f"{_M}pod_node_name"], "target_label": "kubernetes_node"}]},
    ]


def snmp_scrape_config(switches: list[str], api_server: str, exporter: str = SNMP_EXPORTER, **client: Any) -> dict:
    """snmp_exporter's own scrape config (its README: the switch is the target, `module=if_mib`, `instance` the
    switch, the exporter's address the one scraped), reaching the exporter through the API server's Service proxy
    as the pods job reaches pods. Switches are not Kubernetes objects: they come from the switch inventory."""
    parsed = urllib.parse.urlsplit(api_server)
    namespace, service = exporter.split("/", 1)
    return {"job_name": "snmp", "scheme": parsed.scheme or "https", **client,
            "metrics_path": f"/api/v1/namespaces/{namespace}/services/{service}/proxy/snmp",
            "params": {"module": ["if_mib"]},
            "static_configs": [{"targets": list(switches)}],
            "relabel_configs": [
                {"source_labels": ["__address__"], "target_label": "__param_target"},
                {"source_labels": ["__param_target"], "target_label": "instance"},
                {"target_label": "__address__", "replacement": parsed.netloc}]}


class KubernetesSD:
    """The bridge: `start()` → its base URL (`/sd/node`, `/sd/pod` answer from a fresh list each time)."""

    def __init__(self, cluster: Any, host: str = "127.0.0.1", port: int = 0):
        self.cluster = cluster
        self._locks = {"node": threading.Lock(), "pod": threading.Lock()}
        self._last: dict[str, tuple[float, list[dict]]] = {}  # role → (when its listing started, its groups)
        self.listings = 0  # how many lists it sent the API server (bench and tests read it)
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        self._thread = threading.Thread(target=self._server.serve_forever, name="k8s-sd", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def groups(self, role: str) -> list[dict]:
        """The role's groups from a listing that started after this request arrived — one listing per role at a
        time, shared by the requests that waited for it. Prometheus asks again when an answer is slower than its
        refresh interval; on a fleet of 16,000 pods an answer takes seconds, and the threads of requests it gave up
        on would list side by side, each holding a whole listing (the suspected cause of a drill process growing to
        20 GB with detection on at 4,096 nodes, `bench/twin_scale.py --nodes 4096 --detection`)."""
        if role not in self._locks:
            raise KeyError(role)
        asked = time.monotonic()
        with self._locks[role]:
            last = self._last.get(role)
            if last is not None and last[0] >= asked:
                return last[1]
            started = time.monotonic()
            self._last[role] = (started, self._list(role))
            self.listings += 1
            return self._last[role][1]

    def _list(self, role: str) -> list[dict]:
        core = self.cluster.core
        if role == "node":
            return node_groups(_items(core.list_node(_preload_content=False)))
        if role == "pod":
            return pod_groups(_items(core.list_pod_for_all_namespaces(_preload_content=False)))
        raise KeyError(role)

    def __enter__(self) -> "KubernetesSD":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _handler(sd: KubernetesSD):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 — http.server's name
            role = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            try:
                body, code = json.dumps(sd.groups(role)).encode(), 200
            except KeyError:
                body, code = b'{"error": "roles: node, pod"}', 404
            except Exception as err:  # noqa: BLE001 — Prometheus keeps its last good list on a non-200
                log.warning("kubernetes SD bridge: listing %ss failed: %s", role, err)
                body, code = json.dumps({"error": str(err)}).encode(), 503
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            return
    return Handler


def _items(resp) -> list[dict]:
    try:
        return json.loads(resp.data).get("items") or []
    finally:
        resp.release_conn()


def _kv(value_prefix: str, present_prefix: str, values: dict | None) -> dict[str, str]:
    out = {}
    for key, value in (values or {}).items():
        name = _name(key)
        out[f"{value_prefix}_{name}"] = str(value)
        out[f"{present_prefix}_{name}"] = "true"
    return out


def _name(text: str) -> str:
    return _INVALID.sub("_", text)
