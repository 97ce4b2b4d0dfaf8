"""What the fabric does to a running training job: the network phase a leaf's uplinks put it in
(converging, rerouted, rebalanced, isolated), the NCCL lines each phase prints on the workers behind
that leaf (async port events, a fallback to sockets without PFC, retry-exceeded), the truth's fabric
records, the load the job puts on the uplinks, the watchdog that ends an isolated run, and the
late-socket-fallback defect.

`FabricEffects` is a part of `JobSim` (drills.twin.workloads.training_job), split out by subject: it
reads and writes the simulation's state (its run, spec, fabric and truth) and, like it, does no I/O.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from drills.twin.workloads import loglines as L
from drills.twin.workloads.progress import RESTORED_RATIO, LeafView, NetPhase, net_phase

if TYPE_CHECKING:
    from drills.twin.workloads.training_job import Output

__all__ = ["FabricEffects"]


class FabricEffects:
    """The network side of `JobSim` (a mixin: `JobSim` holds the state)."""

    def phase_at(self, t: float) -> NetPhase:
        f = self.fabric
        return net_phase(self._views(), t, f.convergence_delay, f.rebalance_after, f.degraded_throughput_factor,
                         f.rebalanced_throughput_factor)

    def _views(self) -> list[LeafView]:
        run = self.run
        if run is None:
            return []
        views = self.leaf_views
        return [views[leaf] for leaf in set(run.leaves.values()) if leaf and leaf in views]

    def _late_fallback(self, now: float, out: Output) -> None:
        """Defect late-socket-fallback: well after the recovery, every rank re-inits on NET/Socket."""
        run, at = self.run, self.late_fallback_at
        if run is None or at is None or now < at:
            return
        self.late_fallback_at = None
        if run.transport != "IB":
            return
        run.transport = "Socket"
        hca, nranks = (self.spec.nccl.hcas or ["mlx5_0"])[0], len(run.pods) * max(1, self.spec.gpus_per_worker)
        for pod, w in run.workers.items():
            out.add(at, [pod], L.socket_fallback(w, hca, self.spec.nccl.socket_ifname, nranks, self.spec.nccl.version))
        self.truth.record("training", self.subject, "nccl_transport", at=at, transport="Socket", fallback=True,
                          late=True)

    def _carry(self, now: float) -> None:
        """Tell the fabric what crosses the leaves' uplinks now: each worker's share of the collective's bus
        bandwidth at the current throughput, when the run spans several leaves (else nothing leaves them)."""
        run, loads = self.run, {}
        if run is not None and len({leaf for leaf in run.leaves.values() if leaf}) > 1:
            rate = self.spec.nccl.bus_bandwidth_gbs * 1e9 * self.factor(now)
            for leaf in run.leaves.values():
                if leaf:
                    loads[leaf] = loads.get(leaf, 0.0) + rate
        carry = getattr(self.leaf_views, "carry", None)  # the hub's LeafViews; a bare dict in unit tests
        if carry is not None:
            carry(self.subject, loads)

    def _segments(self, t0: float, t1: float) -> list[tuple[float, float]]:
        run = self.run
        points = {t0, run.compute_from}
        if getattr(self, "blocked_until", None) is not None:
            points.add(self.blocked_until)  # a blocking save ends: the training loop goes on
        for v in self._views():
            if v.up < v.total:
                points.update({v.changed_at, v.changed_at + self.fabric.convergence_delay,
                               v.changed_at + max(self.fabric.rebalance_after, self.fabric.convergence_delay)})
        rate = 1.0 / max(self.spec.step_time, 1e-6)
        return [(p, self.factor(p) * rate) for p in sorted(p for p in points if p >= t0 and p <= t1)]

    def _net_transitions(self, now: float, out: Output) -> None:
        """Announce every phase the fabric went through since the last tick, in order: a late tick (a busy
        CPU at a high time scale) must not skip the fabric event itself (converging) and what it causes."""
        f, since = self.fabric, self.run.phase.since
        edges = {p for v in self._views() if v.up < v.total
                 for p in (v.changed_at, v.changed_at + f.convergence_delay,
                           v.changed_at + max(f.rebalance_after, f.convergence_delay))}
        for t in sorted(p for p in edges if since < p < now):
            self._net_transition(t, out)
        self._net_transition(now, out)

    def _net_transition(self, now: float, out: Output) -> None:
        run = self.run
        old, new = run.phase, self.phase_at(now)
        if (old.name, old.since, old.up) == (new.name, new.since, new.up):
            return
        run.phase = new
        if old.name == "converging" and new.name == "rebalanced":  # slept through the reroute
            self._announce(NetPhase("rerouted", 0.0, old.ends or new.since, new.leaf, new.up, new.total), old, out)
        self._announce(new, old, out)

    def _announce(self, new: NetPhase, old: NetPhase, out: Output) -> None:
        """Log a phase change to the run's workers; truth records it once per job (not again per restart)."""
        run, t = self.run, max(new.since, self.run.started)
        on_leaf = [p for p, leaf in run.leaves.items() if leaf == new.leaf] or list(run.workers)
        hca = (self.spec.nccl.hcas or ["mlx5_0"])[0]
        key = (new.name, new.since, new.up)
        fresh, self.announced = key != self.announced, key
        rec = self.truth.record if fresh else (lambda *a, **k: None)
        if new.name in ("converging", "isolated"):
            if fresh:
                self.awaiting_restore = True
                self.fabric_fault_at = t
            rec("training", self.subject, "fabric_fault", at=t, leaf=new.leaf, uplinks_up=new.up, uplinks=new.total,
                step=math.floor(self.progress.step))
            names = sorted(run.workers)
            for pod in on_leaf:
                w = run.workers[pod]
                peer = run.workers[names[(names.index(pod) + 1) % len(names)]]
                out.add(t, [pod], L.retry_exceeded(w, peer.ip) if new.name == "isolated"
                        else L.async_event(w, hca, "port error", self.spec.nccl.version))
            rec("training", self.subject, "nccl_warn", at=t, leaf=new.leaf)
            if not self.fabric.pfc and run.transport == "IB":
                # the ranks behind the lossy leaf lose RDMA; the job runs at the pace of its slowest rank
                run.transport = "Socket"
                nranks = len(run.pods) * max(1, self.spec.gpus_per_worker)
                names = sorted(run.workers)
                for pod in on_leaf:
                    w = run.workers[pod]
                    peer = run.workers[names[(names.index(pod) + 1) % len(names)]]
                    out.add(t, [pod], L.socket_fallback(w, peer.ip, self.spec.nccl.socket_ifname, nranks,
                                                        self.spec.nccl.version))
                rec("training", self.subject, "nccl_transport", at=t, transport="Socket", fallback=True,
                    ranks=sorted(run.workers[pod].grank for pod in on_leaf))
        elif new.name == "rerouted":
            for pod in on_leaf:  # traffic flows on the remaining uplinks: the path is up again
                out.add(t, [pod], L.async_event(run.workers[pod], hca, "port active", self.spec.nccl.version))
            rec("training", self.subject, "rerouted", at=t, leaf=new.leaf, factor=new.factor)
            rec("training", self.subject, "throughput_degraded", at=t, ratio=round(self._ratio(t), 3))
        self._maybe_restored(t)

    def _maybe_restored(self, t: float) -> None:
        if self.awaiting_restore and self.run is not None and t >= self.run.compute_from \
                and self._ratio(t) >= RESTORED_RATIO:
            self.awaiting_restore = False
            restarted = self.fault_at is not None and self.fault_at >= (self.fabric_fault_at or math.inf)
            path = "restarted" if restarted else "rerouted"
            self.truth.record("training", self.subject, "throughput_restored", at=t, ratio=round(self._ratio(t), 3),
                              path=path)
            if self.run.after_from is None:  # it trains on after the fabric event: the after_resume defects apply
                self.run.after_from = t
            late = self.fabric.socket_fallback_after_recovery
            if late is not None and self.run.transport == "IB":
                self.late_fallback_at = t + late

    def _ratio(self, t: float) -> float:
        return self.factor(t) * self.spec.samples_per_second / self.baseline if self.baseline else 0.0

    def _check_stall(self, now: float, out: Output) -> None:
        run = self.run
        if run is None or run.phase.name != "isolated":
            return
        limit = max(run.phase.since, run.compute_from) + self.spec.nccl.timeout  # this communicator's wait
        if now < limit:
            return
        run.seq += 1
        ran = self.spec.nccl.timeout + 0.012
        texts = {pod: L.watchdog_timeout(w, run.seq, self.spec.nccl.timeout, ran) for pod, w in run.workers.items()}
        self.truth.record("training", self.subject, "nccl_timeout", at=limit, leaf=run.phase.leaf)
        self.crash_workers(limit, list(run.workers), 134, "Error", texts, out, "nccl_timeout")
