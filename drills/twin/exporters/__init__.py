"""The twin's metrics exporters: what the real exporters of a GPU cluster serve, where they serve it, so a real
Prometheus scrapes the twin as it scrapes a cluster.

- `nvidia-dcgm-exporter` pods (the GPU Operator's DaemonSet, drills/twin/system/gpu-daemonsets.yaml) answer
  `GET :9400/metrics` with their node's GPUs (dcgm.py);
- `kube-state-metrics` pods (a Deployment on the system pool, drills/twin/system/monitoring.yaml) answer
  `GET :8080/metrics` with the API objects' state (kube_state.py);
- each vLLM replica answers `GET :8000/metrics` itself (vllm.py, served by drills/twin/workloads/vllm_replica.py);
- the `node-exporter` pods of the system pool (a DaemonSet, drills/twin/system/monitoring.yaml) answer
  `GET :9100/metrics` with node_exporter's mountstats of the checkpoint store's mount (mountstats.py);
- the `snmp-exporter` pod (a Deployment on the system pool, drills/twin/system/monitoring.yaml) answers
  `GET :9116/snmp?target=<switch>&module=if_mib` with that switch's interfaces, as Prometheus's snmp_exporter
  walks them from the switch (snmp.py): the scrape names the switch, the exporter reaches it.

Where: a pod's port is a port program (drills/twin/workloads/container_ports.py), reached the ways a client
outside the cluster reaches a pod — `kubectl port-forward`, and the API server's pod proxy
(`/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/metrics`, drills/twin/api/proxy.py), which is how a
Prometheus that runs beside the drills (not in the cluster) scrapes pods. An exporter answers only while its
container runs and its node is up; a node without an exporter pod has no GPU metrics at all.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from typing import Any, Callable

from prometheus_client import CollectorRegistry

from drills.twin.api.resources import by_path
from drills.twin.api.status import ApiError
from drills.twin.controllers.nodeutil import kubelet_stopped
from drills.twin.controllers.volcano_objects import JOB_NAME
from drills.twin.exporters.dcgm import DcgmCollector, read_gpus
from drills.twin.exporters.kube_state import KubeStateCollector
from drills.twin.exporters.mountstats import NODE_EXPORTER_PORT, MountStatsCollector
from drills.twin.exporters.snmp import IfMibCollector
from drills.twin.exporters.text import exposition
from drills.twin.workloads.container_ports import PORT_PROGRAMS, Factory, HttpConnection, HttpReply, HttpRequest

__all__ = ["install", "DCGM_PORT", "KSM_PORT", "SNMP_PORT", "TEXT_FORMAT"]

log = logging.getLogger(__name__)

TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"  # what Go's client_golang and vLLM's prometheus_client send
DCGM_PORT = 9400  # DCGM_EXPORTER_LISTEN=":9400"
KSM_PORT = 8080  # kube-state-metrics' --port default
SNMP_PORT = 9116  # snmp_exporter's --web.listen-address default
_NODES, _PODS = by_path("", "v1", "nodes"), by_path("", "v1", "pods")
_DEPLOYMENTS = by_path("apps", "v1", "deployments")
_TRAINING_LOAD = 0.97  # a stepping training worker keeps its GPUs ~97 % busy (NCCL waits are the rest)


def install(twin: Any) -> None:
    """Component provider: register the exporters' port programs on the twin's API server."""
    exporters = _Exporters(twin)
    twin.server.app.setdefault(PORT_PROGRAMS, []).append(exporters.program)


class _Exporters:
    def __init__(self, twin: Any):
        self.twin = twin
        self.totals: dict[str, dict[str, dict[int, float]]] = {}  # node → the DCGM counters' running totals
        self.scraped: dict[str, float] = {}  # node → twin time of the last scrape (counters integrate between)
        self._ne_read: tuple[float, int] = (-1e9, 1)  # (wall monotonic, node_exporter pods running) last counted
        self._faulted_since: dict[str, float] = {}  # outage key → twin time its fault was first seen in place

    def _out(self, key: str, after: float | None, faulted: bool) -> bool:
        """Whether an exporter is in its outage (profile `exporter_outage`): its fault has been in place, as its
        scrapes saw it, for at least `after` twin seconds. Cleared when the fault is gone."""
        if after is None:
            return False
        if not faulted:
            self._faulted_since.pop(key, None)
            return False
        now = self.twin.clock.timestamp()
        return now - self._faulted_since.setdefault(key, now) >= after

    def _outage(self) -> Any:
        profile = getattr(self.twin, "profile", None)
        return getattr(profile, "exporter_outage", None)

    def program(self, pod: dict, port: int, now: Callable[[], float]) -> Factory | None:
        images = [c.get("image") or "" for c in (pod.get("spec") or {}).get("containers") or []]
        if not _running(pod):
            return None
        if port == DCGM_PORT and any("/dcgm-exporter:" in i for i in images):
            node = self._node(pod)
            if node is None or kubelet_stopped(node):
                return None  # the node is down: nothing answers on its pods' addresses
            return lambda: HttpConnection(_metrics(lambda: self._dcgm(node["metadata"]["name"])), now, "")
        if port == KSM_PORT and any("/kube-state-metrics:" in i for i in images):
            return lambda: HttpConnection(_metrics(self._kube_state, self._ksm_down), now, "")
        if port == NODE_EXPORTER_PORT and any("/node-exporter:" in i for i in images):
            node = self._node(pod)
            if node is None or kubelet_stopped(node):
                return None
            # node_exporter's mountstats collector is off by default: only a container that enables it reports mounts
            mountstats = any("--collector.mountstats" in (c.get("args") or []) + (c.get("command") or [])
                             for c in pod["spec"]["containers"])
            return lambda: HttpConnection(_metrics(lambda: self._mountstats(mountstats)), now, "")
        if port == SNMP_PORT and any("/snmp-exporter:" in i for i in images):
            return lambda: HttpConnection(self._snmp, now, "")
        return None

    # -- dcgm-exporter ------------------------------------------------------------------------------
    def _dcgm(self, node_name: str) -> CollectorRegistry:
        store, twin = self.twin.store, self.twin
        node = store.get(_NODES, None, node_name)
        profile = twin.profile
        new = getattr(profile, "new_nodes", None)
        fault = new.faults.get(node_name) if new is not None else None
        figures = new.figures if new is not None else None
        hot = (fault.hot_gpu, fault.hot_temp_c) if fault is not None and fault.hot_gpu is not None else None
        now = twin.clock.timestamp()
        pods = store.list(_PODS, predicate=None)[0]

        def readings():
            return read_gpus(node, pods, lambda p: self._busy(p, now), figures.idle_temp_c if figures else 34,
                             figures.load_temp_c if figures else 67, hot)

        labels = (node["metadata"].get("labels") or {})
        model = labels.get("nvidia.com/gpu.product", "").replace("-", " ")
        driver = profile.node_info.nvidia_driver_version if profile is not None else ""
        collector = DcgmCollector(node_name, model, driver, readings, self.totals.setdefault(node_name, {}))
        last = self.scraped.get(node_name)
        if last is not None and now > last:
            collector.advance(readings(), now - last)
        self.scraped[node_name] = now
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        return registry

    def _busy(self, pod: dict, now: float) -> float:
        """How busy the pod keeps its GPUs (0..1): the truth of its workload."""
        if not _running(pod):
            return 0.0
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        hub = getattr(self.twin, "workloads", None)
        if JOB_NAME in labels:
            sim = (getattr(hub, "training_sims", None) or {}).get((meta.get("namespace"), labels[JOB_NAME]))
            stepping = sim is not None and sim.progress is not None and sim.progress.rate_at(now) > 0
            return _TRAINING_LOAD if stepping else 0.0
        gateway = getattr(hub, "gateway", None)
        if gateway is not None:
            for model in gateway.models.values():
                if (meta.get("namespace"), labels.get("app")) == (model.spec.namespace, model.spec.name):
                    return min(1.0, gateway.inflight.get(meta["name"], 0) / max(1, model.spec.max_concurrency))
        return 0.0

    def _node(self, pod: dict) -> dict | None:
        name = (pod.get("spec") or {}).get("nodeName")
        try:
            return self.twin.store.get(_NODES, None, name) if name else None
        except ApiError:
            return None

    # -- kube-state-metrics -------------------------------------------------------------------------
    def _kube_state(self) -> CollectorRegistry:
        store = self.twin.store
        kinds = {"nodes": _NODES, "pods": _PODS, "deployments": _DEPLOYMENTS}
        registry = CollectorRegistry(auto_describe=False)
        registry.register(KubeStateCollector(lambda kind: store.list(kinds[kind])[0]))
        return registry


    def _ksm_down(self) -> str | None:
        """Defect ksm-stops-mid-fault: no answer once a node has been lost for the outage's duration."""
        from drills.twin.controllers.healthagent import lost

        after = getattr(self._outage(), "kube_state_metrics", None)
        if after is None:
            return None
        faulted = any(lost(n) for n in self.twin.store.list(_NODES)[0])
        return "kube-state-metrics is not answering" if self._out("kube-state-metrics", after, faulted) else None

    # -- node_exporter (mountstats) ------------------------------------------------------------------
    def _mountstats(self, enabled: bool) -> CollectorRegistry:
        from drills.twin.workloads.hub import hub_for

        hub = hub_for(self.twin)
        model = getattr(hub.mount, "model", None) if enabled else None  # None: no mount to report
        store_dir = hub.storage.store_dir if hub.storage is not None else "checkpoint-store"
        # the twin's store clients share one mount: each node_exporter reports its share, so the sums are the store's
        share = 1 / self._node_exporters()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(MountStatsCollector(store_dir, lambda: None if model is None else model.op_totals(share),
                                              lambda: 0.0 if model is None else model.age_s()))
        return registry

    def _node_exporters(self) -> int:
        """How many node_exporter pods run (read at most once a wall second: every scrape asks)."""
        now = time.monotonic()
        if now - self._ne_read[0] > 1.0:
            count = sum(1 for p in self.twin.store.list(_PODS)[0] if _running(p) and any(
                "/node-exporter:" in (c.get("image") or "") for c in (p.get("spec") or {}).get("containers") or []))
            self._ne_read = (now, max(1, count))
        return self._ne_read[1]

    # -- snmp_exporter ------------------------------------------------------------------------------
    async def _snmp(self, req: HttpRequest) -> HttpReply:
        """`/snmp?target=&module=if_mib`, with snmp_exporter's own 400s for a missing target or another module;
        a switch the fabric does not have answers nothing, so the exporter's scrape of it fails (500)."""
        path, _, query = req.path.partition("?")
        if req.method not in ("GET", "HEAD") or path != "/snmp":
            return _text(404, "404 page not found\n")
        params = urllib.parse.parse_qs(query)
        target, module = (params.get("target") or [""])[0], (params.get("module") or ["if_mib"])[0]
        if not target:
            return _text(400, "'target' parameter must be specified\n")
        if module != "if_mib":
            return _text(400, f"Unknown module '{module}'\n")
        handle = getattr(getattr(self.twin, "workloads", None), "fabric", None)
        if handle is None or target not in handle.fabric.switch_names:
            return _text(500, f"Error scraping target {target}: request timeout (after 3 retries)\n")
        after = getattr(self._outage(), "snmp", None)  # defect snmp-stops-mid-fault: the agent hangs once a port is shut
        if self._out(f"snmp:{target}", after, any(not st.admin for st in handle.fabric.states(target))):
            return _text(500, f"Error scraping target {target}: request timeout (after 3 retries)\n")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(IfMibCollector(handle.fabric, handle.traffic, target))
        return HttpReply(200, exposition(registry), (("Content-Type", TEXT_FORMAT),))


def _text(status: int, body: str) -> HttpReply:
    return HttpReply(status, body.encode(), (("Content-Type", "text/plain; charset=utf-8"),))


def _metrics(registry: Callable[[], CollectorRegistry], down: Callable[[], str | None] = lambda: None):
    async def app(req: HttpRequest) -> HttpReply:
        if req.method not in ("GET", "HEAD") or req.path.split("?", 1)[0] != "/metrics":
            return HttpReply(404, b"404 page not found\n", (("Content-Type", "text/plain; charset=utf-8"),))
        if (why := down()) is not None:
            return _text(503, why + "\n")
        return HttpReply(200, exposition(registry()), (("Content-Type", TEXT_FORMAT),))
    return app


def _running(pod: dict) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any("running" in (s.get("state") or {}) for s in status.get("containerStatuses") or [])
