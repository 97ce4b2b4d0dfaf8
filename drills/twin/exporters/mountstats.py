"""node_exporter's `mountstats` collector for the twin's checkpoint store: what an NFS client of the store reports
about its mount, so a rule watches the store the way a site watches its shared file system.

Source: prometheus/node_exporter collector/mountstats_linux.go@014ea4e5 (`--collector.mountstats`, read from
/proc/self/mountstats): the same names, help texts and labels — `export` (the mount's device, `server:/path`),
`protocol`, `mountaddr` (the server's address) and, per RPC, `operation` (`READ`, `WRITE`, …):
node_mountstats_nfs_operations_requests_total, …_queue_time_seconds_total ("queued for transmission"),
…_response_time_seconds_total ("to get a reply back after … transmitted"), …_request_time_seconds_total ("from
when a request was enqueued to when it was completely handled"), node_mountstats_nfs_total_read_bytes_total,
…_total_write_bytes_total, …_age_seconds_total.

Truth: the twin's store is one mount on the twin's host, through the bandwidth model (drills/twin/workloads/
storefs.py); every read or write that reaches it is one RPC of up to 1 MiB (the mount's max_read/max_write, NFS's
common rsize/wsize). Its request time is the wall time the caller waited, its response time what the bytes take at
the client's own link rate, its queue time the rest: the time it waited because the store was busy with others.
The store's clients (fio, the checkpoint probe) run on the system pool, the load generators' hosts, so that pool's
node_exporter reports the mount. Times are wall seconds, as the tools on the store measure them (storefs: the
store's bandwidth is real time; a rate of seconds per second — RPCs in flight — means the same at any clock).
A twin without a modelled store has no such mount: the collector reports nothing, as node_exporter does.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from drills.twin.exporters.text import RawCounter

__all__ = ["MountStatsCollector", "NODE_EXPORTER_PORT", "STORE_SERVER"]

log = logging.getLogger(__name__)

NODE_EXPORTER_PORT = 9100  # node_exporter's --web.listen-address default
STORE_SERVER = ("ckpt-store.storage.twin", "10.254.0.10")  # the twin's store server: name in the export, address
_OPS = ("READ", "WRITE")  # the operations the store's clients issue (metadata RPCs are not modelled)
_LABELS = ("export", "protocol", "mountaddr")
_P = "node_mountstats_nfs_"


class MountStatsCollector:
    """One scrape of the store's mount: `totals()` → {op: OpStats} (None: no modelled store, nothing exported)."""

    def __init__(self, store_dir: str, totals: Callable[[], dict | None], age_s: Callable[[], float]):
        self.export = f"{STORE_SERVER[0]}:/{store_dir.strip('/')}"
        self.totals, self.age_s = totals, age_s

    def collect(self) -> Iterator[Metric]:
        totals = self.totals()
        if totals is None:
            return
        base = [self.export, "tcp", STORE_SERVER[1]]
        info = GaugeMetricFamily(f"{_P}mountpoint_info", "Info metric for an NFS mountpoint.",
                                 labels=[*_LABELS, "mountpoint"])
        info.add_metric([*base, "/mnt/ckpt"], 1)
        yield info
        age = RawCounter(f"{_P}age_seconds_total", "The age of the NFS mount in seconds.", _LABELS)
        age.add_metric(base, round(self.age_s(), 3))
        yield age
        for name, op, help_ in (
                ("total_read_bytes_total", "READ", "Number of bytes read from the NFS server, in total."),
                ("total_write_bytes_total", "WRITE", "Number of bytes written to the NFS server, in total.")):
            family = RawCounter(_P + name, help_, _LABELS)
            family.add_metric(base, float(totals[op].bytes) if op in totals else 0.0)
            yield family
        per_op = [
            ("operations_requests_total", "Number of requests performed for a given operation.",
             lambda s: float(s.requests)),
            ("operations_queue_time_seconds_total", "Duration all requests spent queued for transmission for a "
             "given operation before they were sent, in seconds.", lambda s: s.queue_s),
            ("operations_response_time_seconds_total", "Duration all requests took to get a reply back after a "
             "request for a given operation was transmitted, in seconds.", lambda s: s.response_s),
            ("operations_request_time_seconds_total", "Duration all requests took from when a request was enqueued "
             "to when it was completely handled for a given operation, in seconds.", lambda s: s.request_s),
        ]
        for name, help_, value in per_op:
            family = RawCounter(_P + name, help_, [*_LABELS, "operation"])
            for op in _OPS:
                stats = totals.get(op)
                family.add_metric([*base, op], round(value(stats), 6) if stats is not None else 0.0)
            yield family
