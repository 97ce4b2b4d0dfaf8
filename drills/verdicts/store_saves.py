"""The storage drill's completion evidence for the job's saves under saturation (issue 30, red team wave 5).

The save-time check reads durations from the job's log: a write-back storage client that acknowledges a save from
its cache and drops the flush when the store falls behind gives a log that says "saved" in good time while the
store never got the checkpoint — the job would resume from an older one, or none. So every save the log reports
inside the saturation window must be **complete on the store**, by the completion evidence its framework writes
(drills/measure/ckpt_store.py reads it), not by the log's word. A save the store no longer lists while a later one
is complete may have been rotated away (keep-last-N): not observed, never a pass nor a blame; unreadable: the same.
"""

from __future__ import annotations

import logging
from typing import Sequence

from drills.measure.ckpt_store import StoreReading
from drills.verdicts.timeline import Verdict

__all__ = ["judge_saves_on_store", "NAME"]

log = logging.getLogger(__name__)

NAME = "saves on the store"


def judge_saves_on_store(steps: Sequence[int], reading: StoreReading | None, where: str) -> Verdict:
    """Pass iff every step the job's log saved under saturation is a complete checkpoint in `reading`; FAIL
    (the store broke under the load) when one is held incomplete, or absent with nothing later complete;
    inconclusive (not observed) when the store could not be read or a save may have been rotated away."""
    wanted = sorted(set(int(s) for s in steps))
    if not wanted:
        return _unobserved("the job's log reports no save under saturation, so none could be looked for on the store")
    if reading is None or not reading.readable:
        problem = reading.problem if reading is not None and reading.problem else "no framework layout recognised"
        return _unobserved(f"the job's checkpoint directory {where} could not be read ({problem})")
    held = {c.step: c for c in reading.checkpoints}
    broken = [f"step {s}: {held[s].evidence}" for s in wanted if s in held and not held[s].complete]
    latest = reading.latest_complete
    absent = [s for s in wanted if s not in held]
    lost = [f"step {s}: not on the store" for s in absent if latest is None or latest.step < s]
    if broken or lost:
        return Verdict(NAME, False, float(len(wanted) - len(broken) - len(lost)), float(len(wanted)), "saves",
                       f"{NAME}: the job's log says it saved under saturation, but the store holds "
                       f"{'; '.join(broken + lost)} (read from {reading.source}): saves acknowledged, never written")
    if absent:
        return _unobserved(f"step(s) {', '.join(map(str, absent))} saved under saturation are no longer on the store "
                           f"(a later checkpoint, {latest.step}, is: rotated away?), read from {reading.source}")
    return Verdict(NAME, True, float(len(wanted)), float(len(wanted)), "saves",
                   f"{NAME}: the {len(wanted)} save(s) the job logged under saturation (step "
                   f"{', '.join(map(str, wanted))}) are complete on the store (read from {reading.source})")


def _unobserved(why: str) -> Verdict:
    log.info("saves on the store not observed: %s", why)
    return Verdict(NAME, False, None, None, "saves", f"inconclusive: {why}", inconclusive=True, unobserved=True)
