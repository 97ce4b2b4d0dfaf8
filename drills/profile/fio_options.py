"""The fio job options a profile may add (`storage.fio_options`), and the check that refuses the rest.

fio is a program that, given the right option, runs a command (`exec_prerun`, `exec_postrun`), writes
files anywhere (`filename`, `directory`, `write_*_log`, `write_iolog`), or reconfigures the host
(`ioscheduler`, `cgroup`). A profile may only tune the load fio puts on the store: each allowed option
has a value grammar, and a value never carries a newline, `=` or a shell character (the job-file form
is one option per line). Anything else is one InvalidProfile line at profile load.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["ALLOWED_FIO_OPTIONS", "REFUSED_FIO_OPTIONS", "IOENGINES", "INT_MAX", "check_fio_options"]

log = logging.getLogger(__name__)

_SIZE = r"\d+(?:\.\d+)?[kKmMgGtTpP]?(?:i?[bB])?"
_RATE = rf"^{_SIZE}(?:,{_SIZE}){{0,2}}$"  # rate=read[,write[,trim]]
_INT = r"^\d+$"
_BOOL = r"^[01]$"
_TIME = r"^\d+(?:\.\d+)?(?:us|ms|s|m|h)?$"
_PERCENT = r"^(?:100|\d{1,2})$"
IOENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio", "mmap", "null")

ALLOWED_FIO_OPTIONS: dict[str, str] = {  # option → regex its value must match
    "rate": _RATE, "rate_min": _RATE, "rate_iops": r"^\d+(?:,\d+){0,2}$", "rate_iops_min": r"^\d+(?:,\d+){0,2}$",
    "rate_process": r"^(?:linear|poisson)$",
    "ioengine": rf"^(?:{'|'.join(IOENGINES)})$",
    "bs": rf"^{_SIZE}(?:,{_SIZE}){{0,2}}$", "bssplit": r"^[0-9kKmMgG/:,]+$", "blockalign": rf"^{_SIZE}$",
    "size": rf"^(?:{_SIZE}|{_PERCENT}%)$", "io_size": rf"^{_SIZE}$", "nrfiles": _INT, "loops": _INT,
    "numjobs": _INT, "iodepth": _INT, "iodepth_batch_submit": _INT, "iodepth_batch_complete_min": _INT,
    "iodepth_batch_complete_max": _INT,
    "rw": r"^(?:read|write|randread|randwrite|rw|readwrite|randrw|trimwrite)$", "rwmixread": _PERCENT,
    "rwmixwrite": _PERCENT,
    "direct": _BOOL, "buffered": _BOOL, "invalidate": _BOOL, "thread": _BOOL, "refill_buffers": _BOOL,
    "runtime": _TIME, "time_based": _BOOL, "ramp_time": _TIME, "startdelay": _TIME,
    "group_reporting": _BOOL, "norandommap": _BOOL, "randrepeat": _BOOL, "randseed": _INT,
    "random_distribution": r"^(?:random|zipf:\d+(?:\.\d+)?|pareto:\d+(?:\.\d+)?|normal:\d+(?:\.\d+)?)$",
    "fsync": _INT, "fdatasync": _INT, "end_fsync": _BOOL, "fsync_on_close": _BOOL,
    "buffer_compress_percentage": _PERCENT, "dedupe_percentage": _PERCENT,
    "file_service_type": r"^(?:random|roundrobin|sequential)(?::\d+)?$",
}

REFUSED_FIO_OPTIONS: dict[str, str] = {  # why, for the options people reach for
    "exec_prerun": "runs a command", "exec_postrun": "runs a command",
    "filename": "writes outside the checkpoint store's drill folder",
    "filename_format": "writes outside the checkpoint store's drill folder",
    "directory": "writes outside the checkpoint store's drill folder (the drill sets it)",
    "opendir": "reads and writes a whole tree outside the drill folder",
    "write_bw_log": "writes log files outside the run", "write_lat_log": "writes log files outside the run",
    "write_iops_log": "writes log files outside the run", "write_hist_log": "writes log files outside the run",
    "write_iolog": "writes a file outside the run", "read_iolog": "reads and replays a file from anywhere",
    "replay_redirect": "replays I/O onto another device", "ioscheduler": "changes the host's I/O scheduler",
    "cgroup": "changes the host's cgroups", "uid": "changes identity", "gid": "changes identity",
    "trigger": "runs a command", "trigger-file": "runs a command", "trigger-remote": "runs a command",
    "unlink": "the drill cleans up its own files", "output": "the drill sets where fio reports",
}


def check_fio_options(options: dict[str, Any]) -> dict[str, Any]:
    """`options` unchanged if every name is allowed and every value fits its grammar; ValueError (one
    sentence naming the option and what to do) otherwise."""
    from drills.core.grammar import valid

    for name, value in options.items():
        key = str(name)
        if not valid("fio_option", key):  # the job file is one `name=value` a line: the name exactly, nothing else
            raise ValueError(f"fio option name {name!r} is not an option name (lowercase letters, digits, '_', no "
                             f"leading '--', no space or newline); write it as in a fio job file, e.g. rate")
        if key in REFUSED_FIO_OPTIONS:
            raise ValueError(f"fio option {name!r} {REFUSED_FIO_OPTIONS[key]}: refused; remove it (the allowed "
                             f"options are listed in the README, storage.fio_options)")
        if key not in ALLOWED_FIO_OPTIONS:
            raise ValueError(f"fio option {name!r} is not allowed; remove it or use one of {_allowed()}")
        text = str(int(value)) if isinstance(value, bool) else str(value)
        if not re.fullmatch(ALLOWED_FIO_OPTIONS[key], text):
            raise ValueError(f"fio option {key}={text!r} is not a valid {key} value; see `man fio` (e.g. "
                             f"{_EXAMPLES.get(key, 'a number')})")
        if ALLOWED_FIO_OPTIONS[key] == _INT and int(text) > INT_MAX.get(key, 1_000_000_000):
            raise ValueError(f"fio option {key}={text} is above its range (at most {INT_MAX.get(key, 1_000_000_000)})")
    return options


INT_MAX = {"numjobs": 256, "iodepth": 4096, "iodepth_batch_submit": 4096, "iodepth_batch_complete_min": 4096,
           "iodepth_batch_complete_max": 4096, "nrfiles": 100_000, "loops": 1_000_000}  # others: 10^9


_EXAMPLES = {"rate": "256k or 100m", "rate_min": "10m", "ioengine": " | ".join(IOENGINES), "bs": "1M",
             "size": "1G", "runtime": "60s", "ramp_time": "5s", "rw": "write or randrw", "direct": "0 or 1"}


def _allowed() -> str:
    return ", ".join(sorted(ALLOWED_FIO_OPTIONS))
