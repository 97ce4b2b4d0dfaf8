"""NCCL under a fabric fault, measured from the training job's own logs: transport, warnings, path, throughput.

`NcclMonitor` is the `TrainingMonitor` (pods, Volcano job, every worker's log followed with timestamps)
that also keeps each worker's NCCL lines and step lines. After an uplink drop it reports:

- transport    `NET/IB` (IB or RoCE devices named) or `NET/Socket`, per worker, before the fault and
               at every (re-)initialisation after it — any `NET/Socket` after the fault, or at the
               re-init after a restart, is the silent TCP fallback this drill exists to catch
- job health   NCCL warnings and timeouts in the window, job restarts (Volcano retryCount, new
               workers), and the recovery path: `rerouted` (traffic moved to the other uplinks) or
               `restarted` (an NCCL timeout killed the job and it came back from a checkpoint)
- throughput   baseline from the step lines before the fault; `recovered` when it is back to the
               profile's ratio (90 %) of baseline and stays there for the sustain window
               (`drills.measure.throughput`), all in log-timestamp cluster time

It only measures; the judge_* functions word the verdicts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable

from drills.measure import throughput as tp
from drills.measure.checkpoint import TrainingBaseline, TrainingMonitor
from drills.measure.job_health import JobHealth
from drills.core.errors import CheckFailed
from drills.core.kube import obj_get
from drills.verdicts.timeline import Timeline, Verdict, format_duration, judge_resume, within

__all__ = ["NcclMonitor", "FabricBaseline", "UplinkRecovery", "TransportSeen", "judge_uplink_effect",
           "judge_transport", "judge_job_health", "judge_throughput", "with_nccl_cause"]

log = logging.getLogger(__name__)

_WARN_LINES = 8  # NCCL warning lines kept for the report


@dataclass(frozen=True)
class TransportSeen:
    """One NCCL transport line: who, when, which NET plugin, which devices, and whether after a restart."""

    pod: str
    at: datetime
    transport: str  # IB | Socket (NCCL's NET plugin name)
    devices: tuple[str, ...]
    after_restart: bool = False
    rank: int | None = None  # the NCCL rank whose line this is, when known (a pod may hold several)

    @property
    def who(self) -> str:
        return self.pod if self.rank is None else f"{self.pod} (rank {self.rank})"

    @property
    def label(self) -> str:
        return f"NET/{self.transport}" + (f" ({', '.join(self.devices)})" if self.devices else "")


@dataclass(frozen=True)
class FabricBaseline:
    """The job before the fault: the training baseline, plus its NCCL transport and restart count."""

    training: TrainingBaseline
    transports: dict[str, TransportSeen]  # pod → its latest transport line
    retry_count: int
    throughput: float | None
    unit: str
    taken_at: datetime  # lines after this belong to the drill's window (the fault's own stamp is an estimate)

    @property
    def nodes(self) -> list[str]:
        return self.training.nodes


@dataclass(frozen=True)
class UplinkRecovery:
    """What the job did after the uplink went down (None/empty where it never happened)."""

    timeline: Timeline
    path: str | None  # rerouted | restarted | None (neither: still degraded or stalled)
    before: dict[str, TransportSeen]
    after: tuple[TransportSeen, ...]
    warnings: int
    timeouts: int
    warn_lines: tuple[str, ...]
    restarts: int
    baseline: float | None
    recovered: float | None  # mean throughput over the sustain window after recovery
    unit: str
    ratio: float
    sustain_s: float
    resumed_step: int | None
    latest_checkpoint: int | None
    ended: str | None
    logs: tuple[str, ...] = ()
    overlay: tuple[tuple[float, float], ...] = ()
    window_s: float = 0.0  # the stability window watched after recovery
    watched_until: datetime | None = None  # the cluster time the watch ended (recovery + window, or earlier)
    health: JobHealth | None = None  # learning, container states, unknown lines from the recovery on

    @property
    def sockets(self) -> list[TransportSeen]:
        return [t for t in self.after if t.transport == "Socket"]

    def details(self) -> dict:
        devices = sorted({d for t in [*self.before.values(), *self.after] for d in t.devices})
        seen_after = sorted({t.label for t in self.after})
        return {**(self.health.details() if self.health else {}), "path": self.path,
                "transport_before": {p: t.label for p, t in sorted(self.before.items())},
                "transport_after": seen_after or ["no re-init (kept the communicator)"],
                "transport_seen": "NET/Socket" if self.sockets else (
                    "none" if not self.before else ", ".join(sorted({f"NET/{t.transport}" for t in self.before.values()}))),
                "rdma_devices": devices, "nccl_warnings": self.warnings, "nccl_timeouts": self.timeouts,
                "nccl_warn_lines": list(self.warn_lines), "job_restarts": self.restarts,
                "baseline_throughput": _round(self.baseline), "recovered_throughput": _round(self.recovered),
                "throughput_unit": self.unit, "throughput_recovery_ratio": self.ratio,
                "throughput_sustain_s": self.sustain_s, "resumed_step": self.resumed_step,
                "latest_checkpoint": self.latest_checkpoint, "ended": self.ended, "logs": list(self.logs),
                "overlay": [list(p) for p in self.overlay], "overlay_label": self.unit,
                "stability_window_s": self.window_s,
                "watched_until": self.watched_until.isoformat() if self.watched_until else None}


class NcclMonitor(TrainingMonitor):
    """A TrainingMonitor that also keeps NCCL lines and step throughput per worker."""

    def fabric_baseline(self, min_workers: int, timeout_s: float,
                        on_wait: Callable[[str, float], None] | None = None) -> FabricBaseline:
        """Wait until the job runs on ≥ min_workers, every worker has logged its NCCL transport and
        there are step lines to take a throughput baseline from; CheckFailed saying what is missing."""
        start = self.cluster.clock.timestamp()
        training = self.baseline(min_workers, timeout_s, need_checkpoint=False, on_wait=on_wait)

        def missing() -> str | None:
            known = {uid for uid, e in self._nccl if e.kind == "nccl_transport"}
            silent = sorted(self._state.workers[u].name for u in training.uids if u not in known)
            if silent:
                return (f"no NCCL transport line in the log of {', '.join(silent)} "
                        "(run the job with NCCL_DEBUG=INFO so NCCL names its transport)")
            if len([s for s in self._samples if s.value is not None]) < 3:
                return "fewer than 3 step lines with throughput (samples/s or step time) logged"
            return None

        deadline = start + timeout_s
        ok = self._pump(lambda: missing() is None, deadline,
                        on_wait and (lambda: on_wait("baseline", self.cluster.clock.timestamp() - start)))
        if not ok:
            raise CheckFailed(f"precondition not met: training job {training.namespace}/{training.job}: {missing()}")
        now = self.cluster.clock.now()
        return FabricBaseline(training, self._transports_before(training.uids, now),
                              int(obj_get(self._state.job, "status", "retryCount") or 0),
                              tp.baseline(self._samples, now), self._unit(), now)

    def uplink_recovery(self, base: FabricBaseline, injected_at: datetime, deadline_ts: float, ratio: float,
                        sustain_s: float, on_phase: Callable[[str, datetime], None] | None = None,
                        on_wait: Callable[[str, float], None] | None = None, window_s: float = 0.0,
                        acted_by: datetime | None = None) -> UplinkRecovery:
        """Follow the job until throughput recovered (sustained), the job ended, or the deadline passed; after
        a recovery, keep watching its NCCL transport through the stability window (`window_s` cluster seconds
        from the recovery), stopping early at a fallback to NET/Socket or the job's end. The recovery is looked
        for only after `acted_by` (the latest the switch can have shut the port): the job's lines between our
        stamp and the switch acting are the job before the fault, not a recovery from it."""
        old = set(base.training.uids)
        baseline = tp.baseline(self._samples, injected_at) or base.throughput
        reported: set[str] = set()
        found: list[tp.ThroughputRecovery | None] = [None]

        def phases() -> Timeline:
            found[0] = (tp.find_recovery(self._samples, max(injected_at, acted_by or injected_at), baseline, ratio,
                                         sustain_s)
                        if baseline else None)
            return self._fabric_timeline(base.taken_at, injected_at, old, len(base.training.workers), baseline, ratio,
                                         found[0])

        def done() -> bool:
            timeline = phases()
            timeline.announce(reported, on_phase)
            return timeline.recovered is not None or self._state.ended(injected_at) is not None

        def tick() -> None:
            if on_wait:
                on_wait("recovered", self.cluster.clock.timestamp() - injected_at.timestamp())

        self._pump(done, deadline_ts, tick)
        timeline, rec = phases(), found[0]
        if timeline.recovered is not None and window_s > 0:
            def unstable() -> bool:
                return any(t.transport == "Socket" for t in self._transports_after(base.taken_at, old)) \
                    or self._state.ended(injected_at) is not None

            def watching() -> None:
                if on_wait:
                    on_wait("stable", self.cluster.clock.timestamp() - timeline.recovered.timestamp())

            self._pump(unstable, timeline.recovered.timestamp() + max(window_s, sustain_s), watching)
        watched_until = self.cluster.clock.now()
        restarted = self._restarted(injected_at, old)
        path = "restarted" if restarted else ("rerouted" if rec is not None else None)
        warns = [(uid, e) for uid, e in self._nccl if e.kind == "nccl_warn" and e.at > base.taken_at]
        resumed = self._state.resume_after(injected_at, old)
        retries = int(obj_get(self._state.job, "status", "retryCount") or 0) - base.retry_count
        return UplinkRecovery(
            timeline=timeline, path=path, before=base.transports,
            after=tuple(self._transports_after(base.taken_at, old)), warnings=len(warns),
            timeouts=sum(1 for _, e in warns if e.is_timeout),
            warn_lines=tuple(f"{self._name(uid)}: {e.text}" for uid, e in warns[:_WARN_LINES]),
            restarts=max(retries, 1 if restarted else 0), baseline=baseline,
            recovered=rec.sustained_mean if rec else None, unit=base.unit, ratio=ratio, sustain_s=sustain_s,
            resumed_step=resumed[2] if resumed else None,
            latest_checkpoint=self._state.latest_checkpoint(injected_at) if restarted else None,
            ended=self._state.ended(injected_at), logs=self._excerpt(injected_at),
            overlay=tuple(tp.overlay(self._samples, injected_at)), window_s=window_s, watched_until=watched_until,
            health=self.health(injected_at, timeline.recovered, None, "recovered"))

    # -- derived ---------------------------------------------------------------------------------
    def _name(self, uid: str) -> str:
        worker = self._state.workers.get(uid)
        return worker.name if worker else uid

    def _transports_before(self, uids, before: datetime) -> dict[str, TransportSeen]:
        out: dict[str, TransportSeen] = {}
        for uid, e in self._nccl:
            if e.kind == "nccl_transport" and uid in uids and e.at <= before:
                key = self._name(uid) if e.rank is None else f"{self._name(uid)}/rank{e.rank}"
                out[key] = TransportSeen(self._name(uid), e.at, e.transport or "?", e.devices, rank=e.rank)
        return out

    def _transports_after(self, since: datetime, old: set[str]) -> list[TransportSeen]:
        return [TransportSeen(self._name(uid), e.at, e.transport or "?", e.devices, uid not in old, e.rank)
                for uid, e in self._nccl if e.kind == "nccl_transport" and e.at > since]

    def _restarted(self, injected_at: datetime, old: set[str]) -> bool:
        gone = any(w.terminating for u, w in self._state.workers.items() if u in old)
        return gone or bool(self._state.new(old)) or self._state.job_left_running_at is not None

    def _fabric_timeline(self, since: datetime, injected_at: datetime, old: set[str], replicas: int,
                         baseline: float | None, ratio: float, rec: tp.ThroughputRecovery | None) -> Timeline:
        events: list[tuple[str, datetime]] = [("injected", injected_at)]
        signs = [e.at for _, e in self._nccl if e.kind == "nccl_warn" and e.at > since]
        if baseline:
            signs += [s.at for s in self._samples if s.at > injected_at and s.value is not None
                      and s.value < ratio * baseline]
        if signs:  # a warning stamped just before our estimate of the shutdown is still its first sign
            events.append(("detected", max(min(signs), injected_at)))
        if self._restarted(injected_at, old):
            restart = self._state.timeline(injected_at, old, replicas)  # pods and job: detected … caught_up
            events += [(p, at) for p, at in restart.reached.items() if p in ("detected", "rescheduled", "ready",
                                                                             "caught_up")]
        if rec is not None:
            events.append(("recovered", rec.at))
        return Timeline.from_events(events)


def judge_uplink_effect(uplink, detected: datetime | None = None) -> Verdict:
    """Did shutting the uplink touch the job? From the switch's own counters when it shows them (the port
    carried traffic until the shutdown), else from the job (NCCL warned or throughput dipped: `detected`).
    No traffic on the port is "inconclusive: the fault had no effect" — recovery from it proves nothing."""
    port = f"{uplink.switch} {uplink.interface}"
    if uplink.carried_packets is not None:
        rate = f", {_bits(uplink.carried_bps)}" if uplink.carried_bps is not None else ""
        if uplink.carried_packets > 0 or (uplink.carried_bps or 0) > 0:
            after = ("" if uplink.packets_after is None else
                     f"; {uplink.packets_after} packet(s) once it was down")
            return Verdict("fault effect", True, float(uplink.carried_packets), None, "packets",
                           f"{port} carried traffic until the shutdown ({uplink.carried_packets} packets between "
                           f"two reads of its counters{rate}){after}")
        return Verdict("fault effect", False, 0.0, None, "packets",
                       f"inconclusive: the fault had no effect: {port} carried no traffic before the shutdown "
                       f"(0 packets between two reads of its counters{rate}), so the job's traffic does not cross "
                       "it and its recovery was not tested; drop an uplink that carries the job (check the leaf's "
                       "ECMP group and faults.uplink)", inconclusive=True)
    if detected is not None:
        return Verdict("fault effect", True, None, None, "",
                       f"{port}: its counters are not readable, but the job saw the drop (NCCL warning or "
                       "throughput dip)")
    return Verdict("fault effect", False, None, None, "",
                   f"inconclusive: the fault had no effect: {port} shows no readable counters and the job saw "
                   "nothing (no NCCL warning, no throughput dip), so recovery was not tested", inconclusive=True)


def judge_transport(rec: UplinkRecovery) -> Verdict:
    """Pass iff every worker was on RDMA before the fault and no NET/Socket appeared after it."""
    if not rec.before:
        return Verdict("transport", False, None, None, "", "transport unknown: no NCCL transport line before the "
                       "fault (run the job with NCCL_DEBUG=INFO)")
    already = sorted(t.who for t in rec.before.values() if t.transport == "Socket")
    if already:
        return Verdict("transport", False, None, None, "",
                       f"NCCL was already on NET/Socket before the fault on {', '.join(already)}: the job runs over "
                       "TCP sockets, not RDMA (check NCCL_IB_HCA / NCCL_IB_DISABLE and the RDMA devices)")
    before = "; ".join(sorted({t.label for t in rec.before.values()}))
    if rec.sockets:
        first = min(rec.sockets, key=lambda t: t.at)
        pods = ", ".join(sorted({t.who for t in rec.sockets}))
        since = format_duration(max(0.0, (first.at - rec.timeline.injected).total_seconds())) if rec.timeline.injected else "?"
        when = "at its re-init after the restart" if first.after_restart else f"{since} after the fault"
        recovered = rec.timeline.recovered
        if recovered is not None and first.at > recovered and not first.after_restart:
            when += (f", {format_duration((first.at - recovered).total_seconds())} after throughput had recovered "
                     f"(inside the {format_duration(rec.window_s)} stability window)")
        return Verdict("transport", False, None, None, "",
                       f"NCCL fell back to NET/Socket {when} on {pods} (before: {before}): RDMA was lost and "
                       "training runs over TCP sockets (socket fallback; check PFC/ECN on the RoCE fabric)")
    again = sorted({t.label for t in rec.after})
    tail = f"; re-initialised on {', '.join(again)}" if again else ""
    if rec.timeline.recovered is not None and rec.window_s:
        tail += f"; watched through the {format_duration(rec.window_s)} stability window after recovery"
    return Verdict("transport", True, None, None, "", f"NCCL stayed on RDMA: {before}{tail}")


def judge_job_health(rec: UplinkRecovery) -> Verdict:
    """Pass iff the job rerouted without a timeout, or restarted and resumed from its latest checkpoint."""
    noise = f"{rec.warnings} NCCL warning(s), {rec.timeouts} timeout(s), {rec.restarts} restart(s)"
    if rec.ended:
        return Verdict("job health", False, None, None, "", f"the job ended after the uplink drop ({rec.ended}; {noise})")
    if rec.path == "rerouted":
        return Verdict("job health", True, None, None, "", f"rerouted around the failed uplink ({noise})")
    if rec.path == "restarted":
        resumed = judge_resume(rec.resumed_step, rec.latest_checkpoint)
        cause = "an NCCL timeout" if rec.timeouts else "a worker failure"
        if rec.resumed_step is None:
            return Verdict("job health", False, None, None, "",
                           f"restarted after {cause} but never resumed training ({noise})")
        return replace(resumed, name="job health", reason=f"restarted after {cause}: {resumed.reason} ({noise})")
    return Verdict("job health", False, None, None, "",
                   f"neither rerouted nor restarted: throughput stayed below {rec.ratio:.0%} of its baseline ({noise})")


def judge_throughput(rec: UplinkRecovery, required_ratio: float) -> Verdict:
    """Pass iff the throughput sustained after recovery is ≥ required_ratio × baseline."""
    if not rec.baseline:
        return Verdict("throughput", False, None, required_ratio * 100, "%", "throughput: no baseline before the fault")
    need = f"{required_ratio:.0%} of the {rec.baseline:.1f} {rec.unit} baseline"
    if rec.recovered is None:
        return Verdict("throughput", False, None, required_ratio * 100, "%",
                       f"throughput never got back to {need} for {format_duration(rec.sustain_s)}")
    ratio = rec.recovered / rec.baseline
    ok = within(required_ratio, ratio)
    return Verdict("throughput", ok, round(ratio * 100, 1), required_ratio * 100, "%",
                   f"throughput back to {rec.recovered:.1f} {rec.unit}, {ratio:.0%} of the {rec.baseline:.1f} "
                   f"{rec.unit} baseline ({'at least' if ok else 'below'} the required {required_ratio:.0%}), "
                   f"sustained for {format_duration(rec.sustain_s)}")


def with_nccl_cause(verdict: Verdict, rec: UplinkRecovery) -> Verdict:
    """A failed recovery or throughput check names what NCCL did meanwhile: timeouts that killed the job
    (a leaf cut off from the spines) are the cause, not a detail of a passing check."""
    if verdict.passed or verdict.inconclusive or not (rec.timeouts or rec.restarts):
        return verdict
    cause = (f"NCCL timed out {rec.timeouts} time(s) and the job restarted {rec.restarts} time(s)" if rec.timeouts
             else f"the job restarted {rec.restarts} time(s)")
    first = f" (first: {rec.warn_lines[0]})" if rec.warn_lines else ""
    return replace(verdict, reason=f"{verdict.reason}; {cause}{first}: the job's leaf had no path left to the other "
                                   "leaves, so it could not reroute")


def _bits(bps: float | None) -> str:
    for unit, div in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps is not None and bps >= div:
            return f"{bps / div:.1f} {unit}"
    return f"{bps or 0:.0f} b/s"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
