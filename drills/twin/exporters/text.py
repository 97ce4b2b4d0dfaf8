"""The Prometheus text format as Go exporters write it, for counters whose real name has no `_total`.

prometheus_client follows OpenMetrics: a counter family is named without `_total` and its samples get the suffix
(`CounterMetricFamily("ifHCOutOctets")` serves `ifHCOutOctets_total`). Exporters built on Go's client_golang
serve a counter under the name they give it: dcgm-exporter's `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`, snmp_exporter's
`ifHCOutOctets` — a rule written against the real exporter reads those names. `RawCounter` keeps the name as
given; `exposition` writes its HELP/TYPE lines under that name too (generate_latest would add `_total` there).

`exposition` writes what prometheus_client's `generate_latest` writes, byte for byte (tests/unit/test_twin_exporters.py
compares them over every exporter's families), without checking each sample's metric and label names against the
legacy grammar again: a managed Prometheus scrapes every exporter of the twin every 0.1–0.25 s of wall time, and
those checks were a third of a twin's CPU in a detection drill. Names are checked (and escaped, as
generate_latest escapes them) once per name; label values are escaped as generate_latest escapes them. A family
generate_latest treats specially (histogram, summary, info, stateset, a sample carrying a timestamp or an
OpenMetrics `_created`/`_gsum`/`_gcount` sample) is written by generate_latest itself.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.utils import floatToGoString

__all__ = ["RawCounter", "exposition"]

_META = re.compile(rb"^# (HELP|TYPE) (\S+)_total( .*)?$")
_PLAIN = {"gauge": "gauge", "counter": "counter", "unknown": "untyped"}  # family type → what TYPE says
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")


class RawCounter(Metric):
    """A counter family whose samples carry exactly `name` (no `_total` added)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]):
        super().__init__(name, documentation, "counter")
        self.raw_name, self.label_names = name, tuple(labels)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        self.add_sample(self.raw_name, dict(zip(self.label_names, values)), value)


def exposition(registry: CollectorRegistry) -> bytes:
    """The text format of `registry` (generate_latest's bytes), each counter's HELP/TYPE under the name its samples
    carry."""
    families = list(registry.collect())  # once: a collector may integrate counters over time when collected
    text = _fast(families)
    if text is None:
        text = generate_latest(_Collected(families))
    return _raw_counter_meta(text)


class _Collected:
    """Families already collected, as generate_latest reads a registry."""

    def __init__(self, families: list[Metric]):
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _fast(families: list[Metric]) -> bytes | None:
    """generate_latest's text for plain gauge/counter/untyped families; None when one is not plain."""
    out: list[str] = []
    for metric in families:
        mtype = _PLAIN.get(metric.type)
        if mtype is None:
            return None
        mname = metric.name + "_total" if metric.type == "counter" else metric.name
        oms = tuple(metric.name + s for s in _OM_SUFFIXES)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        ename = _metric_name(mname)
        out.append(f"# HELP {ename} {doc}\n# TYPE {ename} {mtype}\n")
        for s in metric.samples:
            if s.timestamp is not None or s.name in oms:
                return None
            value = floatToGoString(s.value)
            if s.labels:
                out.append(f"{_metric_name(s.name)}{{{_labels(tuple(s.labels.items()))}}} {value}\n")
            else:
                out.append(f"{_metric_name(s.name)} {value}\n")
    return "".join(out).encode("utf-8")


@lru_cache(maxsize=4096)
def _metric_name(name: str) -> str:
    return escape_metric_name(name)


@lru_cache(maxsize=4096)
def _label_name(name: str) -> str:
    return escape_label_name(name)


_LABELS: dict[tuple[tuple[str, str], ...], str] = {}  # a series' labels as written: a scrape repeats the last one's


def _labels(items: tuple[tuple[str, str], ...]) -> str:
    text = _LABELS.get(items)
    if text is None:
        if len(_LABELS) >= 65536:
            _LABELS.clear()
        text = _LABELS[items] = ",".join([f'{_label_name(k)}="{_label_value(v)}"' for k, v in sorted(items)])
    return text


def _label_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
    return value


def _raw_counter_meta(text: bytes) -> bytes:
    """A `# HELP/TYPE X_total` line whose family's first sample is named `X` (a RawCounter) names `X`."""
    lines = text.split(b"\n")
    following = b""  # the first sample line after the current one
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.startswith(b"#"):
            following = line
            continue
        meta = _META.match(line)
        if meta is not None:
            base = meta.group(2)
            if following.startswith(base + b"{") or following.startswith(base + b" "):
                lines[i] = b"# " + meta.group(1) + b" " + base + (meta.group(3) or b"")
    return b"\n".join(lines)
