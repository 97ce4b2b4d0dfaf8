"""DCGM as a drill reaches it: the node's host-engine pod, `dcgmi` run in it, and what `dcgmi` prints.

The interface is DCGM's own, documented for testing DCGM's consumers (NVIDIA/DCGM
dcgmi/CommandLineParser.cpp `ProcessAdminCommandLine`, dcgmi/DcgmiTest.cpp `InjectCache`):
`dcgmi test --inject --gpuid G -f FIELD -v VALUE --offset 0` writes VALUE into the host engine's cache for
GPU G, stamped now (the default `--offset 1` stamps it a second in the future), and prints
"Successfully injected field info."; `dcgmi dmon -i G -e FIELD -c 1` prints the cache's latest value
(dcgmi/DeviceMonitor.cpp: `#Entity` / `ID` header lines, then `GPU G  <value>`, `N/A` when none).

Every value that reaches the exec is checked against its grammar first (drills/core/grammar.py: namespace,
pod, container, selector) or is an int the profile bounds; the command is a list of arguments, never a
shell line.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from drills.core.podexec import exec_in_pod
from drills.core.grammar import check
from drills.core.kube import Cluster, obj_get

__all__ = ["INJECTED", "DcgmPod", "find_pod", "inject_command", "dmon_command", "parse_dmon", "run", "pod_on_node"]

log = logging.getLogger(__name__)

INJECTED = "Successfully injected field info."  # dcgmi/DcgmiTest.cpp InjectCache
_ROW = re.compile(r"^GPU (\d+)\s+(\S+)\s*$")
_EXEC_TIMEOUT_S = 60


@dataclass(frozen=True)
class DcgmPod:
    """The pod `dcgmi` runs in: where it is and which container."""

    namespace: str
    name: str
    container: str | None
    node: str


def pod_on_node(cluster: Cluster, namespace: str, selector: str, node: str) -> dict | None:
    """The Running pod matching `selector` in `namespace` scheduled on `node` (spec.nodeName), else None."""
    import json

    check("dns_label", namespace, "namespace")
    check("selector", selector, "label selector")
    check("dns_subdomain", node, "node")
    resp = cluster.core.list_namespaced_pod(namespace, label_selector=selector, field_selector=f"spec.nodeName={node}",
                                            _preload_content=False)
    pods = [p for p in json.loads(resp.data).get("items", [])
            if obj_get(p, "status", "phase") == "Running" and not obj_get(p, "metadata", "deletionTimestamp")]
    return sorted(pods, key=lambda p: p["metadata"]["name"])[0] if pods else None


def find_pod(cluster: Cluster, namespace: str, selector: str, container: str | None, node: str) -> DcgmPod | None:
    """The node's DCGM host-engine pod (by label and spec.nodeName), or None when none runs there."""
    pod = pod_on_node(cluster, namespace, selector, node)
    if pod is None:
        return None
    names = [c.get("name") for c in obj_get(pod, "spec", "containers", default=None) or []]
    if container is not None:
        check("dns_label", container, "container")
        if container not in names:
            return None
    return DcgmPod(namespace, check("dns_subdomain", pod["metadata"]["name"], "pod"), container, node)


def inject_command(gpu: int, field: int, value: int) -> list[str]:
    """`dcgmi test --inject` of `value` into `field` of GPU `gpu`, stamped now."""
    return ["dcgmi", "test", "--inject", "--gpuid", str(int(gpu)), "-f", str(int(field)), "-v", str(int(value)),
            "--offset", "0"]


def dmon_command(gpu: int, field: int) -> list[str]:
    """One `dcgmi dmon` sample of `field` on GPU `gpu`."""
    return ["dcgmi", "dmon", "-i", str(int(gpu)), "-e", str(int(field)), "-c", "1"]


def parse_dmon(text: str, gpu: int) -> tuple[bool, int | None]:
    """(found, value) of GPU `gpu` in one `dcgmi dmon` sample of one field: (True, None) for `N/A` (no value in
    the cache), (False, None) when the output has no row for that GPU or is not dmon's shape."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or not lines[0].startswith("#Entity") or not lines[1].startswith("ID"):
        return False, None
    for line in lines[2:]:
        m = _ROW.match(line)
        if m and int(m.group(1)) == gpu:
            raw = m.group(2)
            if raw == "N/A":
                return True, None
            try:
                return True, int(raw)
            except ValueError:
                return False, None
    return False, None


def run(cluster: Cluster, pod: DcgmPod, command: list[str]) -> tuple[int, str, str]:
    """Run `command` in the pod (pods/exec, no stdin, no tty): (exit code, stdout, stderr); 255 when the exec
    itself failed (the reason in stderr)."""
    return exec_in_pod(cluster, pod.namespace, pod.name, command, pod.container, timeout_s=_EXEC_TIMEOUT_S)


