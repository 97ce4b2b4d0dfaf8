"""NCCL's fabric-event warnings read from real logs (tests/data/real/nccl/, values written by hand from the
files), and the twin's workers print the same shapes, read the same way."""

from __future__ import annotations

from pathlib import Path

from drills.measure.logread import read_log
from drills.twin.workloads import loglines as L

DIR = Path(__file__).resolve().parents[1] / "data" / "real" / "nccl"
W = L.Worker("gpu-train-01", 1, "10.128.0.5", "uid-1", gpus=8, nworkers=2)


def _read(name: str):
    return read_log((DIR / name).read_text(encoding="utf-8"))


def test_port_error_async_events_of_eight_processes_are_one_root_cause():
    """`...-48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error` × 8 pids."""
    got = _read("nccl-async-event-port-error.log")
    assert got.framework == "nccl" and got.unclassified == 0
    assert [(e.kind, e.host, e.text) for e in got.errors] == [
        ("nccl_error", "...-48", "NET/IB : Got async event : port error")]
    assert {p.pid for p in got.processes} == {34050, 34052, 34055, 34051, 34054, 34057, 34053, 34056}


def test_async_fatal_event_with_device_and_port():
    (err,) = _read("nccl-2.25-dev-port-async-fatal-event.log").errors
    assert err.kind == "nccl_error" and err.host == "node-0" and "mlx5_1:1 async fatal event on QP" in err.text


def test_log_shipper_stamps_are_peeled_and_the_completion_error_names_its_hca():
    """`2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1219 [0] … NCCL WARN …`."""
    got = _read("nccl-2.21-fatal-event-then-completion.log")
    assert [(e.kind, e.host) for e in got.errors] == [("nccl_error", "h100-28"), ("ib_completion", "h100-28")]
    assert got.errors[1].status == 4 and got.errors[1].vendor_err == 83 and got.devices == ("mlx5_ib0",)


def test_the_twin_prints_the_real_shapes_by_nccl_version():
    old, new = L.async_event(W, "mlx5_0", "port error", "2.18.3"), L.async_event(W, "mlx5_0", "port error", "2.21.5")
    assert old.endswith("transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error")
    assert new.endswith("NCCL WARN NET/IB : mlx5_0:1 Got async event : port error")
    for line in (old, new):
        (err,) = read_log(W.tag + line).errors
        assert err.kind == "nccl_error" and err.host == "gpu-train-01"
    # the link back is no error; retries exhausted and a dead peer are
    assert read_log(W.tag + L.async_event(W, "mlx5_0", "port active", "2.21.5")).errors == ()
    assert [e.kind for e in read_log(W.tag + L.retry_exceeded(W, "10.128.0.6")).errors] == ["ib_completion"]
    assert read_log(W.tag + L.retry_exceeded(W, "10.128.0.6")).errors[0].status == 12
    assert [e.kind for e in read_log(W.tag + L.peer_lost_warn(W, "gpu-train-02")).errors] == ["socket_closed"]
