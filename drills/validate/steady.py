"""`drills validate`: each selected drill's steady-state hypothesis, read as the drill reads it before its
first fault (drills/measure/steady.py), without injecting anything and without writing: the store facet,
which needs a probe written to the store, is named as not read here (the drill reads it before its fault)."""

from __future__ import annotations

import logging

from drills.validate.preflight import Check

__all__ = ["steady_checks"]

log = logging.getLogger(__name__)


def steady_checks(cluster, profile, drills, twin_info: dict | None, store_dir: str | None = None) -> list[Check]:
    """One check per selected drill that declares a nominal state: ok iff every reading is nominal. Read once, after
    the cluster checks settled (a fresh twin's job and replicas are up by then): a platform found not nominal is
    reported as it is, not asked again."""
    from drills.measure.steady import SteadyContext, read_hypothesis

    ctx = SteadyContext(cluster, profile, twin_info, None, (lambda: store_dir) if store_dir else None,
                        write_probe=False)
    out: list[Check] = []
    for drill in sorted(drills):
        try:
            hypothesis = read_hypothesis("before", drill, ctx)
        except Exception as err:  # noqa: BLE001 — a check, not a crash: say what could not be read
            out.append(Check(f"steady state ({drill})", False, f"not read: {str(err).splitlines()[0]}"))
            continue
        if hypothesis is None:
            out.append(Check(f"steady state ({drill})", True, "the profile declares no nominal state for this drill "
                             "(nominal.drills); the drill will not check one", warn=True))
            continue
        off = [r for r in hypothesis.readings if r.ok is not True]
        name = f"steady state ({drill})"
        if not off:
            out.append(Check(name, True, "nominal: " + "; ".join(r.sentence() for r in hypothesis.readings)))
        elif all(r.withheld for r in off):  # only what validate does not read: said, not judged (it writes nothing)
            read = [r for r in hypothesis.readings if not r.withheld]
            out.append(Check(name, True, "nominal as far as read: " + "; ".join(r.sentence() for r in read) +
                             "; not read here: " + ", ".join(r.facet for r in off) +
                             " (validate writes nothing; the drill reads it before its fault)"))
        else:
            out.append(Check(name, False, f"not nominal, the drill would inject nothing: {hypothesis.off_sentence()}"))
    return out
