"""ONE mapping from a record's verdict and category to every output that shows it (DESIGN §5b).

A drill's outcome is its record (drills.core.record): the typed verdict and category. Every output
that tells a person or a machine how the drill went — `drills run`'s exit code, the Allure result's
status, the JUnit testcase, the word of the summary / console / postmortem, and whether the record
counts as a pass in the score, the trend and the postmortem list — is read from `TABLE` below, never
decided again elsewhere. `passed` / `pass` appear in exactly one row: the verdict `pass`.

Why these statuses (Allure's own meanings: `failed` = the product failed an assertion, `broken` = the
test could not reach a conclusion, `skipped` = it did not run):
- `failed` / JUnit `failure`: the platform was judged and did not hold — a judged check missed its
  target (slo_breach, stale_checkpoint, socket_fallback, storage_io, unsafe_rollout, serving_evicted), the
  platform's monitoring missed the fault or buried it (not_detected, alert_storm, paged), or a fault the drill injected could
  not be taken back (revert_failed): the platform is left broken, which is the worst finding a drill has.
- `broken` / JUnit `error`: the drill reached no judgement on recovery — the fault had no effect or a
  precondition was not met (inconclusive), a stop condition aborted it, a check could not measure, the
  fault could not be injected, the input was refused, it was interrupted, or our own code raised. None of
  these is a pass, and each needs a person.
- `skipped` is never used for a drill that has a record: CI dashboards and Allure's own statistics treat
  skipped as harmless, and an inconclusive drill proved nothing. Skipped stays what pytest says of a
  scenario that never ran (a dry run, an Example this target does not run): those leave no record.

Exit code (`exit_code` per row; `run_exit_code` combines a run's records): 0 pass; 1 any drill not passed;
2 when EVERY drill of the run stopped before changing anything (bad input, an injector that refused, a
precondition not met — and no `injected` phase, no revert: nothing was started); 130 interrupted (wins).
A record whose verdict and category do not belong together (a hand-edited or foreign line) reads as
`broken` / `error`, exit 1: what cannot be read is never a pass.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Iterable, Mapping

from drills.core.record import Category, Outcome, Record

__all__ = ["AllureStatus", "JunitResult", "Presentation", "TABLE", "presentation", "of", "exit_code_of",
           "run_exit_code", "EXIT_NOT_STARTED", "EXIT_INTERRUPTED"]

log = logging.getLogger(__name__)

EXIT_NOT_STARTED = 2
EXIT_INTERRUPTED = 130


class AllureStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    BROKEN = "broken"
    SKIPPED = "skipped"


class JunitResult(str, enum.Enum):
    PASS = "pass"  # a <testcase> with no child result element
    FAILURE = "failure"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Presentation:
    """How one (verdict, category) shows in every output."""

    exit_code: int  # this record's part of `drills run`'s exit code (run_exit_code)
    allure: AllureStatus
    junit: JunitResult
    word: str  # the labels.yaml key of the word the summary, console and postmortems print
    counts_as_pass: bool  # in the resilience score, the trend and the postmortem list


_P, _F, _B = AllureStatus.PASSED, AllureStatus.FAILED, AllureStatus.BROKEN
_OK, _FAILURE, _ERROR = JunitResult.PASS, JunitResult.FAILURE, JunitResult.ERROR
V, C = Outcome, Category

# (verdict, category) → exit, Allure, JUnit, word, counts as pass. The README shows this table.
TABLE: Mapping[tuple[Outcome, Category | None], Presentation] = {
    (V.PASS, None):                           Presentation(0, _P, _OK, "pass", True),
    (V.FAIL, C.SLO_BREACH):                   Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.STALE_CHECKPOINT):             Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.SOCKET_FALLBACK):              Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.STORAGE_IO):                   Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.DIVERGED):                     Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.WORKER_FAILED):                Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.NOT_EXPORTED):                 Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.GPU_NOT_ISOLATED):             Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.NOT_REMEDIATED):               Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.UNSAFE_ROLLOUT):               Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.SERVING_EVICTED):              Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.NOT_RESTORED):                 Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.NOT_DETECTED):                 Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.ALERT_STORM):                  Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.PAGED):                        Presentation(1, _F, _FAILURE, "fail", False),
    (V.FAIL, C.REVERT_FAILED):                Presentation(1, _F, _FAILURE, "revert_failed", False),
    (V.FAIL, C.CHECK_FAILED):                 Presentation(1, _B, _ERROR, "fail", False),
    (V.FAIL, C.INJECTOR_FAILED):              Presentation(2, _B, _ERROR, "fail", False),
    (V.FAIL, C.BAD_INPUT):                    Presentation(2, _B, _ERROR, "fail", False),
    (V.FAIL, C.ERROR):                        Presentation(1, _B, _ERROR, "error", False),
    (V.FAIL, C.INTERRUPTED):                  Presentation(130, _B, _ERROR, "interrupted", False),
    (V.FAIL, None):                           Presentation(1, _F, _FAILURE, "fail", False),  # older lines
    (V.INCONCLUSIVE, C.NO_EFFECT):            Presentation(1, _B, _ERROR, "inconclusive", False),
    (V.INCONCLUSIVE, C.PRECONDITION_NOT_MET): Presentation(2, _B, _ERROR, "inconclusive", False),
    (V.INCONCLUSIVE, C.UNCLASSIFIED_LOG):     Presentation(1, _B, _ERROR, "inconclusive", False),
    (V.INCONCLUSIVE, C.NOT_OBSERVED):         Presentation(1, _B, _ERROR, "inconclusive", False),
    (V.INCONCLUSIVE, None):                   Presentation(1, _B, _ERROR, "inconclusive", False),
    (V.ABORTED, C.ABORTED):                   Presentation(1, _B, _ERROR, "aborted", False),
    (V.ABORTED, None):                        Presentation(1, _B, _ERROR, "aborted", False),
}
UNREADABLE = Presentation(1, _B, _ERROR, "error", False)  # a verdict and category that do not belong together


def presentation(verdict: Outcome, category: Category | None) -> Presentation:
    """The row of `TABLE` for (verdict, category); UNREADABLE for a pair no drill produces."""
    row = TABLE.get((verdict, category))
    if row is None:
        log.warning("a record with verdict %s and category %s: shown as an error, never a pass", verdict.value,
                    None if category is None else category.value)
        return UNREADABLE
    return row


def of(record: Record) -> Presentation:
    """The row for `record`."""
    return presentation(record.verdict, record.category)


def exit_code_of(record: Record) -> int:
    """This record's part of the exit code: its row's, except that a not-started row (2) is 1 for a drill
    that did change something (an `injected` phase, or a revert of a fault partly made)."""
    code = of(record).exit_code
    if code == EXIT_NOT_STARTED and (record.injected is not None or record.reverts):
        return 1
    return code


def run_exit_code(records: Iterable[Record]) -> int:
    """A run's exit code from its records: 130 if any was interrupted; 2 if every drill stopped before changing
    anything; 0 if every one passed; else 1. No records: 1 (the caller decides what an empty run means)."""
    codes = [exit_code_of(r) for r in records]
    if not codes:
        return 1
    if EXIT_INTERRUPTED in codes:
        return EXIT_INTERRUPTED
    if all(c == EXIT_NOT_STARTED for c in codes):
        return EXIT_NOT_STARTED
    return 0 if all(c == 0 for c in codes) else 1
