"""The fio wrapper's pure parts: job spec → argv/jobfile, and the parser on real fio 3.33 JSON.

The samples in tests/data/fio were captured on the development machine (1–2 s runs, small files).
"""

from pathlib import Path

import pytest

from drills.core.errors import DrillError, InvalidProfile
from drills.faults.storage.fio import FioJob, fio_argv, parse_fio_output

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_group_reported_randrw_sample_is_parsed_per_direction_in_seconds():
    result = parse_fio_output(sample("randrw-2jobs-libaio.json"))
    assert result.fio_version == "fio-3.33"
    assert result.jobs == ("sample-randrw",)
    assert result.job_errors == (0,)
    assert result.read.io_bytes == 101806080
    assert result.read.bw_bytes_s == 101704375
    assert result.read.iops == pytest.approx(24830.16983)
    assert result.read.clat_p50_s == pytest.approx(98816e-9)
    assert result.read.clat_p99_s == pytest.approx(399360e-9)
    assert result.read.clat_p999_s == pytest.approx(6914048e-9)
    assert result.read.clat_mean_s == pytest.approx(117216.246993e-9)
    assert result.write.bw_bytes_s == 102526849
    assert result.write.clat_p99_s == pytest.approx(411648e-9)
    assert result.total_bw_bytes_s == 101704375 + 102526849
    # job_runtime is 2000 ms (two grouped jobs summed); elapsed is the direction runtime
    assert result.runtime_s == pytest.approx(1.001)
    assert [(d.name, d.util_pct) for d in result.disk_util] == [("vda", pytest.approx(71.487603))]


def test_ungrouped_jobs_are_summed_and_take_the_worst_percentile():
    result = parse_fio_output(sample("write-direct-psync-2entries.json"))
    assert result.jobs == ("sample-write", "sample-write")
    assert result.write.io_bytes == 2 * 16777216
    assert result.write.bw_bytes_s == 2 * 1525201454
    assert result.write.clat_p99_s == pytest.approx(839680e-9)  # 839680 vs 823296: the worse one
    assert result.write.clat_mean_s == pytest.approx((657344.375 + 642528.0) / 2 * 1e-9)
    # nothing was read: no latency rather than a fake zero
    assert result.read.io_bytes == 0
    assert result.read.clat_p99_s is None and result.read.clat_mean_s is None


def test_a_run_stopped_by_sigterm_still_parses_past_fios_notice():
    text = sample("randrw-stopped-sigterm.json")
    assert text.lstrip().startswith("fio: terminating on signal 15")
    result = parse_fio_output(text)
    assert result.read.bw_bytes_s == 904418164
    assert result.write.clat_p999_s == pytest.approx(1712128e-9)
    assert result.runtime_s == pytest.approx(1.227)


def test_client_server_output_reads_client_stats():
    text = sample("client-randread.json")
    assert text.startswith("<vm> sample-client")  # the server's text comes first
    result = parse_fio_output(text)
    assert result.read.bw_bytes_s == 79477130
    assert result.read.clat_p99_s == pytest.approx(82432e-9)
    assert result.write.bw_bytes_s == 0


def test_all_clients_aggregate_wins_over_per_client_entries():
    one = {"jobname": "j", "read": {"bw_bytes": 10, "runtime": 1000}, "write": {}}
    total = {"jobname": "All clients", "read": {"bw_bytes": 25, "runtime": 1000}, "write": {}}
    result = parse_fio_output({"client_stats": [one, one, total]})
    assert result.read.bw_bytes_s == 25
    assert result.jobs == ("All clients",)


def test_summary_leaves_the_raw_json_out_but_the_result_keeps_it():
    result = parse_fio_output(sample("randrw-2jobs-libaio.json"))
    assert "raw" not in result.summary()
    assert result.summary()["read"]["bw_bytes_s"] == 101704375
    assert result.raw["jobs"][0]["jobname"] == "sample-randrw"


@pytest.mark.parametrize("text, message", [
    ("", "not JSON"),
    ("fio: something broke\n", "something broke"),
    ('{"jobs": [', "not valid JSON"),
    ('{"jobs": []}', "no job results"),
])
def test_unusable_reports_are_one_clear_line(text, message):
    with pytest.raises(DrillError, match=message):
        parse_fio_output(text)


def test_job_argv_and_jobfile_carry_the_same_options():
    job = FioJob(name="sat", directory="/store", rw="randrw", bs="1m", size="64m", numjobs=4,
                 iodepth=16, ioengine="libaio", direct=True, runtime=2.5, time_based=True, rwmixread=70)
    argv = job.to_argv()
    assert argv[0] == "--name=sat"
    for opt in ("--rw=randrw", "--bs=1m", "--size=64m", "--numjobs=4", "--iodepth=16", "--ioengine=libaio",
                "--direct=1", "--directory=/store", "--rwmixread=70", "--runtime=2500ms", "--time_based",
                "--group_reporting", "--thread"):
        assert opt in argv
    jobfile = job.to_jobfile().splitlines()
    assert jobfile[0] == "[sat]"
    assert sorted("--" + line for line in jobfile[1:]) == sorted(argv[1:])


def test_rwmixread_only_for_mixed_modes_and_argv_puts_output_first():
    job = FioJob(name="r", directory="/d", rw="read", ioengine="psync")
    assert not any(a.startswith("--rwmixread") for a in job.to_argv())
    argv = fio_argv([job, FioJob(name="w", directory="/d", rw="write", ioengine="psync")], "/o/fio.json")
    assert argv[:3] == ["fio", "--output-format=json", "--output=/o/fio.json"]
    assert argv.index("--name=r") < argv.index("--name=w")


@pytest.mark.parametrize("kwargs, message", [
    ({"rw": "scramble"}, "rw 'scramble'"),
    ({"bs": "big"}, "bs 'big'"),
    ({"numjobs": 0}, "numjobs"),
    ({"rwmixread": 120}, "rwmixread"),
    ({"time_based": True}, "time_based needs a runtime"),
    ({"name": "two words"}, "name"),
])
def test_invalid_jobs_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(InvalidProfile, match=message):
        FioJob(**{"name": "j", "directory": "/d", **kwargs})


# -- public fio JSON of other versions (tests/data/real/fio, source on line 1) -------------------------
REAL = Path(__file__).resolve().parent.parent / "data" / "real" / "fio"


def real(name: str) -> str:
    text = (REAL / name).read_text()
    assert text.startswith("# source: "), f"{name}: first line must name its source"
    return text.split("\n", 1)[1]


def test_fio_3_1_has_no_bw_bytes_key_its_bw_is_kib_per_second():
    result = parse_fio_output(real("fio-3.1-randread-no-bw-bytes.json"))
    assert result.fio_version == "fio-3.1" and result.jobs == ("random-read",) and result.job_errors == (0,)
    assert result.read.io_bytes == 1625501696
    assert result.read.bw_bytes_s == 26456 * 1024  # "bw" : 26456 (KiB/s); bw_bytes came with fio 3.2
    assert result.read.iops == pytest.approx(6614.073099)
    assert result.runtime_s == pytest.approx(60.001)
    # clat_ns without "N" (fio < 3.18): one entry, its own mean and percentiles
    assert result.read.clat_mean_s == pytest.approx(135557.025488e-9)
    assert result.read.clat_p50_s == pytest.approx(134144e-9)
    assert result.read.clat_p99_s == pytest.approx(142336e-9)
    assert result.read.clat_p999_s == pytest.approx(464896e-9)
    assert result.write.io_bytes == 0 and result.write.clat_p99_s is None
    assert [(d.name, d.util_pct) for d in result.disk_util] == [("sdb", pytest.approx(86.082113))]


def test_fio_2_1_4_reports_kib_and_microseconds():
    # fio < 2.21 printed io_bytes in KiB (no io_kbytes key), bw in KiB/s, and `clat` in µs (before 2.99)
    result = parse_fio_output(real("fio-2.1.4-five-groups-kib.json"))
    assert result.fio_version == "fio-2.1.4"
    assert result.jobs == ("sequential_write", "sequential_read", "random_write_test", "random_read_test",
                           "random_read_test_parallel")
    assert result.job_errors == (0, 0, 0, 0, 0)
    assert result.write.io_bytes == (361984 + 36244) * 1024
    assert result.read.io_bytes == (361984 + 36244 + 36244) * 1024
    assert result.write.bw_bytes_s == (68118 + 6443) * 1024
    assert result.write.clat_p99_s == pytest.approx(823296e-6)  # sequential_write's, the worst
    assert result.read.clat_p99_s == pytest.approx(473088e-6)
    assert result.read.clat_p999_s == pytest.approx(528384e-6)
    assert result.write.clat_mean_s is None  # several entries and no sample counts: no mean rather than a guess
    assert result.runtime_s == pytest.approx(28.540)
    assert [(d.name, d.util_pct) for d in result.disk_util] == [("sdb", pytest.approx(97.54))]


def test_fio_3_33_stopped_by_sigint_after_48_s_of_a_5_minute_run():
    text = real("fio-3.33-rw-sigint-48s-of-5m.json")
    assert "fio: terminating on signal 2" in text.split("{", 1)[0]
    result = parse_fio_output(text)
    assert result.fio_version == "fio-3.33" and result.jobs == ("sequential_read",) and result.job_errors == (0,)
    assert (result.read.io_bytes, result.read.bw_bytes_s) == (1511751680, 31383676)
    assert (result.write.io_bytes, result.write.bw_bytes_s) == (7761248256, 161128721)
    assert result.read.iops == pytest.approx(7662.030309)
    assert result.runtime_s == pytest.approx(48.170)
    assert result.read.clat_mean_s == pytest.approx(7881155.058386e-9)
    assert result.read.clat_p50_s == pytest.approx(6258688e-9)
    assert result.read.clat_p99_s == pytest.approx(35913728e-9)
    assert result.read.clat_p999_s == pytest.approx(91750400e-9)
    assert result.write.clat_p99_s == pytest.approx(6848512e-9)
    assert result.disk_util == ()  # no disk_util in this report
