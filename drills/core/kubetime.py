"""Comparing a Kubernetes object's time with a drill's stamp: one rule, at the coarser precision.

`metav1.Time` — conditions' `lastTransitionTime`, `creationTimestamp`, `deletionTimestamp`, containers'
`startedAt`/`finishedAt`, Volcano's `status.state.lastTransitionTime` — is serialised as RFC 3339 in whole seconds
(k8s.io/apimachinery/pkg/apis/meta/v1/time.go, `MarshalJSON`: `RFC3339` without fraction): a time S says the
moment was somewhere in [S, S + 1 s). A drill's own stamps — the injection, the revert, a log line, the resume —
carry milliseconds. Compared naively, a replacement scheduled 300 ms after a fault injected at 12:00:00.700 reads
12:00:00, "before the fault": no worker rescheduled; a container that died in the second of the resume drops out
of the window after it; a restart in the second of the revert is not "after the revert".

The rule: an object time is an interval, its start plus its `resolution` (1 s for a whole-second time; 1 µs for
one with a fraction: `MicroTime` such as events' `eventTime`, or a cluster that writes them finer).
- `may_be_after(t, stamp)`: the moment may lie at or after `stamp` (S + resolution > stamp). Used wherever the
  object's event counts as after the drill's moment: a replacement, an exit, a restart in a window.
- `surely_before(t, stamp)`: the whole interval lies at or before `stamp`. Used where an event is excused for
  having happened before a moment (a restart before an earlier drill found the platform nominal again).
- `not_before(t, stamp)`: the time to report for an event taken as after `stamp` — never earlier than it, so a
  phase is never shown before the fault that caused it.
The direction always keeps a real event and never hides a failure sign: an event in the same second as the
drill's stamp is taken as possibly after it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

__all__ = ["resolution", "may_be_after", "surely_before", "not_before", "latest"]

log = logging.getLogger(__name__)

SECOND = timedelta(seconds=1)
MICRO = timedelta(microseconds=1)


def resolution(t: datetime) -> timedelta:
    """How wide the moment `t` names: a whole second unless it carries a fraction."""
    return SECOND if t.microsecond == 0 else MICRO


def latest(t: datetime) -> datetime:
    """The latest moment `t` may stand for (exclusive end of its interval)."""
    return t + resolution(t)


def may_be_after(t: datetime, stamp: datetime) -> bool:
    """Whether the object's moment `t` may lie at or after the drill's `stamp`."""
    return latest(t) > stamp


def surely_before(t: datetime, stamp: datetime) -> bool:
    """Whether the object's moment `t` lies wholly at or before `stamp`."""
    return latest(t) <= stamp


def not_before(t: datetime, stamp: datetime) -> datetime:
    """`t` as reported for an event taken as after `stamp`: never earlier than the stamp."""
    return max(t, stamp)
