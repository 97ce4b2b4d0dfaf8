"""NCCL's network and the errors a training log prints, read record by record (a part of `LogReader`).

- **Transport** from every shape NCCL prints (`NET/IB : Using [0]mlx5_0:1/RoCE`, `Using network IBext`,
  `P2P plugin IBext`, per-channel `via NET/Socket/3`, `NET/IB : No device found.`), per process (host:pid)
  and rank (NCCL ≤ 2.3: `Using internal Network Socket`, devices one a line `NET/IB: [0] mlx5_0:1/IB`). NCCL 2.4 printed `NET/Socket : Using` for its bootstrap even over IB, so that line alone decides
  nothing when the log says NCCL < 2.5 (or prints 2.4's `NET/Plugin : No plugin found (libnccl-net.so).`).
  Any rank on Socket is a fallback. `P2P plugin IBext` is printed as the plugin loads, before it looks for a
  device: a later `NET/IB : No device found` / `NET/Socket : Using` overrides it. An error cascade through
  `transport/net_socket.cc` shows the socket net carries the connection. A `NET/IB : Using` list without
  a device (`Using [RO]; OOB eth0` after `No device found`) names no net; merged NICs (`[0]={[0] mlx5_2:1/RoCE, …}`)
  list their ports; a socket-type plugin's interfaces (`NET/FastSocket : Using [0]ens8:10.0.0.1<0>`) name the net, not ports. One transport, one name: the plugin
  API suffix is dropped (`IBext_v8` is `IBext`), aliases folded (`AWS Libfabric` is `Libfabric`), and an IB
  verbs net (`IB`, `IBext`) whose ports on that host are all `/RoCE` is RoCE.
- **Errors**, classified: `ib_completion` (old `with error 12, opcode 0` and new `with status=12 opcode=0`
  wording), `watchdog_timeout` (SeqNum/OpType/Timeout), `comm_aborted`, `dist_backend`, `socket_closed`,
  `nccl_error` (a root-cause NCCL WARN: CUDA failure — `Cuda failure 'x'` or the driver API's `Cuda failure 1 'x'`
  —, SHARP/CollNet setup, an inconsistent ring (`ring N does not loop back to start`), an IB `collective mismatch
  error`, an injected graph naming a missing NIC (`XML Import Channel : dev 1 not found`); a `[Proxy Service N] Failed
  to execute operation …` WARN only when the log carries no other error (a pasted cascade without its root cause),
  IB async events such as `port error` and `async fatal event on QP`; any other WARN NCCL returned up its `-> N`
  cascade, and XLA's `NCCL operation … failed` reports (`logstacks`); not the events
  NCCL only reports: `port active`, `client reregistration`, LID/SM/P_Key changes), `heartbeat_timeout` (PyTorch's
  heartbeat monitor: the watchdog itself hung and the process is killed). A watchdog timeout repeated for
  the same rank and SeqNum is one error; the same root-cause WARN from several processes is one error; a
  watchdog message a terminal hard-wrapped over lines is joined back; interleaved `terminate called` lines
  before one `what():` are one termination.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from drills.measure.logerror import LogError
from drills.measure.logformats import TrainingEvent
from drills.measure.logprefix import Record
from drills.measure.logstacks import xla_nccl_failure

__all__ = ["NcclProcess", "LogError", "NcclReading"]


_NET_USING = re.compile(r"^NET/(?!Plugin)(?P<name>\w+)\s*: Using (?P<rest>.*)$")
_USING_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<name>\S.*?)\s*$")  # NCCL <= 2.3: `Using internal Network IB`
_NET_IB_DEV_23 = re.compile(r"^NET/IB: \[\d+\] (?P<dev>\S+)\s*$")  # NCCL <= 2.3 lists one device a line: `NET/IB: [0] mlx5_0:1/IB`
_P2P_PLUGIN = re.compile(r"^P2P plugin (?:v\d+ )?(?P<name>\w+)")
# `0[0] -> 1[0] [send] via NET/IB/4/GDRDMA`; old aws-ofi-nccl: `7 -> 8 [send] via NET/AWS Libfabric/0` (no busid)
_VIA_NET = re.compile(r"(?:^|\s)(?P<a>\d+)(?:\[[0-9a-fx]+\])? -> (?P<b>\d+)(?:\[[0-9a-fx]+\])?.*?"
                      r"via NET/(?P<name>[^/]+?)/\d+")
_NO_IB = re.compile(r"^NET/IB\s*: No device found")
_PLUGIN_24 = re.compile(r"^NET/Plugin : No plugin found \(libnccl-net\.so\)\.$")  # NCCL 2.4's wording (2.5 adds ', using …')
_NET_SOCKET_FRAME = re.compile(r"^transport/net_socket\.cc:\d+ -> \d+")  # an error cascade through the socket net
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")
_SHARP_DEV = re.compile(r"Sharp rank \d+/\d+ initialized on (?P<dev>\S+)")
_HCA = re.compile(r"\bhca (?P<dev>[A-Za-z]\w*)")  # `hca mlx5_10`, `hca ibp152s0`
_NET_API = re.compile(r"_v\d+$")  # `IBext_v8`: the plugin API version, not another net
_NET_ALIASES = {"AWS Libfabric": "Libfabric"}  # aws-ofi-nccl's older name for the same net
_VERBS_NETS = ("IB", "IBext")  # nets over IB verbs: RoCE when every port they list is /RoCE


def _net_name(name: str) -> str:
    """The transport a NET name stands for: `IBext_v8` → `IBext`, `AWS Libfabric` → `Libfabric`."""
    name = _NET_API.sub("", name.strip())
    return _NET_ALIASES.get(name, name)


def _devices(rest: str) -> tuple[str, ...]:
    """The entries of a `NET/<net> : Using` list: `[0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB eth0:…` →
    ("mlx5_10:1/RoCE", "mlx5_11:1/RoCE"); merged NICs (`[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]={…}`) → their
    ports; a socket-type plugin's interfaces (`[0]ens8:10.128.0.107<0>`) are entries too (see `_ports`)."""
    head = rest.split(";")[0]
    return tuple(m.group(1) for m in re.finditer(r"\[\d+\] ?([^\s,{}\[\]=]+)", head))


def _ports(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The NIC ports of a list (`mlx5_0:1/IB`), not interfaces with an address (`ens8:10.128.0.107<0>`)."""
    return tuple(e for e in entries if "<" not in e)


@dataclass
class NcclProcess:
    """What one NCCL process (host:pid) said about its network."""

    host: str
    pid: int | None
    rank: int | None = None  # its global rank, from a launcher prefix or its channel lines
    name: str | None = None  # strong: Using network / channel lines / NET/IB : Using
    plugin: str | None = None  # `P2P plugin IBext`: printed as the plugin loads, before it finds a device
    weak_socket: bool = False  # `NET/Socket : Using` (decides only when the NCCL version is ≥ 2.5 or unknown)
    no_ib: bool = False  # `NET/IB : No device found.`
    bootstrap: bool = False  # printed `Bootstrap : Using` (NCCL ≥ 2.5)
    pre25: bool = False  # printed NCCL 2.4's `NET/Plugin : No plugin found (libnccl-net.so).`
    channel_socket: bool = False  # a channel went via NET/Socket, or an error cascade ran through net_socket.cc
    devices: tuple[str, ...] = ()
    # the NET/IB ports any process of this host listed (one list shared by its processes): a process that
    # names IBext without printing the list runs over the same ports
    host_ports: list[str] = field(default_factory=list, repr=False, compare=False)

    def transport(self, version: tuple[int, ...] | None) -> str | None:
        """IB | RoCE | IBext | Socket | … (the NET plugin NCCL uses), None when the lines do not say."""
        if self.channel_socket:
            return "Socket"
        name = self.name
        if name is None:
            modern = self.bootstrap or (not self.pre25 and (version is None or version >= (2, 5)))
            if self.no_ib or (self.weak_socket and modern):
                return "Socket"
            if self.plugin is None:
                return None
            name = self.plugin
        ports = [d for d in self.devices if "/" in d] or [d for d in self.host_ports if "/" in d]
        if name in _VERBS_NETS and ports and all(d.split("/")[1] == "RoCE" for d in ports):
            return "RoCE"
        return name

    @property
    def label(self) -> str:
        if self.host:
            return self.host
        return f"rank{self.rank}" if self.rank is not None else f"pid{self.pid}"


_IB_COMPLETION = re.compile(
    r"Got completion (?:from peer (?P<peer>\S+) )?with (?:status=(?P<status>\d+)|error (?P<error>\d+)),?"
    r"\s*opcode[= ](?P<opcode>\d+),?\s*len[= ](?P<len>\d+),?\s*vendor err (?P<vendor>\d+)(?: \((?P<dir>\w+)\))?")
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\((?P<args>.*?)\)\s*ran for "
                       r"(?P<ran>\d+) milliseconds")
_RANK_IN = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]")
# the watchdog's verdict for its rank (PyTorch ≥ 2.3), after the timeout line — the only one left when that was cut away
_LAUNCHER_RANK = re.compile(r"\[rank(?P<r>\d+)\]:")  # torchrun's `--tee` prefix, where a wrapper left it in the body
_WATCHDOG_EXC = re.compile(r"Exception \(either an error or timeout\) detected\s*by watchdog at work: (?P<seq>\d+)")
# the watchdog found NCCL's asynchronous error on a collective (not a timeout; pytorch#149984): `Collective
# WorkNCCL(SeqNum=2, OpType=ALLREDUCE, …) raised the following async exception: NCCL error: unhandled system error`;
# TensorFlow/HybridBackend's `NCCL communication aborted: unhandled system error`
_ASYNC_EXC = re.compile(r"WorkNCCL\((?P<args>.*?)\) raised the following async exception: |"
                        r"NCCL communication aborted: ")
_COMM_ABORTED = re.compile(r"NCCL communicator was aborted(?: on rank (?P<rank>\d+))?|[Cc]ommunicator (?:was )?aborted")
# no closing quote: interleaved terminate lines glue the type to the next process's text (`…DistBackendErrorterminate …`)
# (PyTorch < 2.0 raised the same report, `NCCL error in: <file>:<line>, <result>, NCCL version X`, as a RuntimeError)
_DIST_BACKEND = re.compile(r"instance of 'c10::DistBackendError|(?:torch\.distributed\.)?DistBackendError: |"
                           r"^RuntimeError: NCCL error in: \S+:\d+, ")
_TERMINATE = re.compile(r"terminate called after throwing an instance of")
# the start of a watchdog message that a terminal hard-wrapped (`… Watchdog caught colle` / `ctive operation …`)
_WATCHDOG_START = re.compile(r"Watchdog caught|watchdog thread terminated with exception|WorkNCCL\(|"
                             r"Exception \(either an error or timeout\)(?! detected\s*by watchdog at work)")
# async events NCCL only reports (net_ib.cc lists them as non-fatal): not port error, CQ/QP/device errors
_IB_EVENT_INFO = ("port active", "LID change", "P_Key change", "SM change", "client reregistration", "GID table change",
                  "send queue drained", "path migrated", "last WQE reached", "SRQ limit reached",
                  "communication established")
_SOCKET_CLOSED = re.compile(r"Connection closed by remote peer(?: (?P<peer>\S+)|$)")  # NCCL <= 2.2: no peer
# an NCCL WARN of a socket call the peer broke (`Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe`)
_SOCKET_BROKEN = re.compile(r"Call to (?:recv|send) (?:from|to) (?P<peer>\S+) failed : (?:Broken pipe|Connection reset by peer)")
# PyTorch's heartbeat monitor: `[PG 0 Rank 1] Heartbeat monitor timed out!`, `… watchdog got stuck for 600 seconds`
_HEARTBEAT = re.compile(r"Heartbeat monitor timed out!|ProcessGroupNCCL's watchdog got stuck for \d+ seconds|"
                        r"NCCL monitor thread timeout")
_NCCL_ROOT = re.compile(r"Cuda failure (?:\d+ )?'|CUDA error|SHARP group create|Call to ibv_\w+ failed|"
                        r"NET/IB : (?:req \S+ tag \S+ peer \S+ )?collective mismatch error|"  # net_ib.cc: ncclInvalidUsage (old: no req)
                        r"XML Import Channel : dev \d+ not found|"  # an injected NCCL_GRAPH_FILE names a missing NIC
                        r"Error : ring \d+ does not (?:loop back to start|contain rank)|"  # graph/rings.cc: ncclInternalError
                        r"NET/IB\s*: (?:\S+:\d+ )?(?:Got async (?:error )?event ?: (?!" + "|".join(_IB_EVENT_INFO) + r")|"
                        r"async fatal event)|"
                        r"unhandled (?:cuda|system) error|Failed to (?:open|query) (?!libibverbs).*ibv|NET/OFI Couldn't |"
                        r"is neither AF_INET")
# the IB async thread's poll failing right after the device reported a fatal event (`local catastrophic error`): the
# event's consequence (the device is gone), not a second root cause (nccl#230)
_ASYNC_POLL_FAILED = re.compile(r"Call to ibv_get_async_event failed")
_IB_ASYNC_EVENT = re.compile(r"Got async (?:error )?event|async fatal event")
# a proxy-service request failed: the consequence of a root-cause WARN; the only NCCL error when the log has no other
_PROXY_FAILED = re.compile(r"\[Proxy Service \d+\] Failed to execute operation \w+ from rank \d+, retcode \d+")
# IPython (a notebook) names the exception before the header: `RuntimeError      Traceback (most recent call last)`
_TB_START = re.compile(r"^\s*Traceback \(most recent call last\):|^(?P<ipy>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$")
_TB_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TB_CHAIN = re.compile(r"^(?:During handling of the above exception, another exception occurred:|"
                       r"The above exception was the direct cause of the following exception:)")
_EXC_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)|"
                       r"[A-Za-z_][\w.]*\.\w*Error|AssertionError|KeyError|StopIteration)(?::\s?(?P<msg>.*))?$")


class NcclReading:
    """The NCCL and error part of `LogReader` (its state lives on the reader: procs, version, errors, …; an
    error while a resume is pending fails it, through `CheckpointReading._fail`)."""

    _ib_fatal_hosts: set  # hosts whose HCA reported an IB async error event (its poll failing next is its consequence)

    def _proc(self, rec: Record) -> NcclProcess:
        key = (rec.host or "", rec.pid)
        p = self.procs.get(key)
        if p is None:
            ports = next((q.host_ports for q in self.procs.values() if rec.host and q.host == rec.host), [])
            p = self.procs[key] = NcclProcess(rec.host or "", rec.pid, rec.rank, host_ports=ports)
        elif rec.rank is not None:
            p.rank = rec.rank
        return p

    def _nccl(self, rec: Record) -> list[TrainingEvent]:
        msg = rec.body
        p = self._proc(rec)
        before = p.transport(_version_tuple(self.version))
        if rec.nccl == "INFO":
            if m := _NET_USING.match(msg):
                entries = _devices(m.group("rest"))
                devices = _ports(entries)
                if m.group("name") == "Socket":
                    p.weak_socket = True
                elif entries:  # an empty list (`Using [RO]; OOB eth0`, after `No device found`) names no net
                    if p.name is None:
                        # the plugin's own list; after `No device found` the list is the internal IB net's
                        p.name = p.plugin if p.plugin and not p.no_ib else _net_name(m.group("name"))
                    p.devices = tuple(dict.fromkeys(p.devices + devices))
                    p.host_ports.extend(d for d in devices if d not in p.host_ports)
            elif m := _USING_NETWORK.match(msg):
                p.name = _net_name(m.group("name"))
            elif m := _NET_IB_DEV_23.match(msg):
                if m.group("dev") not in p.devices:
                    p.devices = p.devices + (m.group("dev"),)
                    p.host_ports.append(m.group("dev"))
            elif m := _P2P_PLUGIN.match(msg):
                p.plugin = _net_name(m.group("name"))
            elif _NO_IB.match(msg):
                p.no_ib = True
            elif _PLUGIN_24.match(msg):
                p.pre25 = True
            elif _NET_SOCKET_FRAME.match(msg):
                p.channel_socket = True
            elif msg.startswith("Bootstrap : Using") or msg.startswith("Bootstrap: Using"):
                p.bootstrap = True
            elif m := _VIA_NET.search(msg):
                if m.group("name") == "Socket":
                    p.channel_socket = True
                elif p.name is None or p.name == "Socket":
                    p.name = _net_name(m.group("name"))
                if p.rank is None:
                    local = m.group("b") if "[receive]" in msg else m.group("a")
                    p.rank = int(local)
            elif m := _SHARP_DEV.search(msg):
                if m.group("dev") not in p.devices:
                    p.devices = p.devices + (m.group("dev"),)
        elif rec.nccl == "WARN":
            if m := _HCA.search(msg):
                if m.group("dev") not in p.devices:
                    p.devices = p.devices + (m.group("dev"),)
        after = p.transport(_version_tuple(self.version))
        if after is not None and (after != before or _is_transport_line(msg)):
            return [self._ev("nccl_transport", rec, transport=after, devices=p.devices,
                             text=f"{p.host}:{p.pid}" if p.pid is not None else p.host, rank=p.rank)]
        if rec.nccl == "WARN":
            return [self._ev("nccl_warn", rec, text=msg.strip(), rank=p.rank)]
        return []

    # errors
    def _errors(self, rec: Record) -> list[TrainingEvent]:
        body = self._unwrap(rec.body)
        if "what():" in body:  # the message of a C++ termination: the next `terminate called` is another one
            self._terminate_open = False
        err: LogError | None = None
        if m := _IB_COMPLETION.search(body):
            err = LogError("ib_completion", body.strip(), rec.at, rec.host, rec.rank,
                           status=int(m.group("status") or m.group("error")), vendor_err=int(m.group("vendor")),
                           peer=m.group("peer"))
        elif (m := _COMM_ABORTED.search(body)) and "Connection closed" not in body:
            err = LogError("comm_aborted", body.strip(), rec.at, rec.host,
                           int(m.group("rank")) if m.group("rank") else rec.rank)
            w = _WATCHDOG.search(body)
            if w:
                _fill_watchdog(err, w, body)
        elif _DIST_BACKEND.search(body):
            if _TERMINATE.search(body):  # interleaved `terminate called` lines before one what(): one termination
                if self._terminate_open:
                    return []
                self._terminate_open = True
            err = LogError("dist_backend", body.strip(), rec.at, rec.host, rec.rank)
        elif m := _ASYNC_EXC.search(body):
            err = LogError("nccl_error", body.strip(), rec.at, rec.host, rec.rank)
            if m.group("args") is not None:
                _fill_watchdog(err, m, body)
        elif m := _WATCHDOG.search(body):
            err = LogError("watchdog_timeout", body.strip(), rec.at, rec.host, rec.rank)
            _fill_watchdog(err, m, body)
            key = (err.rank, err.seq, err.op_type, err.timeout_ms)
            if key in self._seen_watchdog:
                return []
            self._seen_watchdog.add(key)
            verdicts = self.__dict__.setdefault("_watchdog_by_proc", {})  # (process, SeqNum) → its error
            if (verdict := verdicts.get(_proc_key(body, rec, err))) is not None and verdict.op_type is None:
                verdict.op_type, verdict.timeout_ms, verdict.ran_ms = err.op_type, err.timeout_ms, err.ran_ms
                return []  # the verdict line came first: one failure, now with the timeout's fields
            verdicts[_proc_key(body, rec, err)] = err
        elif m := _WATCHDOG_EXC.search(body):
            ranks = [int(x.group("rank")) for x in _RANK_IN.finditer(body[: m.start()])]
            err = LogError("watchdog_timeout", body.strip(), rec.at, rec.host, ranks[-1] if ranks else rec.rank,
                           seq=int(m.group("seq")))
            verdicts = self.__dict__.setdefault("_watchdog_by_proc", {})
            if _proc_key(body, rec, err) in verdicts:  # that process's timeout (or verdict) was read: the same failure
                return []
            verdicts[_proc_key(body, rec, err)] = err
        elif m := _HEARTBEAT.search(body):
            ranks = [int(x.group("rank")) for x in _RANK_IN.finditer(body[: m.start()])]
            err = LogError("heartbeat_timeout", body.strip(), rec.at, rec.host, ranks[-1] if ranks else rec.rank)
            key = ("heartbeat", rec.rank, err.rank)  # the [E] line and the FATAL line of one rank are one event
            if key in self._seen_watchdog:
                return []
            self._seen_watchdog.add(key)
        elif ((m := _SOCKET_CLOSED.search(body)) and rec.nccl in (None, "WARN")) or \
                (rec.nccl == "WARN" and (m := _SOCKET_BROKEN.search(body))):
            err = LogError("socket_closed", body.strip(), rec.at, rec.host, rec.rank, peer=m.group("peer"))
        elif rec.nccl == "WARN" and _NCCL_ROOT.search(body):
            if body.strip() in self._seen_root:  # the same root cause from several processes is one error
                return []
            if _ASYNC_POLL_FAILED.search(body) and rec.host in self._ib_fatal_hosts:
                self._seen_root.add(body.strip())
                return []
            if _IB_ASYNC_EVENT.search(body):
                self._ib_fatal_hosts.add(rec.host)
            self._seen_root.add(body.strip())
            err = LogError("nccl_error", body.strip(), rec.at, rec.host, rec.rank)
        elif rec.nccl is None and (xla := xla_nccl_failure(body)):  # XLA's report of a failed NCCL call
            if xla in self._seen_root:
                return []
            self._seen_root.add(xla)
            err = LogError("nccl_error", body.strip(), rec.at, rec.host, rec.rank)
        warn = self._propagated.feed(rec, classified=err is not None)
        if err is None and warn is not None and warn.body.strip() not in self._seen_root:  # a WARN NCCL returned
            self._seen_root.add(warn.body.strip())
            return self._add_error(LogError("nccl_error", warn.body.strip(), warn.at, warn.host, warn.rank), warn)
        if err is None:
            if rec.nccl == "WARN" and self._proxy_failure is None and _PROXY_FAILED.search(body):
                self._proxy_failure = rec
            return []
        if err.kind == "comm_aborted" and err.seq is not None:
            self._seen_watchdog.add((err.rank, err.seq, err.op_type, err.timeout_ms))
        return self._add_error(err, rec)

    def _unexplained_proxy_failure(self) -> list[TrainingEvent]:
        """End of the stream: a `[Proxy Service N] Failed to execute operation …` WARN whose root cause the log does
        not carry (only the `-> N` cascade was pasted) is the NCCL error; with any other error it is a consequence."""
        rec = self._proxy_failure
        if rec is None or any(e.kind not in ("traceback", "worker_exit") for e in self.errors):
            return []
        return self._add_error(LogError("nccl_error", rec.body.strip(), rec.at, rec.host, rec.rank), rec)

    def _unwrap(self, body: str) -> str:
        """A watchdog message hard-wrapped by a terminal (cut mid-word at a fixed width) joined back: its
        start is held for up to two following lines until the joined text reads as one message."""
        held, self._wrapped = self._wrapped, None
        if held is not None and not _WATCHDOG.search(body):
            text, lines = held
            if _WATCHDOG.search(text + body) or _WATCHDOG_EXC.search(text + body):
                return text + body
            if lines < 2:
                self._wrapped = (text + body, lines + 1)
        elif _WATCHDOG_START.search(body) and not _WATCHDOG.search(body):
            self._wrapped = (body, 1)
        return body

    def _add_error(self, err: LogError, rec: Record | None) -> list[TrainingEvent]:
        self.errors.append(err)
        out = [self._ev("error", rec, text=f"{err.kind}: {err.detail}", error=err.kind, rank=err.rank)]
        if err.kind in ("watchdog_timeout", "heartbeat_timeout", "ib_completion", "socket_closed", "comm_aborted",
                        "nccl_error") \
                and rec is not None and rec.nccl != "WARN":  # a WARN line is already an nccl_warn
            out.append(self._ev("nccl_warn", rec, text=err.text, rank=err.rank))
        for r in self.resumes:  # an error while a resume is pending: the resume failed
            if r.state == "pending" and err.kind != "traceback":
                out += self._fail(r, f"{err.kind}: {err.detail}", rec)
        return out


def _is_transport_line(msg: str) -> bool:
    return bool(_NET_USING.match(msg) or _USING_NETWORK.match(msg) or _P2P_PLUGIN.match(msg) or _NO_IB.match(msg))


def _proc_key(body: str, rec: Record, err: LogError) -> tuple:
    """The process a watchdog line is about, and its collective: the launcher's rank prefix when there is one (the
    `[PG … Rank N]` inside is the rank in that process group, and the two lines of one process may name it differently)."""
    m = _LAUNCHER_RANK.search(body)
    return (rec.host, int(m.group("r")) if m else rec.rank if rec.rank is not None else err.rank, err.seq)


def _fill_watchdog(err: LogError, m: re.Match[str], body: str) -> None:
    args = dict(re.findall(r"(\w+(?:\(ms\))?)=([^,\s)]+)", m.group("args")))
    err.seq = int(args["SeqNum"]) if "SeqNum" in args else None
    err.op_type = args.get("OpType")
    err.timeout_ms = int(args["Timeout(ms)"]) if "Timeout(ms)" in args else None
    err.ran_ms = int(m.group("ran")) if m.groupdict().get("ran") else None
    ranks = [int(x.group("rank")) for x in _RANK_IN.finditer(body[: m.start()])]
    if ranks:
        err.rank = ranks[-1]


def _is_nccl_exception(line: str) -> bool:
    return bool(_COMM_ABORTED.search(line) or _DIST_BACKEND.search(line) or _WATCHDOG.search(line)
                or _HEARTBEAT.search(line) or _ASYNC_EXC.search(line))


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in version.split(".")) if version else None
