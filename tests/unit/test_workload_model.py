"""Pure parts of the twin's workloads: progress integration, network phases, log lines the drills
parse, the checkpoint store and the ground-truth records."""

from __future__ import annotations

import pytest

from drills.core.clock import DilatedClock
from drills.measure.logread import read_log
from drills.twin.workloads import loglines as L
from drills.twin.workloads.progress import LeafView, Progress, StepFilter, log_every, net_phase
from drills.twin.workloads.store import CheckpointStore
from drills.twin.workloads.truth import Truth

W = L.Worker("gpu-train-01", 0, "10.128.0.5", "uid-1")


def test_progress_reports_wanted_steps_with_their_crossing_times():
    prog = Progress(step=6150.0, t=0.0, segments=[(0.0, 1.0)])
    crossed = prog.advance(25.0, StepFilter(every=10, checkpoint_every=2000, forced={6151}))
    assert crossed == [(6151, 1.0), (6160, 10.0), (6170, 20.0)]
    assert prog.step == pytest.approx(6175.0)


def test_progress_follows_rate_changes_and_stalls():
    prog = Progress(step=0.0, t=0.0, segments=[(0.0, 0.0), (10.0, 1.0), (20.0, 0.5), (40.0, 0.0)])
    crossed = prog.advance(100.0, StepFilter(every=5, checkpoint_every=1000))
    assert crossed == [(5, 15.0), (10, 20.0), (15, 30.0), (20, 40.0)]
    assert prog.step == pytest.approx(20.0)
    assert Progress(0.0, 0.0, [(0.0, 0.0)]).time_to(1) is None
    assert Progress(0.0, 0.0, [(0.0, 0.0), (10.0, 2.0)]).time_to(4) == pytest.approx(12.0)


def test_step_filter_merges_cadence_checkpoints_and_forced_steps():
    f = StepFilter(every=10, checkpoint_every=2000, forced={6001})
    assert f.between(5995, 6012) == [6000, 6001, 6010]
    assert f.next_after(6000.4) == 6001 and f.next_after(6001) == 6010
    assert log_every(1.0) == 10 and log_every(6.0) == 10 and log_every(0.25) == 40


@pytest.mark.parametrize("t, name, factor", [
    (99.0, "healthy", 1.0), (105.0, "converging", 0.3), (120.0, "rerouted", 0.6), (300.0, "rebalanced", 0.95),
])
def test_net_phase_follows_convergence_then_rebalance(t, name, factor):
    views = [LeafView("leaf-1", 1, 2, 100.0), LeafView("leaf-2", 2, 2, 0.0)] if t >= 100 else \
        [LeafView("leaf-1", 2, 2, 0.0)]
    phase = net_phase(views, t, convergence_s=15, rebalance_s=120, degraded=0.6, rebalanced=0.95)
    assert (phase.name, phase.factor) == (name, factor)
    if name == "rerouted":
        assert (phase.since, phase.ends, phase.leaf) == (115.0, 220.0, "leaf-1")


def test_isolated_leaf_stalls_the_job():
    phase = net_phase([LeafView("leaf-1", 0, 1, 50.0)], 1000.0, 15, 120, 0.6, 0.95)
    assert (phase.name, phase.factor, phase.since) == ("isolated", 0.0, 50.0)


def test_nccl_lines_give_the_transport_per_rank_and_a_socket_fallback():
    w = L.Worker("gpu-train-01", 1, "10.128.0.5", "uid-1", gpus=8, nworkers=2)
    init = read_log("\n".join(w.tag + x for x in L.nccl_init(w, "IB", ["mlx5_0", "mlx5_1"], "eth0", 16, "2.21.5")))
    assert init.transports == {"gpu-train-01": "RoCE"} and init.devices == ("mlx5_0:1/RoCE", "mlx5_1:1/RoCE")
    assert {p.rank for p in init.processes} == {8}
    fallback = L.socket_fallback(w, "10.128.0.6", "eth0", 16, "2.21.5")
    assert sum("via NET/Socket/0" in x for x in fallback) == 4
    read = read_log("\n".join(w.tag + x for x in L.nccl_init(w, "IB", ["mlx5_0"], "eth0", 16, "2.21.5") + fallback))
    assert read.socket_fallback and [e.kind for e in read.errors] == ["ib_completion"]


def test_only_a_real_nccl_timeout_reads_as_one():
    fabric = [L.async_event(W, "mlx5_0", "port error", "2.21.5"), L.async_event(W, "mlx5_0", "port active", "2.21.5"),
              L.retry_exceeded(W, "10.128.0.6"), L.peer_lost_warn(W, "gpu-train-02")]
    events = [e for line in fabric for e in _reader_events(line) if e.kind == "nccl_warn"]
    assert len(events) == 4 and not any(e.is_timeout for e in events)
    watchdog = [e for line in L.watchdog_timeout(W, 7, 600, 600.01) for e in _reader_events(line) if e.kind == "nccl_warn"]
    assert watchdog and all(e.is_timeout for e in watchdog)


def _reader_events(line: str):
    from drills.measure.logread import LogReader

    return LogReader().feed(line)


@pytest.mark.parametrize("layout", ["megatron", "deepspeed", "hf-trainer", "lightning", "twin"])
def test_checkpoint_store_writes_each_frameworks_layout_and_the_drills_reader_agrees(tmp_path, layout):
    """A save begun and never completed is no checkpoint, for the twin's resume and for the drills' store reader."""
    import os

    from drills.measure.ckpt_store import Entry, read_store

    store = CheckpointStore(tmp_path / "store")
    assert store.latest("ns", "job", layout) is None
    store.save("ns", "job", 6000, 1.0, 38.4, 96, "/ckpt/job", layout=layout)
    store.begin("ns", "job", 7500, layout=layout)  # cut off: shards, no completion evidence
    assert store.latest("ns", "job", layout) == 6000
    root = store.job_dir("ns", "job")

    def reading():
        entries = []
        for dirpath, dirs, files in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            depth = 0 if rel == "." else rel.count("/") + 1
            if depth >= 2:
                continue
            entries += [Entry(os.path.normpath(os.path.join(rel, d)), True) for d in dirs]
            entries += [Entry(os.path.normpath(os.path.join(rel, f)), False) for f in files]
        contents = {e.path: (root / e.path).read_text() for e in entries if e.path in ("latest", "latest_checkpointed_iteration.txt")}
        return read_store(entries, contents)

    assert reading().latest_complete.step == 6000
    store.save("ns", "job", 7500, 2.0, 38.4, 96, "/ckpt/job", layout=layout)
    assert store.latest("ns", "job", layout) == 7500 and reading().latest_complete.step == 7500
    store.forget("ns", "job", 7500, layout=layout)  # defect lost-last-save
    assert store.latest("ns", "job", layout) == 6000 and reading().latest_complete.step == 6000


def test_truth_records_are_ordered_and_filterable():
    truth = Truth(DilatedClock(scale=60, epoch=1_000_000.0))
    truth.record("training", "ns/job", "fault", at=10.0, step_at_fault=6200)
    truth.record("training", "ns/job", "first_step_after_resume", at=20.5, step=6001)
    truth.record("inference", "ns/dep", "all_ready", at=30.0)
    truth.update("training", "ns/job", step=6001)
    snap = truth.snapshot()
    assert [r["seq"] for r in snap["records"]] == [1, 2, 3]
    assert snap["training"]["ns/job"]["last"]["fault"]["step_at_fault"] == 6200
    assert snap["training"]["ns/job"]["step"] == 6001
    assert [r["kind"] for r in truth.records(subject="ns/job", since=15.0)] == ["first_step_after_resume"]
    assert truth.records(kind="all_ready")[0]["atIso"] == "1970-01-01T00:00:30.000Z"
