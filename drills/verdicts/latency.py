"""The users' p99 latency against its baseline, judged once for every serving drill (pod kill, rolling restart,
noisy neighbour) — and only when both p99s are measurements.

Issue 30, class 4 (a value assumed, not read): the 99th percentile of fewer than 100 answers is not a p99 — at 12
answers it is the slowest one, and one slow answer more or less swings it by the whole tail. A load that produced
too few answers in a window (long completions, few users, a short window) made "p99 within 2x the baseline" a pass
on two maxima. Below `MIN_P99_ANSWERS` in either window the check is inconclusive (`not_observed`), naming how
many answers each held; the figures and their counts go in the record either way.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.verdicts.timeline import Verdict, judge_max

__all__ = ["MIN_P99_ANSWERS", "judge_p99"]

log = logging.getLogger(__name__)

# A p99 needs at least 100 answers: with n < 100 the top 1 % holds less than one answer and the "p99" is the maximum
MIN_P99_ANSWERS = 100


def judge_p99(baseline_ms: float | None, baseline_n: int, p99_ms: float | None, n: int, factor: float,
              window: str, name: str = "p99 latency") -> Verdict:
    """Pass iff the p99 over `window` (`n` answers) stays within `factor` × the p99 before the fault (`baseline_n`
    answers); inconclusive when either window held fewer than MIN_P99_ANSWERS answers."""
    counts = f"p99 {baseline_ms} ms of {baseline_n} answers before the fault, {p99_ms} ms of {n} answers {window}"
    thin = [f"{label} held {got} answer(s)" for label, got in (("the baseline", baseline_n), (f"the window {window}", n))
            if got < MIN_P99_ANSWERS]
    if thin:
        return Verdict(name, False, None, float(factor), "x baseline",
                       f"{name}: not observed — {' and '.join(thin)}, a p99 needs at least {MIN_P99_ANSWERS} "
                       f"(of fewer it is the slowest answer, not a percentile) ({counts})",
                       baseline=baseline_ms, inconclusive=True, unobserved=True)
    ratio = p99_ms / baseline_ms if p99_ms and baseline_ms else None
    verdict = judge_max(name, None if ratio is None else round(ratio, 2), factor, "x baseline")
    return replace(verdict, reason=f"{verdict.reason} ({counts})", baseline=baseline_ms)
