"""What the checkpoint store held **at the fault**, from a reading taken later.

The drill reads the store after the fault (a reader pod must start first); by then the resumed job may have saved
again — at the very step numbers of a save the fault cut off, or of a save the store lost — moved the frameworks'
pointers on, and rotated old checkpoints away (the HF Trainer's `save_total_limit`). A verdict that compares the
resume with what the job wrote *after* the fault is about the wrong moment. So a reading says only what its
modification times prove (GNU `find -printf '%y %T@ %p'`, drills/measure/store_read.py):

- a checkpoint was **complete at the fault** iff its completion evidence (ckpt_store's table) was written no later
  than the cut-off — the first replacement worker running, else scheduled (no resumed job writes before; the old workers
  may still finish a save the fault interrupted: a drain's grace period, a NoExecute eviction), or the fault when
  none was scheduled — plus `CLOCK_SKEW_S`, and has not changed since (an mtime is the *last* write): its own file
  (trainer_state.json, .metadata, the .ckpt), or — for the frameworks whose evidence is a pointer every save
  rewrites (Megatron's tracker, DeepSpeed's `latest`, mmengine's `last_checkpoint`) — the pointer, whose text then
  is what it said at the fault;
- evidence written later was **written after the fault** (by the resumed job, or a save that ended after it);
- a pointer rewritten after the fault (the resumed job's next save moves Megatron's tracker on) no longer says
  what it named then. A checkpoint it covers counts as complete at the fault iff everything of it the listing
  shows is older than the cut-off; one that changed since was written again after the fault. This errs one way
  only — a pointer write the store lost at the fault (lost-last-save) is hidden, and the checkpoint it named is
  counted: the truth is then *newer* than the job's resume, which fails it (as "stale"), never passes it. A
  reading of such a store that misses the resume is still a FAIL, for a less precise reason; never a PASS;
- a checkpoint absent from the reading was absent at the fault only if no entry was added to or removed from the
  directory since (its own mtime ≤ the cut-off): otherwise it may have been rotated away.

Without times (busybox `find` has no `-printf`) a reading proves the state at the fault only if it was taken
before any replacement worker could write: `before_writers` says so, from the cluster-time moment the first
new worker was scheduled; otherwise everything is unknown and the judge says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from drills.core.clock import Clock
from drills.measure.ckpt_store import StoreCheckpoint, StoreReading

__all__ = ["StoreAtFault", "at_fault", "CLOCK_SKEW_S"]

log = logging.getLogger(__name__)

# Cluster seconds an mtime may lie after the fault and still count as written before it: the store's clock (an NFS
# server's, a node's) and the drill's differ by up to this much (NTP keeps nodes within milliseconds; 5 s covers a
# drifting one). Safe that way round: no resumed job writes a checkpoint within seconds of the fault — its workers
# must first be rescheduled, start, load the checkpoint and train to the next save.
CLOCK_SKEW_S = 5.0


@dataclass(frozen=True)
class StoreAtFault:
    """The reading split by what it proves about the moment of the fault (cluster epoch seconds `cutoff`)."""

    complete: tuple[StoreCheckpoint, ...]  # complete at the fault, proven
    after: tuple[StoreCheckpoint, ...]  # completion evidence written after the fault
    unknown: tuple[StoreCheckpoint, ...]  # complete now; whether at the fault, the reading cannot tell
    incomplete: tuple[StoreCheckpoint, ...]  # incomplete now, unchanged since the fault (or no times, read early)
    settled: bool  # no entry added to or removed from the directory since the fault: an absence is real
    cutoff: float | None
    why_unknown: str | None = None  # what the reading could not tell, for the reason

    def details(self) -> dict:
        return {"complete": [c.step for c in self.complete], "written_after_fault": [c.name for c in self.after],
                "unknown": [c.name for c in self.unknown], "incomplete": [c.name for c in self.incomplete],
                "settled": self.settled, "cutoff": self.cutoff and Clock.iso(self.cutoff), "why_unknown": self.why_unknown,
                "clock_skew_s": CLOCK_SKEW_S}

    @property
    def latest(self) -> StoreCheckpoint | None:
        return max(self.complete, key=lambda c: c.step) if self.complete else None

    def find(self, step: int) -> tuple[str, StoreCheckpoint] | None:
        """Where `step` is in this split: ("complete" | "after" | "unknown" | "incomplete", the checkpoint)."""
        for kind in ("complete", "after", "unknown", "incomplete"):
            hit = next((c for c in getattr(self, kind) if c.step == step), None)
            if hit is not None:
                return kind, hit
        return None


def at_fault(store: StoreReading, fault_at: float | None, step_at_fault: int | None,
             writers_from: float | None = None, read_done: float | None = None) -> StoreAtFault:
    """`store` as it was at `fault_at` (cluster epoch s). `writers_from`: when the first replacement worker was
    scheduled, or running (None: none was); `read_done`: when the listing ended — for a reading without times."""
    reach = [c for c in store.checkpoints if step_at_fault is None or c.step <= step_at_fault]
    done = [c for c in reach if c.complete]
    open_ = tuple(c for c in reach if not c.complete)
    if fault_at is None:
        return StoreAtFault(tuple(done), (), (), open_, True, None)
    # No resumed job writes before a replacement is scheduled; until then the old workers may still finish a save
    # (a drain's grace period, a NoExecute taint's eviction): what completed by then is what the resume can load.
    cutoff = max(fault_at, writers_from if writers_from is not None else fault_at) + CLOCK_SKEW_S
    if not store.timed:
        early = writers_from is None or (read_done is not None and read_done <= writers_from)
        if early:  # read before any new worker could write: what it holds is what the fault left
            return StoreAtFault(tuple(done), (), (), open_, True, cutoff)
        why = ("the listing has no modification times (the reader's find has no -printf) and it was read after a "
               "replacement worker was scheduled, so what the store held at the fault cannot be told from it")
        return StoreAtFault((), (), tuple(done), (), False, cutoff, why)
    complete, after, unknown = [], [], []
    for c in done:
        if c.completed_at is None:
            unknown.append(c)
        elif c.completed_at <= cutoff:
            complete.append(c)
        elif c.own_evidence:
            after.append(c)
        elif c.changed_at is not None and c.changed_at <= cutoff:  # the pointer moved on: its files decide
            complete.append(replace(c, evidence=f"{c.evidence}, rewritten after the fault; everything of it older "
                                                "than the fault"))
        elif c.changed_at is not None:
            after.append(c)
        else:
            unknown.append(c)
    # incomplete now: it was incomplete at the fault too unless something in it changed since
    incomplete = tuple(c for c in open_ if c.changed_at is not None and c.changed_at <= cutoff)
    settled = store.root_changed_at is not None and store.root_changed_at <= cutoff
    why = None
    if unknown:
        pointer = next((c for c in unknown if not c.own_evidence), None)
        why = (f"the framework's pointer was rewritten after the fault ({_iso(pointer.completed_at)}), so which "
               "checkpoints were complete at the fault cannot be told from it" if pointer else
               "some completion evidence has no modification time")
    return StoreAtFault(tuple(complete), tuple(after), tuple(unknown), incomplete, settled, cutoff, why)


def _iso(ts: float | None) -> str:
    return "time unknown" if ts is None else f"written {Clock.iso(ts)}"
