"""Dead workers as the torch.distributed.elastic agent (torchrun, `accelerate launch`) reports them (a part of `LogReader`).

- The agent's own line when a worker dies: `failed (exitcode: -6) local_rank: 0 (pid: 970611) of binary: …`, behind
  a glog prefix (`E0517 08:24:03.805000 140617718325696 torch/distributed/elastic/multiprocessing/api.py:826] `) or
  the older logger's (`ERROR:torch.distributed.elastic.multiprocessing.api:`). Only the LOCAL rank is printed.
- The `ChildFailedError` summary box (`Failures:` / `Root Cause (first observed failure):`), one entry per dead
  worker: `host      : …`, `rank      : 1 (local_rank: 1)`, `exitcode  : -6 (pid: 2385923)`,
  `traceback : Signal 6 (SIGABRT) received by PID …` (older boxes: `rank: 0 (local_rank: 0)`, `exitcode: 1 (pid: N)`).

- The agent's restart decision: `[default] Worker group FAILED. 3/3 attempts left; will restart worker group`. When no
  dead worker of that group was read (its `failed (exitcode: …)` line is above the excerpt, or the log level hid it),
  the group's failure is itself one `worker_exit` (no exit code, no pid): a restart follows a failure.

- Ray's raylet when a worker process dies under a task (`(raylet) A worker died or was killed while executing a task by an
  unexpected system error. … Worker PID: 442 Worker exit type: SYSTEM_ERROR …`, vLLM's Ray executor, verl, OpenRLHF):
  a dead worker (pid) whatever the driver prints after it — Ray prints this only for an unexpected exit.
- DeepSpeed's launcher tearing its workers down (`[launch.py:319:sigkill_handler] Killing subprocess 410126`, one line
  per worker, then `… exits with return code = 1`): it does so only when a worker failed or the launcher was signalled —
  one `worker_exit` per teardown (no pid: the killed ones are the survivors), its return code when printed.
- The kernel's OOM killer (`Out of memory: Killed process 410126 (python) …`, `Memory cgroup out of memory: Killed
  process …`): that process is dead, its pid the worker's.
- The agent's error record (`error_handler: {` then a JSON record whose `"message": "RendezvousTimeoutError: …"` names
  the exception; PyTorch ≥ 1.9's `@record`): a failure of kind `traceback` with that exception (the rendezvous never
  completed, no worker ran); the Python traceback of the same exception right after it is that failure, not another.

Each dead worker is one `worker_exit` error (exit code, rank, local rank, pid, host, signal); the agent's line and the
box entry of the same pid are one worker. `Sending process N closing signal SIGTERM` is the agent stopping the healthy
workers after a death: a consequence, not another dead worker.
"""

from __future__ import annotations

import re

from drills.measure.logformats import TrainingEvent
from drills.measure.lognccl import LogError
from drills.measure.logprefix import Record

__all__ = ["ElasticReading"]

_AGENT_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)")
_BOX_HOST = re.compile(r"^\s*host\s*: (?P<host>\S+)\s*$")
_BOX_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: (?P<local>\d+)\)\s*$")
_BOX_EXIT = re.compile(r"^\s*exitcode\s*: (?P<code>-?\d+) \(pid: (?P<pid>\d+)\)\s*$")
_BOX_SIGNAL = re.compile(r"^\s*(?:traceback|msg)\s*: \"?Signal (?P<sig>\d+) \((?P<name>\w+)\) received by PID (?P<pid>\d+)")
_BOX_ENTRY = re.compile(r"^\[\d+\]:\s*$")
_GROUP_FAILED = re.compile(r"\[[\w-]*\] Worker group FAILED\. \d+/\d+ attempts left")
_RAY_WORKER_DIED = re.compile(r"A worker died or was killed while executing a task by an unexpected system error")
_RAY_PID = re.compile(r"\bWorker PID: (?P<pid>\d+)")
_DS_TEARDOWN = re.compile(r"\[launch\.py:\d+:sigkill_handler\] (?:Killing subprocess \d+|.* exits with return code = "
                          r"(?P<code>-?\d+))")
_OOM_KILLED = re.compile(r"[Oo]ut of memory: Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)")
_ERROR_RECORD = re.compile(r"\berror_handler:\s*\{\s*$")
_RECORD_MESSAGE = re.compile(r'^\s*"message":\s*"(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception))(?::\s?(?P<msg>[^"]*))?"')


class ElasticReading:
    """The elastic-agent part of `LogReader` (its state lives on the reader: errors, `_box` — the summary-box entry
    being read —, `_workers` — pid → its worker_exit error)."""

    _box: dict
    _workers: dict[int, LogError]

    def _elastic(self, rec: Record) -> list[TrainingEvent]:
        body = rec.body
        box, workers = self._box, self._workers
        if out := self._error_record(rec):
            return out
        if m := _DS_TEARDOWN.search(body):
            self._consumed = True
            err = getattr(self, "_teardown", None)
            if m.group("code") is not None and err is not None:
                err.exitcode = int(m.group("code"))
                return []
            if err is not None:
                return []
            self._teardown = LogError("worker_exit", body.strip(), rec.at, rec.host,
                                      exitcode=int(m.group("code")) if m.group("code") else None)
            return self._add_error(self._teardown, rec)
        if body.strip():
            self._teardown = None  # the teardown's lines are consecutive
        if m := _OOM_KILLED.search(body):
            pid = int(m.group("pid"))
            if pid in workers:
                return []
            workers[pid] = LogError("worker_exit", body.strip(), rec.at, rec.host, pid=pid, signal="SIGKILL")
            return self._add_error(workers[pid], rec)
        if _RAY_WORKER_DIED.search(body):
            m = _RAY_PID.search(body)
            pid = int(m.group("pid")) if m else None
            if pid is not None and pid in workers:
                return []
            err = LogError("worker_exit", body.strip(), rec.at, rec.host, pid=pid)
            if pid is not None:
                workers[pid] = err
            return self._add_error(err, rec)
        if _BOX_ENTRY.match(body):
            box.clear()
            return []
        if _GROUP_FAILED.search(body):
            dead_before = getattr(self, "_group_dead", 0)
            self._group_dead = len(workers)
            if len(workers) > dead_before:  # its dead workers were read: the restart adds no failure
                return []
            return self._add_error(LogError("worker_exit", body.strip(), rec.at, rec.host), rec)
        if m := _BOX_HOST.match(body):
            box["host"] = m.group("host")
            return []
        if m := _BOX_RANK.match(body):
            box["rank"], box["local"] = int(m.group("rank")), int(m.group("local"))
            return []
        if m := _BOX_SIGNAL.match(body):
            err = workers.get(int(m.group("pid")))
            if err is not None and err.signal is None:
                err.signal = m.group("name")
            return []
        if m := _BOX_EXIT.match(body):
            rank, local, host = box.get("rank"), box.get("local"), box.get("host")
            box.clear()
        elif m := _AGENT_FAILED.search(body):
            rank, local, host = None, int(m.group("local")), rec.host
        else:
            return []
        pid, code = int(m.group("pid")), int(m.group("code"))
        known = workers.get(pid)
        if known is not None:  # the agent's line and the box entry of one worker: fill in what the other lacked
            known.rank = known.rank if known.rank is not None else rank
            known.host = known.host or host
            return []
        err = LogError("worker_exit", body.strip(), rec.at, host, rank, exitcode=code, local_rank=local, pid=pid)
        workers[pid] = err
        return self._add_error(err, rec)

    def _error_record(self, rec: Record) -> list[TrainingEvent]:
        """torchelastic's error record: its opening line, then (within a few lines) the message naming the exception."""
        if _ERROR_RECORD.search(rec.body):
            self._record_open = (rec, 0)
            return []
        opened = getattr(self, "_record_open", None)
        if opened is None:
            return []
        start, lines = opened
        m = _RECORD_MESSAGE.match(rec.body)
        if m is None:
            self._record_open = (start, lines + 1) if lines < 4 else None
            return []
        self._record_open = None
        self._consumed = True
        exc = f"{m.group('exc')}: {m.group('msg') or ''}".strip()
        err = LogError("traceback", f"torchelastic error_handler: {exc}", start.at, start.host, exception=exc)
        self._record_error = err
        return self._add_error(err, start)  # the event carries the opening line: no longer an unknown one

    def _echoes_error_record(self, exception: str | None) -> bool:
        """The traceback that follows an error record and raises its exception (or is cut before any): the same failure."""
        err = getattr(self, "_record_error", None)
        if err is None:
            return False
        self._record_error = None
        name = (exception or "").split(":", 1)[0].rsplit(".", 1)[-1]
        return not name or name == (err.exception or "").split(":", 1)[0].rsplit(".", 1)[-1]
