"""What Prometheus's snmp_exporter (prometheus/snmp_exporter, its shipped `if_mib` module) serves on
`:9116/snmp?target=<switch>&module=if_mib` for one switch, from the twin fabric's link state and port counters.

Names, types and labels from the exporter's generator (generator/generator.yml @005ee4ff, module `if_mib`: walk
`IF-MIB::interfaces` and `IF-MIB::ifXTable`, lookups `ifAlias`, `ifDescr`, `ifName` on `ifIndex`) and the MIB
(RFC 2863): `ifAdminStatus` / `ifOperStatus` gauges (1 up, 2 down), `ifHCInOctets` / `ifHCOutOctets` counters
(64-bit octets), each with `ifAlias`, `ifDescr`, `ifIndex`, `ifName`. A real switch numbers its ifIndex its own
way; the twin numbers the ports in the order its profile lists them, from 1. No description is configured on
the twin's ports, so `ifAlias` is empty, as on a switch nobody annotated.

Values: admin is what the operator (or the drill over SSH) set, oper whether the link carries traffic (down with
its own end or its peer's shut, unless the `port-stays-oper-up` defect keeps it up); octets are the fabric's
counters (drills/twin/fabric/traffic.py), which count what the jobs put across the leaves' uplinks.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from drills.twin.exporters.text import RawCounter

__all__ = ["IfMibCollector", "IF_LABELS"]

log = logging.getLogger(__name__)

IF_LABELS = ("ifAlias", "ifDescr", "ifIndex", "ifName")  # the order snmp_exporter's lookups give them
_UP, _DOWN = 1, 2  # IF-MIB ifAdminStatus / ifOperStatus: up(1), down(2)


class IfMibCollector(Collector):
    """One switch's interfaces table. `fabric`: drills.twin.fabric.Fabric; `traffic`: its Traffic (None: 0)."""

    def __init__(self, fabric: Any, traffic: Any | None, switch: str):
        self.fabric, self.traffic, self.switch = fabric, traffic, switch

    def collect(self):
        admin = GaugeMetricFamily("ifAdminStatus", "The desired state of the interface - 1.3.6.1.2.1.2.2.1.7",
                                  labels=IF_LABELS)
        oper = GaugeMetricFamily("ifOperStatus", "The current operational state of the interface - "
                                                 "1.3.6.1.2.1.2.2.1.8", labels=IF_LABELS)
        octets_in = RawCounter("ifHCInOctets", "The total number of octets received on the interface, "
                                                        "including framing characters - 1.3.6.1.2.1.31.1.1.1.6",
                               IF_LABELS)
        octets_out = RawCounter("ifHCOutOctets", "The total number of octets transmitted out of the "
                                                          "interface, including framing characters - "
                                                          "1.3.6.1.2.1.31.1.1.1.10", IF_LABELS)
        for index, state in enumerate(self.fabric.states(self.switch), start=1):
            labels = ["", state.iface, str(index), state.iface]
            admin.add_metric(labels, _UP if state.admin else _DOWN)
            oper.add_metric(labels, _UP if state.oper else _DOWN)
            counters = self.traffic.counters(self.switch, state.iface) if self.traffic is not None else None
            octets_in.add_metric(labels, counters.in_bytes if counters else 0)
            octets_out.add_metric(labels, counters.out_bytes if counters else 0)
        return [admin, oper, octets_in, octets_out]
