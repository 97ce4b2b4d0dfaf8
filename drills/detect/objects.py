"""What an alert is about: the labels that name the object it reports — a node, a switch port, a Deployment, a
store export, a GPU, a volume — as the exporters the rule packs read name them (kube-state-metrics' `node`,
`namespace`/`deployment`, `persistentvolumeclaim`; dcgm-exporter's `Hostname`, `gpu`, `UUID`; snmp_exporter's
`instance` (the switch, as its README relabels the target) with `ifName`/`ifIndex`/`ifDescr`; node_exporter
mountstats' `export`). Labels that name who owns the object today (a GPU's `pod`, the exporter's own `job`) are not
its identity: they change when the platform recovers.

`identity(labels)` is the subset of an alert's labels that names its object; empty when none does.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["identity", "IDENTITY_LABELS", "PORT_LABELS"]

# labels that alone name an object
IDENTITY_LABELS = ("node", "Hostname", "hostname", "nodename", "kubernetes_node", "deployment", "statefulset",
                   "daemonset", "persistentvolumeclaim", "export", "UUID", "gpu")
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
    return found
