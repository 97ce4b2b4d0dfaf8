"""The load reaper (`drills revert` for a load a SIGKILLed run left behind) on real stand-in processes:
argv names locust and the run's load directory, like the real ones."""

from __future__ import annotations

import subprocess
import sys

from drills.faults import load as reaper


def test_reaper_stops_a_leftover_load_found_by_its_directory_and_spares_others(tmp_path):
    mine = tmp_path / "load" / "1"
    other = tmp_path / "load" / "2"
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "locust", "--bucket-file"]
    procs = [subprocess.Popen([*argv, str(d / "buckets.jsonl")], start_new_session=True) for d in (mine, other)]
    try:
        recorded = [{"name": "master", "pid": procs[0].pid, "pgid": procs[0].pid,
                     "start": reaper.start_time(procs[0].pid)}]
        assert set(reaper.leftovers(str(mine), recorded)) == {procs[0].pid}
        assert reaper.stop(str(mine), recorded) == [procs[0].pid]
        assert procs[0].wait(timeout=10) is not None and procs[1].poll() is None
        assert reaper.stop(str(mine), recorded) == []  # idempotent: nothing left, a reused pid never matches
    finally:
        for p in procs:
            p.kill()
            p.wait()
