"""Measured recovery vs the twin's ground truth, per record of a run (the definitions of the e2e truth tests:
tests/e2e/test_drill_node_loss.py, test_drill_network.py, test_drill_inference.py).

- gpu-node-loss: recovered = the twin's first step after resume; injected = the drill's first write the server
  accepted (audit log; a refused one — a taint patch on a node that moved on, 409/422 — changed nothing).
  Not gpu-unhealthy: its recovery is timed from the DCGM field injection (an exec the twin neither audits nor
  records), and the drill's first audited write is its own remediation cordon, after the detection chain.
- switch-uplink: injected = the fabric's link-down record; recovered = the twin's throughput_restored.
- inference-pod-kill (every replica killed): recovered = the gateway routable again after the outage;
  injected = the drill's first accepted DELETE. With a survivor the endpoint never stopped serving: no truth to compare.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from tests.e2e.drill_helpers import audit_file, first_applied_write

__all__ = ["truth_recovery_s", "errors"]


def truth_recovery_s(rec: dict) -> float | None:
    """The twin's own recovery time for this record (cluster seconds), None when it has none to compare."""
    state = Path(rec["details"].get("twin_state") or "")
    try:
        truth = json.loads((state / "truth.json").read_text())["records"]
    except (OSError, ValueError, KeyError):
        return None
    if rec["drill"] == "gpu-node-loss":
        faults = rec["details"].get("faults") or [{}]
        if faults[0].get("kind") == "gpu-xid":  # timed from the DCGM injection, of which the twin keeps no truth
            return None
        first = [r for r in truth if r["kind"] == "first_step_after_resume"]
        write = first_applied_write(audit_file(state))
        injected = write["twinTime"] if write else (_ts(faults[0]["twin_at"]) if faults[0].get("twin_at") else None)
        return first[0]["at"] - injected if first and injected is not None else None
    if rec["drill"] == "switch-uplink":
        fault = next((r for r in truth if r["kind"] == "fabric_fault"), None)
        restored = next((r for r in truth if r["kind"] == "throughput_restored"), None)
        return restored["at"] - fault["at"] if fault and restored else None
    if rec["drill"] == "inference-pod-kill":
        serving = [r for r in truth if r["kind"] == "gateway_serving" and r.get("after_outage")]
        write = first_applied_write(audit_file(state))
        return serving[0]["at"] - write["twinTime"] if serving and write else None
    return None


def errors(records: list[dict]) -> list[tuple[dict, float, float]]:
    """(record, truth_s, |measured − truth| as a fraction of the target) for every record with a truth."""
    out = []
    for rec in records:
        truth = truth_recovery_s(rec)
        if truth is not None and rec.get("recovery_s") is not None and rec.get("target_s"):
            out.append((rec, truth, abs(rec["recovery_s"] - truth) / rec["target_s"]))
    return out


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
