# WARNING: stops locust processes: the ones a load run recorded (pid + kernel start time) and any locust
# whose command line writes into that run's load directory; in pods mode deletes the load's Jobs, Service and pods.
"""The load generator as a journaled "fault": a run that dies by SIGKILL leaves locust running (its
own safety nets — the parent watch, `--run-time` — take seconds to an hour), so the load fixture
journals it like an injector does a fault, and `drills revert` stops it.

The fault contract (drills/faults/__init__.py): `plan(target, profile, runner=)` — the undo spec is
the load directory, written BEFORE locust starts (a crash between spawn and record still finds the
processes by it); `inject(target, plan)` starts the `LoadRunner` and records each process's pid, its
process group (locust runs in its own session) and its kernel start time, so a reused pid is never
signalled; `revert(target, undo, record)` ends what is left — SIGTERM to each process group, then
SIGKILL — and is idempotent. The runner itself is stopped (and its results read) by its owner first.
In pods mode (drills/load/podrunner.py) the undo spec also names the load's objects (namespace and base name,
known before anything is created), and revert deletes its Jobs, Service and every pod labelled with it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from drills.core.errors import RevertFailed
from drills.faults import Plan, Reach
from drills.faults.readback import Observation, Reading, read

__all__ = ["KIND", "plan", "inject", "revert", "verify", "revert_spec", "record", "stop", "leftovers", "start_time"]

log = logging.getLogger(__name__)

KIND = "load"


def revert_spec(out_dir: str | Path, objects: dict | None = None) -> dict:
    """What the journal keeps before locust starts: its load directory, which every locust argv names, and in
    pods mode the load's objects (`{"namespace", "name"}`)."""
    return {"out_dir": str(Path(out_dir).resolve()), **({"pods": dict(objects)} if objects else {})}


def record(runner) -> dict:
    """The started processes of a `LoadRunner`: name, pid, process group and kernel start time (pods mode: none,
    and the pods by role)."""
    pods = getattr(runner, "pods", None)
    return {"out_dir": str(runner.out_dir.resolve()),
            "processes": [{"name": name, "pid": pid, "pgid": pid, "start": start_time(pid)}
                          for name, pid in runner.processes()],
            **({"pod_names": pods()} if pods is not None else {})}


def plan(target, profile, *, runner) -> Plan:
    """The load a `LoadRunner` (or `PodLoadRunner`) will send; nothing starts here."""
    objects = runner.objects() if hasattr(runner, "objects") else None
    where = f"locust, {runner.workers} workers" if objects is None else \
        f"locust as pods in {objects['namespace']}: a master and {runner.workers} workers"
    return Plan(KIND, str(Path(runner.out_dir).resolve()),
                f"send completions from {runner.users} users to {runner.host} ({where})",
                revert_spec(runner.out_dir, objects), spec=runner,
                reach=Reach(namespaces=(objects["namespace"],)) if objects else Reach())


def inject(target, plan: Plan) -> dict:
    """Start the load; returns once requests flow, with its processes and the cluster time it started."""
    runner = plan.spec
    runner.start()
    return {**record(runner), "injected_at": target.clock.iso(target.clock.now())}


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Stop this load's locust processes that still run (none, once its runner stopped them)."""
    data = {**undo, **(record or {})}
    if data.get("pods"):
        from drills.load.podrunner import delete_objects

        deleted = delete_objects(target.cluster, data["pods"]["namespace"], data["pods"]["name"])
        log.info("load of %s: %s", data["out_dir"], f"deleted {', '.join(deleted)}" if deleted else "nothing left")
        return "stopped" if not deleted else f"stopped; deleted {', '.join(deleted)}"
    stopped = stop(data["out_dir"], data.get("processes") or [])
    log.info("load of %s: %s", data["out_dir"], f"stopped pid(s) {stopped}" if stopped else "nothing running")
    return "stopped" if not stopped else f"stopped; killed pid(s) {stopped}"


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read back that none of this load is left: no locust process of its directory (by recorded pid and start
    time, and by command line), and in pods mode no pod of its objects."""
    data = {**undo, **(record or {})}

    def reader():
        if data.get("pods"):
            from drills.load.podrunner import pods_of

            ns, name = data["pods"]["namespace"], data["pods"]["name"]
            left = pods_of(target.cluster, ns, name)
            return [Observation(f"load pods {ns}/{name}", f"{len(left)} left" + (f": {', '.join(left)}" if left else ""),
                                f"GET pods in {ns} (the load's label selector)", not left)], tuple(left)
        pids = sorted(leftovers(data["out_dir"], data.get("processes") or []))
        return [Observation(f"locust of {data['out_dir']}", f"{len(pids)} process(es) alive" +
                            (f": pid {', '.join(map(str, pids))}" if pids else ""), "/proc (pid + start time, argv)",
                            not pids)], tuple(f"pid {p}" for p in pids)

    return read(KIND, data["out_dir"], reader)


def stop(out_dir: str, processes: list[dict], grace_s: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL, the live locust processes of this load (their whole process groups).
    Returns the pids it signalled; RevertFailed if one survives SIGKILL."""
    found = leftovers(out_dir, processes)
    signalled = sorted(found)
    pending = dict(found)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not pending:
            break
        for pid, pgid in pending.items():
            _kill(pid, pgid, sig)
        pending = {pid: pgid for pid, pgid in pending.items() if not _gone(pid, wait_s)}
    if pending:
        raise RevertFailed(f"locust pid(s) {', '.join(map(str, pending))} of {out_dir} survive SIGKILL; "
                           "stop them by hand, then run `drills revert` again")
    return signalled


def leftovers(out_dir: str, processes: list[dict]) -> dict[int, int | None]:
    """pid → process group to signal (None: the pid alone) of live locust processes of this load:
    the recorded ones whose start time still matches, and any locust whose argv writes into `out_dir`."""
    found: dict[int, int | None] = {}
    for proc in processes:
        pid, start = int(proc.get("pid") or 0), proc.get("start")
        if pid and start is not None and start_time(pid) == start and _alive(pid):
            found[pid] = int(proc.get("pgid") or pid)
    prefix = str(out_dir).rstrip("/") + "/"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in found:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "locust" in argv and any(a.startswith(prefix) for a in argv) and _alive(int(entry.name)):
            pid = int(entry.name)
            found[pid] = pid if _pgid(pid) == pid else None  # a session leader of its own: its group too
    return found


def start_time(pid: int) -> int | None:
    """The process's kernel start time (clock ticks since boot, /proc/<pid>/stat field 22)."""
    stat = _stat(pid)
    return int(stat[19]) if stat and len(stat) > 19 else None


# helpers

def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (field 3, the state, first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return bool(stat) and stat[0] not in ("Z", "X")


def _pgid(pid: int) -> int | None:
    stat = _stat(pid)
    return int(stat[2]) if stat and len(stat) > 2 else None


def _kill(pid: int, pgid: int | None, sig: int) -> None:
    try:
        if pgid:
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _gone(pid: int, timeout_s: float) -> bool:
    """Wait until `pid` is no longer alive (reaping it if it is our child)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not _alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
