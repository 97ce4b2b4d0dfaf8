"""NCCL, PyTorch and driver lines the twin's training workers print, shaped after the real ones in
`tests/data/real/logs/` (the framework's own lines — steps, saves, resumes — are in `trainlogs`).

Pure functions: they only format. NCCL lines follow NCCL's `NCCL_DEBUG=INFO` shape
(`host:pid:tid [dev] NCCL INFO …`, per-channel `Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0`),
PyTorch's watchdog line its ProcessGroupNCCL message. Fabric events print what NCCL prints for them: a link
on the path down or back (IB async events `port error` / `port active`), retries exhausted (completion
`status=12`), a dead peer (socket closed); a reroute or an ECMP rebalance prints nothing (NCCL does not log
them). Only a real NCCL timeout says "timeout".
"""

from __future__ import annotations

import logging
import re
import zlib

__all__ = [
    "Worker", "nccl_init", "async_event", "retry_exceeded", "watchdog_timeout", "socket_fallback", "peer_lost_warn",
    "gpu_xid", "driver_xid", "torch_cuda_warning",
]

log = logging.getLogger(__name__)


class Worker:
    """Who prints: host (node), worker index, pod IP, a pid stable for one container instance; each worker is
    its node's local rank 0, so its global rank is `rank × gpus` and `nworkers` workers make the ring."""

    def __init__(self, host: str, rank: int, ip: str, uid: str = "", gpus: int = 8, nworkers: int = 1):
        self.host, self.rank, self.ip = host, rank, ip or "10.128.0.2"
        self.gpus, self.nworkers = max(1, gpus), max(1, nworkers)
        self.pid = 40 + zlib.crc32(uid.encode()) % 9000

    @property
    def grank(self) -> int:
        return self.rank * self.gpus

    @property
    def tag(self) -> str:
        """torchrun's per-rank prefix (`--tee 3`), on every line this worker prints."""
        return f"[rank{self.grank}]:"

    def prefix(self, tid: int | None = None, src: str = "") -> str:
        return f"{self.host}:{self.pid}:{self.pid if tid is None else tid} [0]" + (f" {src}" if src else "")


def nccl_init(w: Worker, transport: str, hcas: list[str], socket_ifname: str, nranks: int, version: str,
              rdma_kind: str = "RoCE", bootstrap: bool = True, ib_lost: bool = False) -> list[str]:
    """What NCCL prints when a communicator comes up; `transport` is "IB" or "Socket" (shapes:
    nccl-2.19-roce-ro-init.log, nccl-2.21-plugin-internal-eth0.log, nccl-launcher-prefix-socket-channels.log).
    `ib_lost`: NCCL looked for its HCAs and found none (`NET/IB : No device found.`; from 2.27 on it then
    prints an empty `NET/IB : Using [RO]; OOB …` list before the socket lines:
    nccl-2.27-ib-no-device-empty-list-socket.log)."""
    p, q = w.prefix(), w.prefix(w.pid + 72)
    oob = f"{socket_ifname}:{w.ip}<0>"
    lines = []
    if bootstrap:
        lines += [f"{p} NCCL INFO Bootstrap : Using {oob}",
                  f"{p} NCCL INFO NET/Plugin : No plugin found, using internal implementation",
                  f"{p} NCCL INFO cudaDriverVersion 12040"]
        if w.rank == 0:
            lines.append(f"NCCL version {version}+cuda12.4")
    if transport == "IB":
        devices = " ".join(f"[{i}]{hca}:1/{rdma_kind}" for i, hca in enumerate(hcas))
        lines += [f"{q} NCCL INFO NET/IB : Using {devices} [RO]; OOB {oob}",
                  f"{q} NCCL INFO Using non-device net plugin version 0", f"{q} NCCL INFO Using network IB"]
    else:
        if ib_lost:
            lines.append(f"{q} NCCL INFO NET/IB : No device found.")
            if _vtuple(version) >= (2, 27):
                lines.append(f"{q} NCCL INFO NET/IB : Using [RO]; OOB {oob}")
        lines += [f"{q} NCCL INFO NET/Socket : Using [0]{oob}", f"{q} NCCL INFO Using network Socket"]
    comm = 0x55D0_0000_0000 + w.pid * 0x1000 + (0 if bootstrap else 0x800)
    lines.append(f"{q} NCCL INFO comm 0x{comm:x} rank {w.grank} nranks {nranks} cudaDev 0 nvmlDev 0 busId 18000 "
                 f"commId 0x{zlib.crc32((version + str(bootstrap)).encode()):x} - Init START")
    return lines + channels(w, transport, len(hcas) if transport == "IB" else 2)


def channels(w: Worker, transport: str, nchannels: int) -> list[str]:
    """The per-channel ring connections to the previous and next node (none for a one-node job)."""
    if w.nworkers < 2:
        return []
    r = w.prefix(w.pid + 75)
    prev = ((w.rank - 1) % w.nworkers) * w.gpus
    nxt = ((w.rank + 1) % w.nworkers) * w.gpus
    n = max(1, nchannels)
    dev = (lambda c: c % n) if transport == "IB" else (lambda c: 0)
    out = [f"{r} NCCL INFO Channel {c:02d}/0 : {prev}[0] -> {w.grank}[0] [receive] via NET/{transport}/{dev(c)}"
           for c in range(n)]
    out += [f"{r} NCCL INFO Channel {c:02d}/0 : {w.grank}[0] -> {nxt}[0] [send] via NET/{transport}/{dev(c)}"
            for c in range(n)]
    return out + [f"{r} NCCL INFO Connected all rings"]


def peer_lost_warn(w: Worker, peer: str) -> str:
    """A peer's process died: its socket closes (nccl-socketprogress-closed-by-peer.log, nccl-tests#166)."""
    return f"{w.prefix(w.pid + 17, 'misc/socket.cc:49')} NCCL WARN socketProgress: Connection closed by remote peer {peer}<55693>"


def async_event(w: Worker, hca: str, event: str, version: str) -> str:
    """A port event on the worker's path (`port error` when a link on it goes down, `port active` when traffic
    flows again), as NCCL's IB async thread warns of every event but COMM_EST: `NET/IB : Got async event : port
    error` up to 2.20 (tests/data/real/nccl/nccl-async-event-port-error.log, lit-llama#380), `NET/IB : mlx5_1:1 …`
    with the device and port from 2.21 (nccl-2.21-fatal-event-then-completion.log, nccl#1905)."""
    where = f"{hca}:1 " if _vtuple(version) >= (2, 21) else ""
    return f"{w.prefix(w.pid + 57, 'transport/net_ib.cc:93')} NCCL WARN NET/IB : {where}Got async event : {event}"


def retry_exceeded(w: Worker, peer_ip: str) -> str:
    """No path left to a peer: the QP's retries run out (`status=12`, transport retry counter exceeded;
    nccl-ib-completion-status12-kubeflow.log, nccl-ib-completion-newest-hca.log)."""
    return (f"{w.prefix(w.pid + 57, 'transport/net_ib.cc:2244')} NCCL WARN NET/IB : Got completion from peer "
            f"{peer_ip}<41522> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{w.ip} "
            f"remoteGids::ffff:{peer_ip}")


def watchdog_timeout(w: Worker, seq: int, timeout_s: float, ran_s: float) -> list[str]:
    """PyTorch's NCCL watchdog (nccl-watchdog-*.log shapes)."""
    ms, ran = int(timeout_s * 1000), int(ran_s * 1000)
    return [
        f"[E ProcessGroupNCCL.cpp:616] [Rank {w.grank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, "
        f"Timeout(ms)={ms}) ran for {ran} milliseconds before timing out.",
        f"[E ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {w.grank}] Exception (either an "
        f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ]


def socket_fallback(w: Worker, peer_ip: str, socket_ifname: str, nranks: int, version: str) -> list[str]:
    """RoCE without PFC: the lossy fabric drops RDMA packets until the QP's retries run out (`status=12`, as in
    nccl-ib-completion-status12-kubeflow.log), and the re-created communicator comes up on sockets."""
    return [retry_exceeded(w, peer_ip)] + nccl_init(w, "Socket", [], socket_ifname, nranks, version, bootstrap=False,
                                                    ib_lost=True)


def nvswitch_fatal(w: Worker, t: float) -> str:
    """An NVSwitch fatal error as NVIDIA Fabric Manager logs it (its user guide's `[ERROR] [tid N] detected NVSwitch
    fatal error …` shape), relayed into a worker's log by a node-health tail: no reader of this project classifies
    it, so the drill must not call the job healthy on it."""
    from datetime import datetime, timezone

    d = datetime.fromtimestamp(t, timezone.utc)
    return (f"[{d:%b %d %Y %H:%M:%S}] [ERROR] [tid 1405] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch "
            f"pci bus id 00000000:87:00.0 physical id 3 port 20 ({w.host})")


def driver_xid(w: Worker, t: float) -> str:
    """The driver's Xid as the kernel logs it, relayed into a worker's log (a node-health tail, a launcher that
    echoes dmesg): Xid 74, an NVLink error, in the wording of the line AWS's HyperPod resiliency guide injects into
    /var/log/messages to test node replacement (awsome-distributed-training, resiliency docs). The GPU reader
    classifies it (drills.measure.loggpu); the job trains on."""
    from datetime import datetime, timezone

    d = datetime.fromtimestamp(t, timezone.utc)
    return (f"{d:%b %d %H:%M:%S} {w.host} kernel: NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, "
            "NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)")


def gpu_xid(w: Worker, xid: int = 48) -> list[str]:
    """What a worker prints when its GPU fails: the CUDA error PyTorch raises in the training step (the driver's
    `NVRM: Xid` line goes to the node's kernel log, not to the container)."""
    _, cuda = _XID.get(xid, _XID[48])
    return [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 301, in train_step',
        "    loss.backward()",
        f"RuntimeError: CUDA error: {cuda}",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    ]


_XID = {  # NVIDIA's XID catalogue: driver message, what CUDA reports to the process
    13: ("Graphics Exception: ESR 0x50da30=0x1000e", "an illegal instruction was encountered"),
    31: ("Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted", "an illegal memory access was encountered"),
    48: ("An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
         "uncorrectable ECC error encountered"),
    63: ("Row remapping pending: a page retirement event was recorded", "uncorrectable ECC error encountered"),
    79: ("GPU has fallen off the bus.", "unspecified launch failure"),
    94: ("Contained: SM (0x1). RST: No, D-RST: No", "uncorrectable ECC error encountered"),
    95: ("Uncontained: FBHUB. RST: Yes, D-RST: No", "uncorrectable ECC error encountered"),
}


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def torch_cuda_warning(cause: str) -> list[str]:
    """What torch prints when CUDA cannot initialise and `torch.cuda.is_available()` answers False: Python's
    warning line for c10's `TORCH_WARN("CUDA initialization: ", …)`, then the source line it points at (shape:
    tests/data/real/cuda/torch-cuda-init-driver-too-old.log, pytorch/pytorch#162531). `cause` driver-too-old:
    the image's CUDA 12.x runtime on a node whose driver speaks CUDA 12.2 (found version 12020)."""
    assert cause == "driver-too-old", cause
    return ["/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:182: UserWarning: CUDA initialization: "
            "The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by "
            "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
            "Alternatively, go to: https://pytorch.org/ to install a PyTorch version that has been compiled with your "
            "version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)",
            "  return torch._C._cuda_getDeviceCount() > 0"]
