"""A small typed wrapper around the fio binary: job spec → argv/jobfile → process → parsed result.

No PyPI package wraps fio well, so this one does exactly what the storage drill needs: JSON output
to a file (never mixed with stderr), one clear line for every failure, and a background process
that can always be stopped with everything it started (jobs run as threads, in their own session).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from drills.core.errors import DrillError, InvalidProfile
from drills.measure.fio_report import DirectionStats, DiskUtil, FioResult, parse_fio_output

__all__ = [
    "RW_MODES",
    "FioJob",
    "FioProcess",
    "spawn_fio",
    "FioResult",
    "DirectionStats",
    "DiskUtil",
    "run_fio",
    "start_fio",
    "fio_argv",
    "fio_binary",
    "parse_fio_output",
    "available_ioengines",
    "default_ioengine",
    "supports_direct",
]

log = logging.getLogger(__name__)

RW_MODES = ("read", "write", "randread", "randwrite", "rw", "randrw", "readwrite")
_SIZE = re.compile(r"^\d+(\.\d+)?([kmgtp]i?b?)?%?$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class FioJob:
    """One fio job section. `ioengine="auto"` picks libaio when fio has it, else psync.

    `thread` runs fio's workers as threads of one process: fio otherwise forks workers into
    sessions of their own, which a kill of fio's process group does not reach.
    """

    name: str
    directory: str
    rw: str = "randrw"
    bs: str = "4k"
    size: str = "16m"
    numjobs: int = 1
    iodepth: int = 1
    ioengine: str = "auto"
    direct: bool = False
    runtime: float | None = None
    time_based: bool = False
    rwmixread: int = 50
    group_reporting: bool = True
    thread: bool = True
    unlink: bool = False
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", str(self.directory))
        problems = []
        if not _NAME.match(self.name):
            problems.append(f"name {self.name!r} must be letters, digits, '_', '.', '-'")
        if self.rw not in RW_MODES:
            problems.append(f"rw {self.rw!r} is not one of {', '.join(RW_MODES)}")
        for label, value in (("bs", self.bs), ("size", self.size)):
            if not _SIZE.match(str(value)):
                problems.append(f"{label} {value!r} is not a size like 4k, 1m, 2g")
        if self.numjobs < 1 or self.iodepth < 1:
            problems.append("numjobs and iodepth must be ≥ 1")
        if not 0 <= self.rwmixread <= 100:
            problems.append(f"rwmixread {self.rwmixread} must be within 0..100")
        if self.runtime is not None and self.runtime <= 0:
            problems.append(f"runtime {self.runtime} must be > 0 seconds")
        if self.time_based and self.runtime is None:
            problems.append("time_based needs a runtime")
        problems += _unsafe_options(self.directory, self.extra)
        if problems:
            raise InvalidProfile(f"fio job {self.name!r}: " + "; ".join(problems))

    def options(self) -> list[tuple[str, str | None]]:
        """The job's fio options in order; a None value is a flag."""
        engine = default_ioengine() if self.ioengine == "auto" else self.ioengine
        opts: list[tuple[str, str | None]] = [
            ("rw", self.rw), ("bs", self.bs), ("size", self.size), ("numjobs", str(self.numjobs)),
            ("iodepth", str(self.iodepth)), ("ioengine", engine), ("direct", str(int(self.direct))),
            ("directory", self.directory),
        ]
        if self.rw in ("rw", "randrw", "readwrite"):
            opts.append(("rwmixread", str(self.rwmixread)))
        if self.runtime is not None:
            opts.append(("runtime", f"{int(round(self.runtime * 1000))}ms"))
        if self.time_based:
            opts.append(("time_based", None))
        if self.group_reporting:
            opts.append(("group_reporting", None))
        if self.thread:
            opts.append(("thread", None))
        if self.unlink:
            opts.append(("unlink", "1"))
        opts.extend(self.extra)
        return opts

    def to_argv(self) -> list[str]:
        """Command-line form: `--name=` opens the job, the options after it belong to it."""
        return [f"--name={self.name}"] + [f"--{k}" if v is None else f"--{k}={v}" for k, v in self.options()]

    def to_jobfile(self) -> str:
        """Job-file form (one section), e.g. for fio's client/server mode."""
        lines = [f"[{self.name}]"] + [k if v is None else f"{k}={v}" for k, v in self.options()]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _unsafe_options(directory: str, extra) -> list[str]:
    """The job file is one `name=value` a line and the command line one `--name=value` an argument: a name outside
    fio's option grammar, or a control character anywhere, would start another line or option (the last gate
    before any file or command is written, whatever the value came from)."""
    from drills.core.grammar import CONTROL, valid

    problems = [f"directory {directory!r} holds a control character"] if CONTROL.search(directory) else []
    for name, value in extra:
        if not valid("fio_option", str(name)):
            problems.append(f"option name {str(name)!r} is not a fio option name")
        elif CONTROL.search(str(value)):
            problems.append(f"option {name} holds a control character")
    return problems


class FioProcess:
    """A running fio (own session, so the whole group can be signalled). Get one from `start_fio`."""

    def __init__(self, popen: subprocess.Popen, jobs: Sequence[FioJob], output: Path, stderr: Path,
                 owned_dir: Path | None) -> None:
        self.popen = popen
        self.jobs = tuple(jobs)
        self.output = output
        self.stderr = stderr
        self._owned_dir = owned_dir
        self._stopped = False
        self._result: FioResult | None = None
        self._texts: tuple[str, str] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def pgid(self) -> int:
        return self.popen.pid  # start_new_session: fio leads its own group

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """Wait for fio to end by itself; on timeout it is stopped and a DrillError raised."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise DrillError(f"fio did not finish within {timeout:g} s; it was stopped") from None

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM the group (fio then reports what it did), SIGKILL after `grace` seconds; waits."""
        if self.running:
            self._stopped = True
            _signal_group(self.pgid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.pgid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode

    def result(self) -> FioResult:
        """The parsed output once fio has ended (by itself, or stopped: then a partial result)."""
        if self._result is not None:
            return self._result
        if self.running:
            raise DrillError(f"fio (pid {self.pid}) is still running: wait() or stop() it first")
        if self._texts is None:
            self._texts = (self.output.read_text(errors="replace") if self.output.exists() else "",
                           self.stderr.read_text(errors="replace") if self.stderr.exists() else "")
            self.discard()
        text, err = self._texts
        if self.popen.returncode != 0 and not self._stopped:
            raise DrillError(f"fio failed: {_error_line(err, text, self.popen.returncode)}")
        if "{" not in text:
            raise DrillError(f"fio produced no report: {_error_line(err, text, self.popen.returncode)}")
        self._result = parse_fio_output(text)
        return self._result

    def discard(self) -> None:
        """Remove the temporary output directory `start_fio` made, if any (`result()` does it too)."""
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None


def run_fio(jobs: FioJob | Sequence[FioJob], timeout: float | None = None) -> FioResult:
    """Run fio to completion (or until `timeout` seconds, then stop it and raise) and parse it."""
    proc = start_fio(jobs)
    try:
        proc.wait(timeout)
        return proc.result()
    finally:
        proc.discard()


def start_fio(jobs: FioJob | Sequence[FioJob], output: str | Path | None = None) -> FioProcess:
    """Start fio in the background in its own session; JSON goes to `output` (a temp file if None)."""
    jobs = [jobs] if isinstance(jobs, FioJob) else list(jobs)
    if not jobs:
        raise DrillError("fio: no jobs given")
    binary = fio_binary()
    jobs = [_prepare(job) for job in jobs]
    owned = None
    if output is None:
        owned = Path(tempfile.mkdtemp(prefix="drills-fio-out-"))
        output = owned / "fio.json"
    output = Path(output).absolute()
    return spawn_fio(fio_argv(jobs, output, binary=binary), output, jobs, owned)


def spawn_fio(argv: list[str], output: str | Path, jobs: Sequence[FioJob] = (), owned: Path | None = None) -> FioProcess:
    """Start `argv` (an fio command writing its JSON to `output`) in its own session; stderr beside `output`."""
    output = Path(output).absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    stderr_path = output.with_suffix(".stderr")
    log.debug("starting %s", " ".join(argv))
    with open(stderr_path, "wb") as err:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                 cwd=output.parent, start_new_session=True)
    return FioProcess(popen, jobs, output, stderr_path, owned)


def fio_argv(jobs: Iterable[FioJob], output: str | Path, binary: str = "fio") -> list[str]:
    argv = [binary, "--output-format=json", f"--output={output}"]
    for job in jobs:
        argv += job.to_argv()
    return argv


def fio_binary() -> str:
    """The fio executable (`DRILLS_FIO_BIN` overrides the name), or a DrillError saying how to get it."""
    name = os.environ.get("DRILLS_FIO_BIN", "fio")
    found = shutil.which(name)
    if not found:
        raise DrillError("fio not found: install it with `apt-get install fio` or run `make drill` as root")
    return found


@functools.lru_cache(maxsize=None)
def available_ioengines() -> tuple[str, ...]:
    """The I/O engines this fio was built with (`fio --enghelp`)."""
    out = subprocess.run([fio_binary(), "--enghelp"], capture_output=True, text=True, timeout=30).stdout
    return tuple(line.strip() for line in out.splitlines()[1:] if line.strip())


@functools.lru_cache(maxsize=None)
def default_ioengine() -> str:
    """libaio when fio has it (real queue depth with direct I/O), else the portable psync."""
    try:
        return "libaio" if "libaio" in available_ioengines() else "psync"
    except DrillError:
        return "psync"


def supports_direct(directory: str | Path) -> bool:
    """Whether files in `directory` can be opened with O_DIRECT (some tmpfs and overlay cannot)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    fd, probe = tempfile.mkstemp(prefix=".drills-odirect-", dir=directory)
    os.close(fd)
    try:
        os.close(os.open(probe, os.O_RDWR | flag))
        return True
    except OSError:
        return False
    finally:
        os.unlink(probe)


# helpers

def _prepare(job: FioJob) -> FioJob:
    """Make sure the job's directory is writable; drop direct=1 (with a warning) where O_DIRECT fails."""
    directory = Path(job.directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=".drills-probe-", dir=directory):
            pass
    except OSError as err:
        raise DrillError(f"fio directory {directory} is not writable: {err.strerror or err}") from None
    if job.direct and not supports_direct(directory):
        log.warning("O_DIRECT is not supported in %s: fio job %s runs buffered", directory, job.name)
        return replace(job, direct=False)
    return job


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _error_line(stderr: str, output: str, returncode: int | None) -> str:
    """fio's own messages as one line (its error lines joined), else its last line, else the exit code."""
    lines = [ln.strip() for ln in (stderr + "\n" + output.split("{", 1)[0]).splitlines() if ln.strip()]
    errors = [ln.removeprefix("fio:").strip() for ln in lines
              if ln.startswith("fio:") or "error" in ln.lower() or "err=" in ln]
    picked = list(dict.fromkeys(errors))[-3:] or lines[-1:] or [f"exit code {returncode}"]
    line = "; ".join(picked)
    return line if len(line) <= 300 else line[:297] + "..."
