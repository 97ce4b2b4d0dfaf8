"""What an alert is about: the labels that name the object it reports — a node, a switch port, a Deployment, a
store export, a GPU, a volume — as the exporters the rule packs read name them (kube-state-metrics' `node`,
`namespace`/`deployment`, `persistentvolumeclaim`; dcgm-exporter's `Hostname`, `gpu`, `UUID`; snmp_exporter's
`instance` (the switch, as its README relabels the target) with `ifName`/`ifIndex`/`ifDescr`; node_exporter
mountstats' `export`). Labels that name who owns the object today (a GPU's `pod`, the exporter's own `job`) are not
its identity: they change when the platform recovers.

`identity(labels)` is the subset of an alert's labels that names its object; empty when none does.
`about_faults(objects)` tells whether an alert is about one of the objects a drill's faults reached (plans'
`reach.nodes` and `about`, drills/faults): for each kind of object an alert names (a node, a switch port, a
Deployment) and the faults reached, it must name one of those; a kind the faults did not reach, or an alert that
names none, cannot be told apart and counts. An alert about another object is that object's news, never this
fault's detection (issue 30, class 3 for detection).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

__all__ = ["identity", "IDENTITY_LABELS", "PORT_LABELS", "NODE_LABELS", "SCRAPED_NODE", "about_faults",
           "faulted_objects"]

NODE_LABELS = ("node", "Hostname", "hostname", "nodename")  # kube-state-metrics, dcgm-exporter, node_exporter's uname
# the node of the pod a series was scraped from (Prometheus's kubernetes_sd example relabels
# __meta_kubernetes_pod_node_name to it): the object's node only for a per-node exporter, the exporter's own node
# for a cluster-wide one (kube-state-metrics' Deployment series carry the node kube-state-metrics runs on). It
# names the object only when nothing else does.
SCRAPED_NODE = "kubernetes_node"
# labels that alone name an object
IDENTITY_LABELS = (*NODE_LABELS, "deployment", "statefulset", "daemonset", "persistentvolumeclaim", "export", "UUID",
                   "gpu")
PORT_LABELS = ("ifName", "ifIndex", "ifDescr")  # with `instance`: a switch's interface
_SCOPE = ("namespace",)  # narrows a namespaced object's name (a Deployment, a volume claim)
_NAMESPACED = ("deployment", "statefulset", "daemonset", "persistentvolumeclaim")


def identity(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels of `labels` that name the object an alert is about (none: {})."""
    found = {k: v for k, v in labels.items() if k in IDENTITY_LABELS and v}
    ports = {k: v for k, v in labels.items() if k in PORT_LABELS and v}
    if ports and labels.get("instance"):
        found.update(ports, instance=labels["instance"])
    if any(k in found for k in _NAMESPACED):
        found.update({k: labels[k] for k in _SCOPE if labels.get(k)})
    if not found and labels.get(SCRAPED_NODE):
        found[SCRAPED_NODE] = labels[SCRAPED_NODE]
    return found


def faulted_objects(plans: Iterable[Any]) -> list[dict[str, str]]:
    """The objects `plans` (drills.faults.Plan) reached, as about_faults reads them: each node of a reach as
    {"node": name}, then each plan's own `about`."""
    out: list[dict[str, str]] = []
    for plan in plans:
        out += [{"node": name} for name, _ in plan.reach.nodes]
        out += [dict(o) for o in plan.about]
    return out


def about_faults(objects: Iterable[Mapping[str, str]]) -> Callable[[Any], bool]:
    """Whether an alert (drills/detect/alerts.Alert: `.labels`) is about one of `objects` (faulted_objects)."""
    objects = list(objects)
    nodes = {o["node"] for o in objects if o.get("node")}
    ports = [o for o in objects if o.get("switch") and o.get("interface")]
    deployments = {(o.get("namespace", ""), o["deployment"]) for o in objects if o.get("deployment")}

    def about(alert: Any) -> bool:
        labels = alert.labels
        named = [v for k, v in identity(labels).items() if k in (*NODE_LABELS, SCRAPED_NODE)]
        if nodes and named and not any(v in nodes for v in named):
            return False
        ifaces = [labels[k] for k in PORT_LABELS if labels.get(k) and k != "ifIndex"]
        if ports and ifaces and labels.get("instance") and not any(
                _same_switch(labels["instance"], p) and any(_same_iface(i, p["interface"]) for i in ifaces)
                for p in ports):
            return False
        if deployments and labels.get("deployment") and not any(
                labels["deployment"] == d and labels.get("namespace", ns) == ns for ns, d in deployments):
            return False
        return True

    return about


def _same_switch(instance: str, port: Mapping[str, str]) -> bool:
    """An snmp_exporter `instance` (the target as the site wrote it: a name, an address, either with a port or a
    domain) is the port's switch, by its inventory name or its host."""
    host = instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance  # a name or IPv4 with a port
    host = host.strip("[]").lower()
    return any(host == n or host.startswith(n + ".") for n in (port.get("switch", "").lower(),
                                                               port.get("host", "").lower()) if n)


_ABBREVIATED = re.compile(r"^(eth|ethernet|et)(?=\d)", re.I)


def _same_iface(a: str, b: str) -> bool:
    """The same interface, as IF-MIB and a switch's CLI name it (NX-OS/Onyx ifName `Eth1/49` is `Ethernet1/49`)."""
    return _ABBREVIATED.sub("ethernet", a.strip()).lower() == _ABBREVIATED.sub("ethernet", b.strip()).lower()
