"""The acceptance workload: the twin "runs" the tools of `drills accept`'s Jobs on the node each pod is
pinned to, and prints their real output shapes (drills/twin/workloads/accept_tools.py).

A pod takes part when it carries the label `gpu-drills.io/accept-check` (gpu | dcgm | burn | nccl-node |
nccl-pair | rdma | storage); its environment gives the tool's arguments as the Job's command uses them
(`ACCEPT_PEER`: the pair's other node, `ACCEPT_LEVEL`: the DCGM level, `ACCEPT_SECONDS`: the burn's
length). Once the pod is Running on its node, the tool "runs" for the check's twin duration
(`new_nodes.durations`), then its output is appended to the pod's log and the container exits
(0, or 1 where the tool itself fails: ib_write_bw on a port that is down). What it prints follows the
node: the figures of `new_nodes.figures`, with that node's `new_nodes.faults` applied. The tools print
the machine's identity where the real ones do (nccl-tests' host names, nvidia-smi's and gpu-burn's GPU
UUIDs, ibstat's GUIDs), and the pair tools honour the fabric: across leaves, a leaf with no uplink up
leaves the two hosts without a path; a pair whose hosts are one machine runs over NVLink.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Hashable

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.nodeutil import EXIT_ANNOTATION, node_ip
from drills.twin.seed import LEAF_LABEL
from drills.twin.profile_acceptance import NewNodes, NodeFault
from drills.twin.workloads import accept_tools as T
from drills.twin.workloads.hub import hub_for

__all__ = ["AcceptanceController", "CHECK_LABEL", "CHECKS"]

log = logging.getLogger(__name__)

CHECK_LABEL = "gpu-drills.io/accept-check"
CHECKS = ("gpu", "dcgm", "burn", "nccl-node", "nccl-pair", "rdma", "storage")
STRAY_IMAGE = "registry.local/gpu-drills/accept-tools:1.0"  # cached on the new nodes: the stray pod starts at once
PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")


class AcceptanceController(Controller):
    name = "acceptance"

    def setup(self) -> None:
        self.pods = self.ctx.informers.informer(PODS)
        self.nodes = self.ctx.informers.informer(NODES)
        self.pods.add_handler(self._on_pod)
        self.due: dict[tuple[str, str], float] = {}  # pod → twin time its tool finishes
        self.done: set[str] = set()  # pod uids whose tool has printed and exited
        self.hub = hub_for(self.ctx.twin) if hasattr(self.ctx, "twin") else None
        profile = self.ctx.profile
        self.model: NewNodes = (profile.new_nodes if profile is not None and profile.new_nodes is not None
                                else NewNodes(pool=""))

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        meta = pod["metadata"]
        if etype != "DELETED" and (meta.get("labels") or {}).get(CHECK_LABEL) in CHECKS:
            self.enqueue((meta.get("namespace", ""), meta["name"]))

    async def reconcile(self, key: Hashable) -> None:
        ns, name = key  # type: ignore[misc]
        pod = self.pods.get(ns, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            self.due.pop((ns, name), None)
            return
        uid = pod["metadata"].get("uid", "")
        if uid in self.done or (pod.get("status") or {}).get("phase") != "Running":
            return
        check = pod["metadata"]["labels"][CHECK_LABEL]
        now = self.ctx.clock.timestamp()
        due = self.due.setdefault((ns, name), now + getattr(self.model.durations, check.split("-")[0]))
        if now < due:
            self.enqueue_after(key, due - now)
            return
        node = pod["spec"].get("nodeName", "")
        lines, code = self._tool_output(check, node, _env(pod))
        fault = self._fault(node)
        lines = [*fault.warnings.get(check, ()), *lines]
        code = fault.exit_codes.get(check, code)
        self.done.add(uid)
        self.due.pop((ns, name), None)
        await self._append(ns, name, pod["spec"]["containers"][0]["name"], lines)
        body = {"code": code, "reason": "Completed" if code == 0 else "Error",
                "message": f"{check} check finished", "container": pod["spec"]["containers"][0]["name"]}
        try:
            await self.ctx.client.patch(PODS, ns, name, {"metadata": {"annotations": {EXIT_ANNOTATION: json.dumps(body)}}})
        except ApiError as err:
            log.warning("acceptance: could not end %s/%s: %s", ns, name, err)
        if fault.changes is not None and fault.changes.after == check:
            await self._change(node, fault)

    async def _change(self, node: str, fault: NodeFault) -> None:
        """The node after its checks: rebooted (a new bootID), fewer GPUs registered, relabelled — through the
        API, as the kubelet, the device plugin and an operator would write it."""
        change = fault.changes
        node = change.node or node
        status: dict = {}
        if change.reboot:
            old = (((self.nodes.get("", node) or {}).get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
            status["nodeInfo"] = {"bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{node}/{old}/reboot"))}
        if change.gpus is not None:
            status["capacity"] = status["allocatable"] = {"nvidia.com/gpu": str(change.gpus)}
        try:
            if status:
                await self.ctx.client.patch(NODES, None, node, {"status": status}, sub="status", kind="strategic")
            if change.labels:
                await self.ctx.client.patch(NODES, None, node, {"metadata": {"labels": dict(change.labels)}})
            if change.cordon:
                await self.ctx.client.patch(NODES, None, node, {"spec": {"unschedulable": True}})
            if change.taints:  # a merge patch replaces the list: the node's taints, the new ones added
                have = ((self.nodes.get("", node) or {}).get("spec") or {}).get("taints") or []
                await self.ctx.client.patch(NODES, None, node, {"spec": {"taints": [
                    *have, *({k: v for k, v in t.model_dump().items() if v is not None} for t in change.taints)]}})
            for kind, statuses in change.conditions.items():
                for status in statuses:  # one write each: the kubelet's transitions, each with its own time
                    now = to_iso(self.ctx.clock.now())
                    await self.ctx.client.patch(NODES, None, node, {"status": {"conditions": [
                        {"type": kind, "status": status, "reason": f"Twin{kind}{status}", "lastTransitionTime": now,
                         "lastHeartbeatTime": now}]}}, sub="status", kind="strategic")
            if change.workload:
                ns, name = change.workload.split("/")
                await self.ctx.client.create(PODS, {"metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
                                                    "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                                                             "containers": [{"name": "main", "image": STRAY_IMAGE,
                                                                             "command": ["sleep", "infinity"]}]}})
        except ApiError as err:
            log.warning("acceptance: could not change node %s: %s", node, err)
        else:
            log.info("acceptance: node %s changed after its checks (%s)", node, change)

    # -- what the tools print ------------------------------------------------------------------
    def _tool_output(self, check: str, node: str, env: dict[str, str]) -> tuple[list[str], int]:
        fig, fault = self.model.figures, self._fault(node)
        gpus, hcas = self._shape(node)
        visible = gpus if fault.visible_gpus is None else min(gpus, fault.visible_gpus)
        host = self._machine(node)
        if check == "gpu":
            return T.nvidia_smi(host, fig.gpu_name, visible, fig.driver_version, fig.cuda_version,
                                [fig.idle_temp_c + i % 3 for i in range(visible)]), 0
        if check == "dcgm":
            level = env.get("ACCEPT_LEVEL", "3")  # the Job lists the host engine's GPUs, then runs the diagnostic
            return ([f"{T.MARK} dcgmi discovery -l"] + T.dcgmi_discovery(fault.dcgm_host or host, fig.gpu_name, visible)
                    + [f"{T.MARK} dcgmi diag -r {level}"]
                    + T.dcgmi_diag(int(level), fig.dcgm_version, fig.driver_version, visible, fault.dcgm_fail,
                                   fault.dcgm_fail_gpu, fault.dcgm_verdict)), 0
        if check == "burn":
            hot = fault.hot_gpu
            gflops = [fig.gemm_gflops * (fault.throttle_factor if i == hot else 1.0) for i in range(visible)]
            temps = [fault.hot_temp_c if i == hot else fig.load_temp_c + i % 3 for i in range(visible)]
            return T.gpu_burn(host, fig.gpu_name, int(env.get("ACCEPT_SECONDS", "180")), gflops, temps), 0
        if check == "nccl-node":
            return T.all_reduce_perf([(host, self._ip(node))], visible, fig.gpu_name,
                                     fig.nvlink_busbw_gbs * visible / max(1, gpus), "IB", [], self._kind()), 0
        if check == "nccl-pair":
            peer = env.get("ACCEPT_PEER", "")
            if self._machine(peer) == host:  # both ranks on one machine: NCCL goes over NVLink, never the network
                return T.all_reduce_perf([(host, self._ip(node))], 2, fig.gpu_name, fig.nvlink_busbw_gbs * 0.75,
                                         "IB", [], self._kind()), 0
            up = [h for h in hcas if self._rail_rate(node, h) > 0]
            busbw = min(self._net(node), self._net(peer)) / 8 * fig.net_efficiency
            cut = not self._path(node, peer)
            return T.all_reduce_perf([(host, self._ip(node)), (self._machine(peer), self._ip(peer))], visible,
                                     fig.gpu_name, busbw, "IB" if up else "Socket", up, self._kind(),
                                     unreachable=cut), 1 if cut else 0
        if check == "rdma":
            lines = [f"{T.MARK} ibstat"] + T.ibstat([(h, h not in fault.down_rails, fig.rail_gbps, fig.link_layer)
                                                     for h in hcas], host)
            code = 0
            peer = self._node_by_ip(env.get("ACCEPT_PEER", ""))
            reachable = fault.rdma_loopback or peer is None or self._path(node, peer)
            tested = env.get("ACCEPT_RAILS", "").split() or hcas  # the Job's list, else every adapter (ibstat -l)
            for h in [h for h in tested if h in hcas]:
                rate = self._rail_rate(node, h) * (1.2 if fault.rdma_loopback else 1.0)  # no wire: PCIe bounds it
                lines.append(f"{T.MARK} ib_write_bw -d {h}")
                lines += T.ib_write_bw(h, rate > 0, "Ethernet" if fig.link_layer == "Ethernet" else "IB",
                                       rate * fig.rail_efficiency, env.get("ACCEPT_PEER", ""), reachable)
                code = code or (0 if rate > 0 and reachable else 1)
            return lines, code
        if check == "storage":
            store = env.get("ACCEPT_DIR", "/store")
            if fault.store_not_mounted:  # the node's own NVMe RAID, not the store
                return ([f"{T.MARK} df"] + T.df_pt("/dev/md0", "ext4", store) + [f"{T.MARK} fio"]
                        + T.fio_json(25000.0, 14000.0, self.model.durations.storage)), 0
            return ([f"{T.MARK} df"] + T.df_pt("10.10.0.10:/checkpoint-store", "nfs4", store) + [f"{T.MARK} fio"]
                    + T.fio_json(fig.store_read_mb_s * fault.store_factor, fig.store_write_mb_s * fault.store_factor,
                                 self.model.durations.storage)), 0
        return [f"unknown acceptance check {check!r}"], 2

    def _machine(self, node: str) -> str:
        """The machine behind a Node object (itself, unless the node fronts another one's)."""
        return self._fault(node).machine or node

    def _path(self, node: str, peer: str) -> bool:
        """Whether the fabric carries traffic between the two nodes: same leaf, or both leaves with an uplink up."""
        leaves = [((self.nodes.get("", n) or {}).get("metadata", {}).get("labels") or {}).get(LEAF_LABEL) for n in (node, peer)]
        if self.hub is None or None in leaves or leaves[0] == leaves[1]:
            return True
        views = [self.hub.leaf(leaf) for leaf in leaves]
        return all(v is None or v.up > 0 for v in views)

    def _node_by_ip(self, ip: str) -> str | None:
        return next((n["metadata"]["name"] for n in self.nodes.items() if node_ip(n) == ip), None) if ip else None

    def _fault(self, node: str) -> NodeFault:
        return self.model.faults.get(node) or NodeFault()

    def _shape(self, node: str) -> tuple[int, list[str]]:
        """GPUs and RDMA devices of the node's pool (its `gpu-drills.io/pool` label)."""
        profile = self.ctx.profile
        obj = self.nodes.get("", node) or {}
        gpus = int(((obj.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu", 8))
        pool = next((p for p in (profile.node_pools.values() if profile else ())
                     if node.startswith(p.name_prefix + "-")), None)
        hcas = list(pool.rdma_devices) if pool is not None else ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
        return gpus, [h for h in hcas if h not in self._fault(node).absent_rails]

    def _rail_rate(self, node: str, hca: str) -> float:
        fault = self._fault(node)
        if hca in fault.down_rails:
            return 0.0
        return self.model.figures.rail_gbps * fault.slow_rails.get(hca, 1.0)

    def _net(self, node: str) -> float:
        """A node's share of a pair's all-reduce (Gb/s): NCCL stripes its rings over the rails that are up,
        so the slowest of them sets the pace of all."""
        rates = [r for r in (self._rail_rate(node, h) for h in self._shape(node)[1]) if r > 0]
        return len(rates) * min(rates) if rates else 10.0  # no rail: NCCL falls back to a 10 Gb/s socket

    def _ip(self, node: str) -> str:
        obj = self.nodes.get("", node)
        return node_ip(obj) if obj else "10.0.0.1"

    def _kind(self) -> str:
        return "RoCE" if self.model.figures.link_layer == "Ethernet" else "IB"

    async def _append(self, ns: str, pod: str, container: str, lines: list[str]) -> None:
        client = self.ctx.client
        url = f"{client.base_url}/twin/v1/namespaces/{ns}/pods/{pod}/log"
        async with client.session.post(url, params={"container": container}, data="\n".join(lines) + "\n",
                                       headers={"Content-Type": "text/plain"}) as resp:
            if resp.status >= 400 and resp.status != 404:
                log.debug("acceptance log append to %s/%s: HTTP %s", ns, pod, resp.status)


def _env(pod: dict) -> dict[str, str]:
    container = (pod.get("spec") or {}).get("containers", [{}])[0]
    return {e["name"]: str(e.get("value", "")) for e in container.get("env") or () if "name" in e}
