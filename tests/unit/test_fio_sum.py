"""Several pods' fio reports as one saturation (drills.measure.fio_report.sum_results), on the captured fio
3.33 samples of tests/data/fio: bandwidth, IOPS and bytes add up, runtime is the longest, a percentile the
worst, and a client/server report counts once (its "All clients" total)."""

from pathlib import Path

import pytest

from drills.core.errors import DrillError
from drills.measure.fio_report import parse_fio_output, sum_results

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def sample(name: str):
    return parse_fio_output((DATA / name).read_text())


def test_three_pods_sum_their_bandwidth_bytes_and_iops():
    a, b, c = sample("randrw-2jobs-libaio.json"), sample("randrw-stopped-sigterm.json"), sample("randrw-2jobs-libaio.json")
    total = sum_results([a, b, c])
    assert total.read.bw_bytes_s == a.read.bw_bytes_s + b.read.bw_bytes_s + c.read.bw_bytes_s
    assert total.write.io_bytes == a.write.io_bytes + b.write.io_bytes + c.write.io_bytes
    assert total.read.iops == pytest.approx(a.read.iops + b.read.iops + c.read.iops)
    assert total.runtime_s == pytest.approx(max(a.runtime_s, b.runtime_s))
    assert total.write.clat_p999_s == max(a.write.clat_p999_s, b.write.clat_p999_s)
    assert total.jobs == ("sample-randrw #1", "sample-stopped #2", "sample-randrw #3")


def test_a_report_with_several_entries_counts_each_once():
    two = sample("write-direct-psync-2entries.json")
    total = sum_results([two, two])
    assert total.write.bw_bytes_s == 2 * two.write.bw_bytes_s and len(total.jobs) == 4


def test_a_client_server_report_counts_its_total_once():
    one = {"jobname": "j", "read": {"bw_bytes": 10, "runtime": 1000}, "write": {}}
    total = {"jobname": "All clients", "read": {"bw_bytes": 25, "runtime": 1000}, "write": {}}
    clients = parse_fio_output({"client_stats": [one, one, total]})
    assert sum_results([clients, clients]).read.bw_bytes_s == 50


def test_one_report_is_itself_and_none_is_an_error():
    a = sample("randrw-2jobs-libaio.json")
    assert sum_results([a]) is a
    with pytest.raises(DrillError, match="no fio report"):
        sum_results([])
