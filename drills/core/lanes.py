"""Scenarios of one `drills run` in parallel lanes, each scenario on its own fresh twin.

A drill mostly waits on its twin's clock, so on fresh twins `drills run` runs up to `lanes` pytest
processes (lanes) at once over the same selection (fixtures/lanes.py: each claims the next scenario from
a shared counter). The run keeps one story: one run folder, one journal (fsynced O_APPEND lines), one
records.jsonl (flocked appends, put back in collection order at the end), one Allure results folder, one
JUnit file (merged here; the runner then rewrites each testcase from its record, matched by node id:
drills/report/junit.py), one console (this process prints every lane's lines, prefixed `[n]` when
more than one lane runs). Lane 0 starts at once; the others once lane 0 has collected and found more
than one scenario, so a one-scenario run costs one process, as before.

Signals: lanes run in their own sessions, so a terminal's Ctrl-C reaches this process only; each
SIGINT/SIGTERM it receives is forwarded once to every lane, where the run's own handling applies (the first
stops the lane's pytest and tears down: every fault reverted; later ones are recorded, never raised).
No lane starts after a signal. A lane whose supervisor dies gets SIGTERM (a thread waits on its pidfd) and reverts.

    python -m drills.core.lanes SPEC_JSON     # one lane (started by `run_lanes`, not by people)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from drills.core.prefork import popen_python

__all__ = ["LanesResult", "run_lanes", "lane_main", "LANES_DIR"]

log = logging.getLogger(__name__)

LANES_DIR = ".lanes"  # inside the run folder while it runs: the lanes' counter, count, order, JUnit files, results
_POLL_S = 0.2  # how often the supervisor looks for lane 0's count and for signals to forward


@dataclass
class LanesResult:
    rc: int  # pytest's exit code for the whole run (the lanes' merged)
    errors: list[str] = field(default_factory=list)  # RunWatch lines of every lane
    interrupted: bool = False  # some lane's pytest saw a KeyboardInterrupt
    signals: list[int] = field(default_factory=list)  # the signals this process received and forwarded


def run_lanes(opts, run_id: str, run_dir: Path, collect: list[str], named: list[str], lanes: int,
              out=None) -> LanesResult:
    """Run the selection in up to `lanes` lanes; returns once every lane has exited (after its teardown)."""
    out = out or sys.stdout
    lanes_dir = run_dir / LANES_DIR
    lanes_dir.mkdir()
    spec = {"opts": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
            "run_id": run_id, "run_dir": str(run_dir), "collect": collect, "named": named,
            "lanes_dir": str(lanes_dir), "parent": os.getpid()}
    sup = _Supervisor(spec, lanes, out)
    with sup.signals_recorded():
        sup.start(0)
        sup.loop()
    _merge_junit(lanes_dir, run_dir / "junit.xml", sup.started)
    _order_records(run_dir / "records.jsonl", lanes_dir)
    result = sup.result()
    shutil.rmtree(lanes_dir, ignore_errors=True)  # every lane has exited: the run folder keeps its documented shape
    return result


class _Supervisor:
    def __init__(self, spec: dict, lanes: int, out) -> None:
        self.spec, self.lanes, self.out = spec, lanes, out
        self.lanes_dir = Path(spec["lanes_dir"])
        self.procs: dict[int, subprocess.Popen] = {}
        self.selector = selectors.DefaultSelector()
        self.partial: dict[int, bytes] = {}
        self.received: list[int] = []
        self.forwarded = 0
        self.wanted: int | None = None  # how many lanes, once lane 0 has counted the scenarios

    @property
    def started(self) -> int:
        return len(self.procs)

    @contextlib.contextmanager
    def signals_recorded(self):
        """SIGINT/SIGTERM are recorded (and forwarded by the loop), never raised here; an inherited ignore stays."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, lambda signum, frame: self.received.append(signum))
        try:
            yield
        finally:
            for sig, handler in previous.items():
                if handler is not signal.SIG_IGN:
                    signal.signal(sig, handler)

    def start(self, lane: int) -> None:
        proc = popen_python("drills.core.lanes", [json.dumps({**self.spec, "lane": lane})], stdout=subprocess.PIPE,
                            new_session=True)
        self.procs[lane] = proc
        self.selector.register(proc.stdout, selectors.EVENT_READ, lane)

    def loop(self) -> None:
        while self.selector.get_map():
            self._forward()
            if self.wanted is None and not self.received:
                self._maybe_start_more()
            for key, _ in self.selector.select(_POLL_S):
                self._read(key.data, key.fileobj)
        for proc in self.procs.values():
            proc.wait()
        self._forward()

    def _forward(self) -> None:
        for sig in self.received[self.forwarded:]:
            for proc in self.procs.values():
                if proc.poll() is None:
                    proc.send_signal(sig)
            self.forwarded += 1

    def _maybe_start_more(self) -> None:
        try:
            count = int((self.lanes_dir / "count").read_text())
        except (OSError, ValueError):
            if self.procs[0].poll() is not None:
                self.wanted = 1  # lane 0 ended before counting (a collection error): nothing more to start
            return
        self.wanted = max(1, min(self.lanes, count))
        for lane in range(1, self.wanted):
            self.start(lane)

    def _read(self, lane: int, pipe) -> None:
        chunk = os.read(pipe.fileno(), 65536)
        if not chunk:
            self.selector.unregister(pipe)
            rest = self.partial.pop(lane, b"")
            if rest:
                self._print(lane, rest)
            return
        data = self.partial.pop(lane, b"") + chunk
        *lines, rest = data.split(b"\n")
        if rest:
            self.partial[lane] = rest
        for line in lines:
            self._print(lane, line)

    def _print(self, lane: int, line: bytes) -> None:
        text = line.decode("utf-8", "replace")
        prefix = f"[{lane + 1}] " if (self.wanted or 1) > 1 else ""
        self.out.write(prefix + text + "\n")
        self.out.flush()

    def result(self) -> LanesResult:
        rcs, errors, interrupted = [], [], False
        for lane, proc in sorted(self.procs.items()):
            try:
                got = json.loads((self.lanes_dir / f"result-{lane}.json").read_text())
            except (OSError, ValueError):  # the lane died before writing it
                got = {"rc": 3, "errors": [f"lane {lane + 1} ended with exit code {proc.returncode} before its "
                                           "result was written"], "interrupted": False}
            rcs.append(int(got["rc"]))
            errors += [e for e in got["errors"] if e not in errors]
            interrupted = interrupted or bool(got["interrupted"])
        rc = max([c for c in rcs if c != 5] or [5])  # 5 (nothing collected) only if it holds for every lane
        return LanesResult(rc, errors, interrupted, list(self.received))


def lane_main(argv: list[str]) -> int:
    """One lane: pytest in this process on the claimed scenarios, under the run's own signal handling."""
    from drills.core.log import setup_logging
    from drills.core.runner import RunOptions, _interruptible, _pytest
    from drills.core.runwatch import RunWatch
    from drills.core.signals import stop_on_signal

    spec = json.loads(argv[0])
    _die_with_parent(int(spec["parent"]))
    opts = RunOptions(**{**spec["opts"], "reports_root": Path(spec["opts"]["reports_root"])})
    setup_logging(opts.debug)
    if not opts.debug:
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    lanes_dir, lane = Path(spec["lanes_dir"]), int(spec["lane"])
    watch = RunWatch()
    with stop_on_signal() as interrupts:
        rc = _interruptible(lambda: _pytest(opts, spec["run_id"], Path(spec["run_dir"]), spec["collect"],
                                            spec["named"], watch, lane=(lanes_dir, lane)))
    result = {"rc": rc, "errors": watch.errors, "interrupted": watch.interrupted or interrupts.stopping}
    tmp = lanes_dir / f".result-{lane}.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, lanes_dir / f"result-{lane}.json")
    return 0


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the supervisor dies (even by SIGKILL): the lane then reverts what it injected.

    The supervisor is this lane's parent, or the requester of a prefork server (then the server is the parent,
    so PR_SET_PDEATHSIG would watch the wrong process): a thread waits on the supervisor's pidfd.
    """
    try:
        pidfd = os.pidfd_open(parent)
    except ProcessLookupError:  # it died before the lane started
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def watch() -> None:
        select.select([pidfd], [], [])  # readable once the supervisor has exited
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


def _merge_junit(lanes_dir: Path, target: Path, lanes: int) -> None:
    """One JUnit file: every lane's test cases in one suite, the counts summed, the longest lane's time."""
    merged: ET.Element | None = None
    for lane in range(lanes):
        try:
            suite = ET.parse(lanes_dir / f"junit-{lane}.xml").getroot().find("testsuite")
        except (OSError, ET.ParseError):
            continue
        if suite is None:
            continue
        if merged is None:
            merged = suite
            continue
        for key in ("tests", "errors", "failures", "skipped"):
            merged.set(key, str(int(merged.get(key, 0)) + int(suite.get(key, 0))))
        merged.set("time", str(max(float(merged.get("time", 0)), float(suite.get("time", 0)))))
        merged.extend(suite.findall("testcase"))
    if merged is not None:
        root = ET.Element("testsuites")
        root.append(merged)
        ET.ElementTree(root).write(target, encoding="utf-8", xml_declaration=True)


def _order_records(path: Path, lanes_dir: Path) -> None:
    """records.jsonl in collection order (lanes append as scenarios finish), replaced atomically."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        order = [json.loads(line) for line in (lanes_dir / "order").read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return
    index = {}
    for o in sorted(order, key=lambda o: o["index"]):
        index.setdefault((o["drill"], o["scenario"]), len(index))

    def key(line: str) -> int:
        try:
            rec = json.loads(line)
        except ValueError:
            return len(index)
        return index.get((rec.get("drill"), rec.get("scenario")), len(index))

    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text("".join(line + "\n" for line in sorted(lines, key=key)), encoding="utf-8")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(lane_main(sys.argv[1:]))
