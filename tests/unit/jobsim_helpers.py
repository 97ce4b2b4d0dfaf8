"""A twin training job (`JobSim`) under way on two workers, for the unit tests that drive it tick by tick."""

from __future__ import annotations

import random

from drills.core.clock import DilatedClock
from drills.twin.profile import load_profile
from drills.twin.workloads.progress import LeafView
from drills.twin.workloads.store import CheckpointStore
from drills.twin.workloads.training_job import JobSim, Output
from drills.twin.workloads.truth import Truth

T0 = 1_000.0  # twin time the run starts


def running_job(tmp_path, defects=()) -> tuple[JobSim, Truth, dict[str, LeafView]]:
    """The minimal profile's job started at T0 on two pods, a minute past its NCCL init."""
    profile = load_profile("minimal", defects)
    (ns, name), spec = next(((j.namespace, j.name), j) for j in profile.workloads.training.values())
    truth = Truth(DilatedClock(60.0))
    leaves = {leaf: LeafView(leaf, 4, 4, 0.0) for leaf in profile.fabric.leaves}
    sim = JobSim(ns, name, spec, profile.fabric, 1.0, truth, CheckpointStore(tmp_path), random.Random(1), leaves)
    pods = [{"metadata": {"name": f"{name}-worker-{i}", "uid": f"u{i}"}, "spec": {"nodeName": f"n{i}"},
             "status": {"podIP": f"10.0.0.{i + 1}"}} for i in range(2)]
    leaf_of = {f"n{i}": sorted(leaves)[i % len(leaves)] for i in range(2)}
    sim.start_run(T0, pods, leaf_of, Output())
    sim.advance(T0 + spec.nccl.init_duration + 60, Output())
    return sim, truth, leaves
