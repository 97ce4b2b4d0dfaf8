"""Log records as launchers and Kubernetes print them: prefixes peeled, several records per line split.

- **Prefixes** are peeled off in any order and nesting: the Kubernetes `--timestamps` stamp, launcher
  rank prefixes (`[N] `, `[rankN]:`, `[1,N]<stdout>:`, SLURM `N: `, pdsh `host-N: `/`10.0.0.1: `, Ray/vLLM
  `(Worker pid=N) `, `(pid=N, ip=…) `), a log shipper's stamps (`2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] `),
  syslog/journald's `Aug 19 18:34:30 host unit[pid]: `, mpirun's `--timestamp-output` stamp, a paste's `> ` quote and
  a stored copy's auto-links (`[net_ib.cc:101](http://net_ib.cc:101/)` is `net_ib.cc:101`),
  stray ANSI colour codes, then NCCL's own `host:pid:tid [dev]` prefix (NCCL <= 2.2: without the `NCCL` keyword;
  when a paste cut it, a bare `file:line NCCL WARN …`).
- **Several records per line**: tqdm redraws (`\\r`) and log records glued to the end of a progress bar
  (`…3.53it/s][INFO|trainer.py:2103] …`, `…v_num=95nc][E ProcessGroupNCCL.cpp:458] …`) are split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["Record", "split_records", "split_timestamp"]

# RFC 3339 (Kubernetes `--timestamps`); mpirun's `--timestamp-output` prints the same stamp with a colon after it
_K8S_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})):? ")


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """Split a Kubernetes `timestamps=true` prefix (RFC 3339, nanoseconds allowed) from the message."""
    match = _K8S_STAMP.match(line)
    if not match:
        return None, line
    stamp = match.group(1).replace("Z", "+00:00")
    head, _, rest = stamp.partition(".")
    if rest:  # Python keeps microseconds: cut nanoseconds, keep the offset
        digits = re.match(r"\d+", rest).group(0)
        stamp = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits):]}"
    return datetime.fromisoformat(stamp).astimezone(timezone.utc), line[match.end():]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|^\[\d{1,2}(?:;\d+)?m")
_MPI = re.compile(r"\[\d+,(\d+)\]<(?:stdout|stderr)>:\s?")
_TORCHRUN = re.compile(r"\[(?:rank|default)(\d+)\]:\s?")
_TORCHX = re.compile(r"[a-z][\w-]*/\d+ \[(\d+)\]:\s?")  # TorchX's `role/replica [local rank]:` (`trainer/0 [1]:`)
_BRACKET = re.compile(r"\[(\d+)\] ")
# V1 `(VllmWorker rank=3 pid=N)`; Ray tasks without an actor name: `(pid=N)`, `(pid=N, ip=10.0.0.5)`; Ray Data
# actors with parentheses in the name: `(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=N)`
_PROC = re.compile(r"\((?:(\w+(?:\([\w()]*\))?)(?: rank=\d+)? )?pid=(\d+)(?:, ip=[\d.]+)?\)(?: |$)")
_SLURM = re.compile(r"(\d{1,5}): ")
# syslog / `journalctl` short format: `Aug 19 18:34:30 host unit[pid]: ` (a month of the host's locale: `авг 18 …`)
# a ctime stamp, which Open MPI's --timestamp-output glues to the tag (`Fri Aug 11 12:31:45 2023[1,0]<stdout>:`)
_CTIME = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?: |(?=\[\d+,\d+\]<))")
_SYSLOG = re.compile(r"(?:[A-Z][a-z]{2}|[а-яё]{3})\s{1,2}\d{1,2} \d\d:\d\d:\d\d [\w.-]+ [\w.@/-]+(?:\[\d+\])?: ")
# a paste's markdown quote (`> ` before every line), nemo-run's task tag before torchrun's (`i.pretrain/0 [default2]:`),
# a wrapper that names the stream each line came from (`stderr: ERROR:torch.distributed…`)
_QUOTE = re.compile(r">(?: |$)|[\w.-]+/\d+ (?=\[(?:default|rank)\d+\]:)|(?:stdout|stderr): ")
# a stored copy that turned file names and addresses into links: `[net_ib.cc:101](http://net_ib.cc:101/)`
_AUTOLINK = re.compile(r"\[([^\]\s]+)\]\(https?://\1/?\)")
# pdsh: `10.0.0.1: `, `rdma-test-gpu-worker-1: `, or a bare hostname repeated by the NCCL prefix (`gpu1505: gpu1505:…`)
_PDSH = re.compile(r"((?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w.-]*-\d+|(?P<h>[A-Za-z][\w-]*)(?=: (?P=h)[.:])): (?!\d)")
# a log shipper's stamp with its zone (`2025-11-09 15:39:31.043 +08:00 `), a bracketed stamp (`[2025-11-09 07:39:30] `,
# Buildkite's `[2025-03-10T15:07:20Z] `), a slash-dated collector stamp, a collector's stamp and pod (`2026-01-09 17:40:26.049709 master-0 >> `); a web viewer's gutter before it (`  | [2025-…`); docker compose's
# service prefix (`vllm-1  | `, v1 `vllm_1  | `)
_SHIPPER = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ (?:[+-]\d\d:\d\d|[A-Za-z][\w.-]* >>) |"
                      r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (?=\S)|"  # a job platform's collector (`2023/10/26 12:12:06 `)
                      r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\dZ?\] |"
                      r"\s+\| (?=\[\d{4}-)|[A-Za-z][\w.-]*[-_]\d+\s+\| ")
# the pid/tid may be redacted by whoever pasted the log (`host-01.example.com:XXXXXX [5] …`), the hostname deleted
# with a colon left (`::16674:17023 [0] …`); a plugin's source may be a function signature (`tcpxResult_t f(T*):1231`)
_NCCL = re.compile(r"(?P<host>[^\s:\[\]]*)::?(?:(?P<pid>\d+):(?P<tid>\d+)|[Xx*]+(?::[\dXx*]+)?) \[(?P<dev>\d+)\] "
                   r"(?:(?P<src>\S+(?: \S+)?) )?NCCL (?P<level>INFO|WARN|TRACE|ERROR)\b ?(?P<msg>.*)$")
# NCCL <= 2.2 printed no `NCCL` keyword: `host:pid:tid [0] INFO Using internal Network Socket`,
# `host:pid:tid [0] include/socket.h:196 WARN Connection closed by remote peer`
_NCCL_OLD = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:\S+:\d+ )?"
                       r"(?P<level>INFO|WARN) (?P<msg>.*)$")
# an NCCL record whose `host:pid:tid [dev]` prefix was cut by whoever pasted it: only `file:line NCCL WARN …` is left
_NCCL_BARE = re.compile(r"(?P<src>(?:\S+ )?\S+:\d+) NCCL (?P<level>INFO|WARN|TRACE|ERROR)\b ?(?P<msg>.*)$")
# a log record glued to the end of a tqdm bar: `…it/s][INFO|…`, `…][E ProcessGroupNCCL.cpp:458] …`
# a paste that lost its newlines: each record's vLLM process prefix glued to the previous one (`…(response)(APIServer pid=1)`)
_GLUE = re.compile(r"(?<=\])(?=\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\||\[[EWI]\d* [\w.:]+\.cpp:\d+\]|"
                   r"\[[EWI]\d{3,4} \d|\[rank\d+\]:|\[\d{4}-\d\d-\d\d \d\d:)|"
                   r"(?<=\S)(?=\((?:APIServer|EngineCore\w*|VllmWorker\w*|Worker_TP\w*) pid=\d+\))")


@dataclass(frozen=True)
class Record:
    """One log record after its prefixes are peeled off."""

    body: str  # the message (for NCCL lines: after `NCCL INFO `/`NCCL WARN `)
    at: datetime | None = None  # Kubernetes timestamp
    rank: int | None = None  # from a launcher prefix
    host: str | None = None  # NCCL host:pid:tid prefix
    pid: int | None = None
    dev: int | None = None
    nccl: str | None = None  # INFO | WARN | … for NCCL lines
    proc: str | None = None  # Ray / vLLM process prefix name (EngineCore, VllmWorkerProcess …)
    raw: str = ""
    tid: int | None = None  # NCCL host:pid:tid prefix: the thread (a WARN and its `-> N` cascade share it)
    proc_pid: int | None = None  # the Ray / vLLM process prefix's pid (`(VllmWorker rank=3 pid=268) `)


def split_records(line: str) -> list[Record]:
    """The records one raw line holds (tqdm `\\r` redraws and glued log records split), prefixes peeled."""
    line = line.rstrip("\r\n")
    at, rest = split_timestamp(line)
    out: list[Record] = []
    for part in rest.split("\r"):
        if not part.strip():
            continue
        for piece in _GLUE.split(part):
            if piece.strip():
                out.append(_peel(piece, at, line))
    return out


def _peel(text: str, at: datetime | None, raw: str) -> Record:
    text = _AUTOLINK.sub(r"\1", _ANSI.sub("", text))
    rank = None
    rank_strength = 0
    proc = proc_pid = None
    changed = True
    while changed:
        changed = False
        for pattern, strength in ((_MPI, 3), (_TORCHRUN, 3), (_TORCHX, 3), (_BRACKET, 2), (_SLURM, 1), (_PDSH, 0),
                                 (_SHIPPER, 0), (_SYSLOG, 0), (_CTIME, 0), (_QUOTE, 0)):
            m = pattern.match(text)
            if m:
                if strength and strength >= rank_strength:
                    rank, rank_strength = int(m.group(1)), strength
                text = text[m.end():]
                changed = True
        m = _PROC.match(text)
        if m:
            proc = m.group(1) or proc
            proc_pid = int(m.group(2))
            text = text[m.end():]
            changed = True
        if at is None:
            stamped, rest = split_timestamp(text)
            if stamped is not None:
                at, text = stamped, rest
                changed = True
    m = _NCCL.match(text) or _NCCL_OLD.match(text)
    if m:
        pid = int(m.group("pid")) if m.group("pid") else None
        tid = int(m.group("tid")) if m.group("tid") else None
        return Record(m.group("msg"), at, rank, m.group("host"), pid, int(m.group("dev")),
                      m.group("level"), proc, raw, tid, proc_pid)
    m = _NCCL_BARE.match(text)
    if m:
        return Record(m.group("msg"), at, rank, None, None, None, m.group("level"), proc, raw, proc_pid=proc_pid)
    return Record(text, at, rank, proc=proc, raw=raw, proc_pid=proc_pid)
