"""The storage acceptance judge on public fio JSON (tests/data/real/fio, source on line 1): a healthy run is judged
by its bandwidth; a run whose job hit an I/O error is a no-go whatever it moved (fio stops a job at its first error)."""

from __future__ import annotations

import json
from pathlib import Path

from drills.acceptance.judge import judge_storage
from drills.profile.acceptance import Thresholds

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "fio"


def _real(name: str) -> dict:
    text = (REAL / name).read_text(encoding="utf-8")
    return json.loads(text.split("\n", 1)[1])


def test_a_real_run_is_judged_by_its_bandwidth():
    doc = _real("fio-2.1.4-five-groups-kib.json")  # PerfKitBenchmarker's sample: reads 135.6 MB/s, writes 76.4 MB/s
    ok = judge_storage("gpu-new-01", json.dumps(doc), Thresholds(store_read_mb_s_min=100, store_write_mb_s_min=70))
    slow = judge_storage("gpu-new-01", json.dumps(doc), Thresholds(store_read_mb_s_min=100, store_write_mb_s_min=80))
    assert ok.go and (ok.measured["read_mb_s"], ok.measured["write_mb_s"]) == (135.6, 76.4)
    assert not slow.go and slow.failure == "slow" and "write 76 MB/s, below 80" in slow.reason


def test_a_job_that_hit_an_io_error_is_a_no_go_even_when_it_moved_enough():
    """The broken store: EIO on the checkpoint volume. fio records the job's errno and stops it; the bytes it moved
    before may still clear the thresholds, so the figure alone would PASS a store that fails writes."""
    doc = _real("fio-2.1.4-five-groups-kib.json")
    doc["jobs"][2]["error"] = 5  # what fio writes for the job when a write returns EIO (td->error)
    got = judge_storage("gpu-new-01", json.dumps(doc), Thresholds(store_read_mb_s_min=100, store_write_mb_s_min=70))
    assert not got.go and got.failure == "tool_error"
    assert "job 'random_write_test' ended with error 5 (Input/output error)" in got.reason
    assert got.measured["job_errors"] == [0, 0, 5, 0, 0]


def test_a_real_fio_3_33_run_reads_and_writes_in_bytes_per_second():
    text = (REAL / "fio-3.33-rw-sigint-48s-of-5m.json").read_text(encoding="utf-8").split("\n", 1)[1]
    got = judge_storage("gpu-new-01", text, Thresholds(store_read_mb_s_min=30, store_write_mb_s_min=160))
    assert got.go and (got.measured["read_mb_s"], got.measured["write_mb_s"]) == (31.4, 161.1)
    slow = judge_storage("gpu-new-01", text, Thresholds(store_read_mb_s_min=100, store_write_mb_s_min=160))
    assert not slow.go and slow.failure == "slow" and slow.reason.endswith("read 31 MB/s, below 100")
