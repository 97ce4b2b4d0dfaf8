"""Where `drills run`'s wall time goes: a pytest plugin bench/suite.py loads (PYTEST_PLUGINS) into the run.

It measures, it never changes what runs: each event is one JSON line `{"t": epoch, "pid", "ev", ...}`
appended (O_APPEND, one write per line) to the file named by DRILLS_BENCH_TIMINGS. Events: the plugin's
import (pytest and its plugins loaded), session start/finish, per item the setup (and inside it the
twin's start), every pytest-bdd step (kind Given/When/Then and its text), the fault injected, each
phase reached, each revert, the teardown; after pytest, each part of the report (summary, timeline
charts, postmortems, Allure HTML, Chromium screenshot), timed by wrapping drills.report.make's
functions in this process. `breakdown(path)` turns the lines into the table bench/suite.py prints.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections import defaultdict

import pytest

__all__ = ["emit", "breakdown", "wrap_report", "CATEGORIES", "BOOT"]

# `python -c BOOT run …`: the CLI as `python -m drills.cli`, with the report's parts timed in this process
# (with lanes, pytest runs in other processes and the report is built here, after them).
BOOT = ("import sys; sys.argv[0] = 'drills'; import bench.suite_profile as p; p.wrap_report(); "
        "from drills.cli import main; sys.exit(main())")

_PATH = os.environ.get("DRILLS_BENCH_TIMINGS")


def emit(ev: str, **fields) -> None:
    if not _PATH:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "ev": ev, **fields}, default=str) + "\n"
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def pytest_sessionstart(session) -> None:
    emit("session_start")
    wrap_report()


def pytest_sessionfinish(session) -> None:
    emit("session_finish")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    emit("setup_start", item=item.nodeid)
    yield
    emit("setup_end", item=item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    emit("teardown_start", item=item.nodeid)
    yield
    emit("teardown_end", item=item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    timed = fixturedef.argname in ("twin_info",)
    if timed:
        emit("fixture_start", name=fixturedef.argname, item=request.node.nodeid)
    yield
    if timed:
        emit("fixture_end", name=fixturedef.argname, item=request.node.nodeid)


def pytest_bdd_before_step(request, feature, scenario, step, step_func) -> None:
    emit("step_start", item=request.node.nodeid, kind=step.type, text=step.name)


def pytest_bdd_after_step(request, feature, scenario, step, step_func, step_func_args) -> None:
    emit("step_end", item=request.node.nodeid, kind=step.type, text=step.name)


def pytest_bdd_step_error(request, feature, scenario, step, step_func, step_func_args, exception) -> None:
    emit("step_end", item=request.node.nodeid, kind=step.type, text=step.name, error=True)


def pytest_drill_fault_injected(item, kind, target, record) -> None:
    emit("injected", item=item.nodeid, kind=kind)


def pytest_drill_phase_reached(item, phase, at, since_injected_s) -> None:
    emit("phase", item=item.nodeid, phase=phase)


def pytest_drill_reverted(item, kind, target, ok, error, readings) -> None:
    emit("reverted", item=item.nodeid, kind=kind)


def wrap_report() -> None:
    """Time each part of make_report (it runs in this process after pytest.main)."""
    try:
        from drills.report import make
    except ImportError:
        return
    if getattr(make, "_bench_wrapped", False):
        return
    make._bench_wrapped = True
    for name, part in (("write_summary", "summary"), ("timeline_png", "timeline charts"),
                       ("write_postmortems", "postmortems"), ("build_report", "Allure HTML"),
                       ("_screenshot", "Chromium screenshot")):
        setattr(make, name, _timed(getattr(make, name), part))


def _timed(fn, part):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        start = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            emit("report_part", part=part, start=start)
    return run


# --- reading the lines back -------------------------------------------------------------------------------

CATEGORIES = ("pytest start + imports", "twin start", "Given (preconditions)", "When (inject)",
              "Then: wait for recovery", "Then: stability + checks", "teardown (revert, twin stop)",
              "scenario other", "between scenarios", "report: summary", "report: timeline charts",
              "report: postmortems", "report: Allure HTML", "report: Chromium screenshot", "exit")


def breakdown(path: str, started: float, ended: float) -> dict:
    """{"total": wall, "parts": {category: seconds summed over items}, "items": {nodeid: {category: s}},
    "span": {category: wall seconds some item spent in it (overlaps counted once)}}."""
    events = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    parts: dict[str, float] = defaultdict(float)
    items: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_item: dict[str, list[dict]] = defaultdict(list)
    first_session = min((e["t"] for e in events if e["ev"] == "session_start"), default=started)
    last_finish = max((e["t"] for e in events if e["ev"] == "session_finish"), default=ended)
    parts["pytest start + imports"] += first_session - started
    for e in events:
        if "item" in e:
            by_item[e["item"]].append(e)
        if e["ev"] == "report_part":
            parts[f"report: {e['part']}"] += e["t"] - e["start"]
    report_end = max((e["t"] for e in events if e["ev"] == "report_part"), default=last_finish)
    parts["exit"] += ended - report_end
    busy: list[tuple[float, float]] = []
    for nodeid, evs in by_item.items():
        mine = items[nodeid]
        t = {}
        for e in evs:
            key = e["ev"] if e["ev"] not in ("phase",) else f"phase:{e['phase']}"
            t.setdefault(key, e["t"])
            if e["ev"] in ("step_end", "teardown_end", "setup_end", "fixture_end"):
                t[e["ev"]] = e["t"]  # the last one
        if "setup_start" not in t or "teardown_end" not in t:
            continue
        busy.append((t["setup_start"], t["teardown_end"]))
        twins = _pairs(evs, "fixture_start", "fixture_end")
        mine["twin start"] += sum(b - a for a, b in twins)
        steps = [(kind, a, b, b - a - _overlap(a, b, twins)) for kind, a, b in _steps(evs)]
        recovered = t.get("phase:recovered")
        for kind, start, end, own in steps:
            if kind == "then" and recovered is not None and start < recovered < end:
                mine["Then: wait for recovery"] += recovered - start
                mine["Then: stability + checks"] += end - recovered
            elif kind == "then":
                mine["Then: stability + checks" if recovered is not None and recovered <= start
                     else "Then: wait for recovery"] += own
            else:
                mine[{"when": "When (inject)"}.get(kind, "Given (preconditions)")] += own
        mine["teardown (revert, twin stop)"] += t["teardown_end"] - t["teardown_start"]
        whole = t["teardown_end"] - t["setup_start"]
        mine["scenario other"] += whole - sum(v for k, v in mine.items() if k != "scenario other")
        for k, v in mine.items():
            parts[k] += v
    parts["between scenarios"] += (last_finish - first_session) - _union(busy)
    return {"total": ended - started, "parts": dict(parts), "items": {k: dict(v) for k, v in items.items()},
            "drills_span": _union(busy)}


def _pairs(evs, start_ev, end_ev) -> list[tuple[float, float]]:
    starts = [e["t"] for e in evs if e["ev"] == start_ev]
    ends = [e["t"] for e in evs if e["ev"] == end_ev]
    return list(zip(starts, ends))


def _overlap(a: float, b: float, spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


def _steps(evs) -> list[tuple[str, float, float]]:
    out, open_ = [], None
    for e in evs:
        if e["ev"] == "step_start":
            open_ = e
        elif e["ev"] == "step_end" and open_ is not None:
            out.append((str(open_["kind"]).lower(), open_["t"], e["t"]))
            open_ = None
    return out


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
