"""The checkpoint probe against real files: it saves, reads back, verifies, cleans up, and a corrupted or
lost shard is reported (not raised)."""

import shutil
from pathlib import Path

import pytest

from drills.measure.checkpoint_io import MANIFEST, probe_checkpoint, shard_name
from drills.core.errors import CheckFailed
from drills.faults.storage.saturation import SaturationSpec, start_local, stop_local


def flip_a_byte(path: Path, offset: int = 100) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_an_intact_checkpoint_is_measured_and_removed(tmp_path):
    result = probe_checkpoint(tmp_path, total_bytes=4 << 20, shards=4)
    assert result.intact and result.mismatched == ()
    assert (result.total_bytes, result.shards, result.fsync, result.cache_dropped) == (4 << 20, 4, True, True)
    assert result.write_s > 0 and result.read_s > 0
    assert result.write_bw_bytes_s == pytest.approx((4 << 20) / result.write_s)
    assert result.read_bw_bytes_s == pytest.approx((4 << 20) / result.read_s)
    assert list(tmp_path.iterdir()) == []
    assert result.to_dict()["mismatched"] == ()


def test_shards_are_checkpoint_shaped_and_the_last_takes_the_remainder(tmp_path):
    seen = {}

    def look(paths):
        seen.update({p.name: p.stat().st_size for p in paths})
        seen["index"] = (paths[0].parent / MANIFEST).exists()

    result = probe_checkpoint(tmp_path, total_bytes=1_000_003, shards=3, tamper=look)
    assert result.intact
    assert seen == {"shard-00000-of-00003.bin": 333_334, "shard-00001-of-00003.bin": 333_334,
                    "shard-00002-of-00003.bin": 333_335, "index": True}
    assert shard_name(11, 12) == "shard-00011-of-00012.bin"


def test_a_corrupted_shard_is_reported_not_raised(tmp_path):
    result = probe_checkpoint(tmp_path, total_bytes=1 << 20, shards=4, tamper=lambda paths: flip_a_byte(paths[1]))
    assert result.intact is False
    assert result.mismatched == ("shard-00001-of-00004.bin",)
    assert list(tmp_path.iterdir()) == []


def test_a_lost_shard_and_a_damaged_index_are_reported(tmp_path):
    def lose(paths):
        paths[0].unlink()
        (paths[0].parent / MANIFEST).write_text("{")

    result = probe_checkpoint(tmp_path, total_bytes=1 << 20, shards=2, tamper=lose)
    assert result.intact is False
    assert result.mismatched == (MANIFEST, "shard-00000-of-00002.bin")


def test_without_fsync_the_read_back_may_come_from_memory(tmp_path):
    result = probe_checkpoint(tmp_path, total_bytes=1 << 20, shards=2, fsync=False)
    assert result.intact and result.cache_dropped is False


def test_an_unwritable_directory_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(CheckFailed, match=r"^checkpoint probe cannot write under .*a-file/ckpt: Not a directory$"):
        probe_checkpoint(tmp_path / "a-file" / "ckpt", total_bytes=1024, shards=1)


def test_impossible_shapes_are_refused(tmp_path):
    with pytest.raises(CheckFailed, match="shards ≥ 1"):
        probe_checkpoint(tmp_path, total_bytes=2, shards=3)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make bootstraps it)")
def test_the_probe_holds_while_fio_saturates_the_same_store(tmp_path):
    record = start_local(SaturationSpec(directory=str(tmp_path), size="16m", numjobs=2, iodepth=8, bs="256k",
                                   max_seconds=60))
    try:
        result = probe_checkpoint(tmp_path, total_bytes=8 << 20, shards=4)
    finally:
        stop_local(record)
    assert result.intact
    assert list(tmp_path.iterdir()) == []
