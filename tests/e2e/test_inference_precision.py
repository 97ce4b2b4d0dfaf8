"""The inference recovery, measured from the outside (the load's buckets, the cluster clock copy), agrees with the
twin's ground truth to ≤ 1 % of the 5-minute target (issue 19: it was up to 1.41 % at 600×).

At a dilated scale one wall millisecond is `scale` cluster milliseconds, so what the measurement reads must not
add wall latency: the recovery is when the first answered request was sent (not when its answer arrived), the
cluster clock copy is the shortest of several round trips, and with every replica killed the answers the gateway
still gave while the kill propagated do not count as serving again. Both sides are the twin's own timestamps
(truth.json, the audit log) and the record's.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import audit_file, drills, first_applied_write, records

pytestmark = [pytest.mark.slow, pytest.mark.inference]

TARGET_S = 300.0
MAX_ERROR_S = 0.01 * TARGET_S
# The scale: 1 % of the target is 3 cluster seconds, 50 ms of wall at 60×. At 120× it is 25 ms, which a test sharing
# 2 cores with three other test workers once missed by 1.5 ms (the first request answered again was sent that much
# after the twin served); at 600× 5 ms (with two busy loops the same drill was 9.4 s off, 16 ms of wall: 5 ms on the
# kill request, 10.5 ms until the load's next request saw the gateway serve): there the figure is a benchmark's,
# `bench/suite.py --scale 600 -m inference` on a quiet machine (performance is measured in bench/).
# test_drill_inference.py's test_measured_recovery_matches_the_twins_ground_truth holds the same scenario (every
# replica killed) to 1 % with the load's default flush; here the load generator reports late: its workers flush
# their results every 10 wall seconds (10 cluster minutes at 60×, longer than the whole wait), so the recovery is in
# results written after the deadline. A drill that judged the results it had at the deadline said "never recovered"
# for a twin whose truth recovered in 2m22s; it must wait for the load's watermark
# (`drills.load.watermark.read_watermark`) and read the recovery from them.
@pytest.mark.parametrize("scale", ["60"])
def test_recovery_matches_the_twins_truth_at_scale(scale, tmp_path, monkeypatch):
    monkeypatch.setenv("DRILLS_LOAD_BUCKET_FLUSH_S", "10")
    done = drills("run", "-m", "inference", "-k", "all", "--scale", scale, "--no-html", "--reports", str(tmp_path),
                  "--run-id", f"x{scale}")
    (rec,) = records(tmp_path / f"x{scale}")
    state = Path(rec["details"]["twin_state"])
    truth = json.loads((state / "truth.json").read_text())["records"]
    serving = [r for r in truth if r["kind"] == "gateway_serving" and r.get("after_outage")]
    assert serving, f"the twin's gateway never served again in {state}"
    injected = first_applied_write(audit_file(state))["twinTime"]
    truth_s = serving[0]["at"] - injected
    max_error_s = MAX_ERROR_S
    if truth_s > TARGET_S:  # a twin starved of CPU can really be late (at 60× one wall second is a minute):
        # then the drill must say so, as the truth does
        assert rec["verdict"] == "fail" and rec["category"] == "slo_breach", (truth_s, rec["reason"])
        assert rec["recovery_s"] is None or abs(rec["recovery_s"] - truth_s) <= max_error_s, (rec["recovery_s"], truth_s)
        return
    assert done.returncode == 0, done.stdout + done.stderr
    assert abs(rec["recovery_s"] - truth_s) <= max_error_s, (scale, rec["recovery_s"], truth_s)
    recovered = datetime.fromisoformat(rec["phases"]["recovered"].replace("Z", "+00:00")).timestamp()
    assert abs(recovered - serving[0]["at"]) <= max_error_s, (scale, recovered, serving[0]["at"])
