"""The Prometheus text format as Go exporters write it, for counters whose real name has no `_total`.

prometheus_client follows OpenMetrics: a counter family is named without `_total` and its samples get the suffix
(`CounterMetricFamily("ifHCOutOctets")` serves `ifHCOutOctets_total`). Exporters built on Go's client_golang
serve a counter under the name they give it: dcgm-exporter's `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`, snmp_exporter's
`ifHCOutOctets` — a rule written against the real exporter reads those names. `RawCounter` keeps the name as
given; `exposition` writes its HELP/TYPE lines under that name too (generate_latest would add `_total` there).
"""

from __future__ import annotations

import re
from typing import Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

__all__ = ["RawCounter", "exposition"]

_META = re.compile(rb"^# (HELP|TYPE) (\S+)_total( .*)?$")


class RawCounter(Metric):
    """A counter family whose samples carry exactly `name` (no `_total` added)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]):
        super().__init__(name, documentation, "counter")
        self.raw_name, self.label_names = name, tuple(labels)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        self.add_sample(self.raw_name, dict(zip(self.label_names, values)), value)


def exposition(registry: CollectorRegistry) -> bytes:
    """generate_latest, with each counter's HELP/TYPE under the name its samples carry."""
    lines = generate_latest(registry).split(b"\n")
    out = []
    for i, line in enumerate(lines):
        meta = _META.match(line)
        if meta is not None:
            base = meta.group(2)
            sample = next((s for s in lines[i + 1:] if not s.startswith(b"#")), b"")
            if sample.startswith(base + b"{") or sample.startswith(base + b" "):
                line = b"# " + meta.group(1) + b" " + base + (meta.group(3) or b"")
        out.append(line)
    return b"\n".join(out)
