"""The inference recovery, measured from the outside (the load's buckets, the cluster clock copy), agrees with the
twin's ground truth to ≤ 1 % of the 5-minute target at 60× and at 600× (issue 19: it was up to 1.41 % at 600×).

At 600× one wall millisecond is 0.6 cluster seconds, so what the measurement reads must not add wall latency:
the recovery is when the first answered request was sent (not when its answer arrived), the cluster clock copy
is the shortest of several round trips, and with every replica killed the answers the gateway still gave while
the kill propagated do not count as serving again. Nothing here races the wall clock: both sides are the
twin's own timestamps (truth.json, the audit log) and the record's.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import audit_file, drills, first_applied_write, records

pytestmark = [pytest.mark.slow, pytest.mark.inference]

TARGET_S = 300.0
# 1 % of the target. At 600× that is 5 ms of wall time, which a test sharing 2 cores with the rest of the suite
# cannot promise: there the test holds 2 % (a gross error still fails it) and the 1 % acceptance figure comes from
# `bench/suite.py --scale 600 -m inference` on a quiet machine (performance is measured in bench/, issue 19).
MAX_ERROR = {"60": 0.01 * TARGET_S, "600": 0.02 * TARGET_S}


# 60× (the default scale) is test_drill_inference.py's test_measured_recovery_matches_the_twins_ground_truth (the
# same scenario, every replica killed, held to 1 %); both scales, repeated, are bench/suite.py's figures.
# The load generator here reports late: its workers flush their results every 2 wall seconds (20 cluster minutes
# at 600×, longer than the whole wait), so the recovery is in results written after the deadline. A drill that
# judged the results it had at the deadline said "never recovered" for a twin whose truth recovered in 2m22s; it
# must wait for the load's watermark (`drills.load.watermark.read_watermark`) and read the recovery from them.
@pytest.mark.parametrize("scale", ["600"])
def test_recovery_matches_the_twins_truth_at_scale(scale, tmp_path, monkeypatch):
    monkeypatch.setenv("DRILLS_LOAD_BUCKET_FLUSH_S", "2")
    done = drills("run", "-m", "inference", "-k", "all", "--scale", scale, "--no-html", "--reports", str(tmp_path),
                  "--run-id", f"x{scale}")
    (rec,) = records(tmp_path / f"x{scale}")
    state = Path(rec["details"]["twin_state"])
    truth = json.loads((state / "truth.json").read_text())["records"]
    serving = [r for r in truth if r["kind"] == "gateway_serving" and r.get("after_outage")]
    assert serving, f"the twin's gateway never served again in {state}"
    injected = first_applied_write(audit_file(state))["twinTime"]
    truth_s = serving[0]["at"] - injected
    max_error_s = MAX_ERROR[scale]
    if truth_s > TARGET_S:  # a twin starved of CPU at 600× can really be late (one wall second is 10 minutes):
        # then the drill must say so, as the truth does
        assert rec["verdict"] == "fail" and rec["category"] == "slo_breach", (truth_s, rec["reason"])
        assert rec["recovery_s"] is None or abs(rec["recovery_s"] - truth_s) <= max_error_s, (rec["recovery_s"], truth_s)
        return
    assert done.returncode == 0, done.stdout + done.stderr
    assert abs(rec["recovery_s"] - truth_s) <= max_error_s, (scale, rec["recovery_s"], truth_s)
    recovered = datetime.fromisoformat(rec["phases"]["recovered"].replace("Z", "+00:00")).timestamp()
    assert abs(recovered - serving[0]["at"]) <= max_error_s, (scale, recovered, serving[0]["at"])
