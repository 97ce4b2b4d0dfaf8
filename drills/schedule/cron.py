"""A CronJob's schedule, checked before anything is rendered: a standard five-field cron line or a macro, as the
CronJob controller parses it (robfig/cron) — one DrillError line naming the field, never a schedule the cluster
refuses later."""

from __future__ import annotations

import logging

from drills.core.errors import DrillError

__all__ = ["validate_cron"]

log = logging.getLogger(__name__)

_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_CRON_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
                ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
                ("day of week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")))


def validate_cron(expr: str) -> None:
    """A standard five-field cron line or a macro, as the CronJob controller parses it (robfig/cron)."""
    text = (expr or "").strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise DrillError(f"--cron {expr!r}: time zones in the schedule are not allowed; pass --time-zone instead")
    if text.startswith("@"):
        if text not in _CRON_MACROS:
            raise DrillError(f"--cron {expr!r}: unknown macro; use one of {', '.join(_CRON_MACROS)}")
        return
    fields = text.split()
    if len(fields) != 5:
        raise DrillError(f"--cron {expr!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                         f"got {len(fields)}; e.g. \"0 2 * * *\" for 02:00 every night")
    for value, (name, low, high, names) in zip(fields, _CRON_FIELDS):
        problem = _cron_field(value, low, high, names)
        if problem:
            raise DrillError(f"--cron {expr!r}: {name} field {value!r} {problem}")


def _cron_field(value: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    for part in value.split(","):
        rng, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            return f"has a bad step {step!r} (a positive number)"
        if rng in ("*", "?"):
            continue
        bounds = rng.split("-")
        if len(bounds) > 2:
            return f"has a bad range {rng!r}"
        numbers = []
        for bound in bounds:
            n = names.index(bound.upper()) + low if bound.upper() in names else (int(bound) if bound.isdigit() else None)
            if n is None or not low <= n <= high:
                return f"is out of range: {bound!r} (allowed {low}-{high}{', or names' if names else ''})"
            numbers.append(n)
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            return f"has a range that runs backwards ({rng!r})"
    return None
