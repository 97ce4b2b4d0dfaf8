"""The storage drill's evidence of effect on the very object judged: the store fio flooded is the one the
training job writes its checkpoints to (drills/measure/store_identity.py reads the store's listing)."""

from __future__ import annotations

import logging
from typing import Sequence

from drills.verdicts.timeline import Verdict

__all__ = ["judge_store_target"]

log = logging.getLogger(__name__)


def judge_store_target(found: Sequence[str], store: str, job: str, saved_steps: Sequence[int], scanned: int) -> Verdict:
    """Pass iff the flooded store holds a checkpoint of the job at a step its log says it saved; otherwise
    inconclusive, naming what is missing — saves judged on another store say nothing about this one."""
    steps = ", ".join(str(s) for s in sorted(set(saved_steps))[-4:]) or "none"
    if found:
        return Verdict("fault target", True, float(len(found)), 1.0, "checkpoints",
                       f"fault target: the flooded store {store} holds the job's checkpoints ({', '.join(found[:3])})")
    if not saved_steps:
        why = f"the job {job} logged no checkpoint save, so which store it writes to is not observed"
    else:
        why = (f"the flooded store {store} holds no checkpoint of {job} at the steps its log saved ({steps}; "
               f"{scanned} entries looked at): the job writes its checkpoints elsewhere")
    return Verdict("fault target", False, 0.0, 1.0, "checkpoints", f"inconclusive: {why}", inconclusive=True)
