"""The lines the twin's training workers print, in the `twin` preset of `drills.measure.logformats`.

Pure functions: they only format. NCCL lines follow NCCL's `NCCL_DEBUG=INFO` shape
(`host:pid:tid [dev] NCCL INFO …`), PyTorch's watchdog line its ProcessGroupNCCL message, and the
training lines the twin preset exactly (`step=… loss=… samples_per_s=… step_time_s=…`,
`checkpoint saved step=N duration_s=D path=P`, `resumed from checkpoint step=N path=P`). Warnings
about a rerouted path never contain the word "timeout": only a real NCCL timeout does.
"""

from __future__ import annotations

import logging
import zlib

__all__ = [
    "Worker", "nccl_init", "step_line", "checkpoint_saved", "resumed", "saving_checkpoint", "path_loss_warn",
    "rerouted", "rebalanced", "isolated_warn", "watchdog_timeout", "socket_fallback", "peer_lost_warn",
    "gpu_xid", "checkpoint_path", "resume_crash",
]

log = logging.getLogger(__name__)


class Worker:
    """Who prints: host (node), rank, pod IP, and a pid stable for one container instance."""

    def __init__(self, host: str, rank: int, ip: str, uid: str = ""):
        self.host, self.rank, self.ip = host, rank, ip or "10.128.0.2"
        self.pid = 40 + zlib.crc32(uid.encode()) % 9000

    def prefix(self, tid: int | None = None) -> str:
        return f"{self.host}:{self.pid}:{self.pid if tid is None else tid} [0]"


def checkpoint_path(base: str, step: int) -> str:
    return f"{base.rstrip('/')}/step-{step}"


def nccl_init(w: Worker, transport: str, hcas: list[str], socket_ifname: str, nranks: int, version: str,
              rdma_kind: str = "RoCE") -> list[str]:
    """What NCCL prints when a communicator comes up; `transport` is "IB" or "Socket"."""
    p = w.prefix()
    oob = f"{socket_ifname}:{w.ip}<0>"
    lines = [f"{p} NCCL INFO Bootstrap : Using {oob}"]
    if w.rank == 0:
        lines.append(f"NCCL version {version}+cuda12.4")
    lines.append(f"{p} NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using internal implementation")
    if transport == "IB":
        devices = " ".join(f"[{i}]{hca}:1/{rdma_kind}" for i, hca in enumerate(hcas))
        lines.append(f"{p} NCCL INFO NET/IB : Using {devices} ; OOB {oob}")
        lines.append(f"{p} NCCL INFO Using network IB")
    else:
        lines.append(f"{p} NCCL INFO NET/Socket : Using [0]{oob}")
        lines.append(f"{p} NCCL INFO Using network Socket")
    lines.append(f"{p} NCCL INFO comm 0x{0x55d0_0000 + w.pid:x} rank {w.rank * 8} nranks {nranks} cudaDev 0 "
                 f"nvmlDev 0 busId 18000 commId 0x{zlib.crc32(version.encode()):x} - Init COMPLETE")
    return lines


def step_line(step: int, loss: float, samples_per_s: float, step_time_s: float) -> str:
    return f"step={step} loss={loss:.4f} samples_per_s={samples_per_s:.1f} step_time_s={step_time_s:.3f}"


def saving_checkpoint(step: int, path: str) -> str:
    return f"saving checkpoint at step {step} to {path} (async)"


def checkpoint_saved(step: int, duration_s: float, path: str) -> str:
    return f"checkpoint saved step={step} duration_s={duration_s:.1f} path={path}"


def resumed(step: int, path: str, load_s: float) -> str:
    return f"resumed from checkpoint step={step} path={path} load_s={load_s:.1f}"


def resume_crash(w: Worker, step: int, path: str) -> list[str]:
    """A worker that tries to load its checkpoint and crashes (defect broken-resume): the attempt line, then
    the Python traceback torch.load raises on a truncated file, as `torchrun` prefixes it."""
    frames = [
        ("/workspace/train.py", 412, "<module>", "main()"),
        ("/workspace/train.py", 377, "main", "step = load_checkpoint(model, optimizer, args.load)"),
        ("/workspace/checkpointing.py", 121, "load_checkpoint", "state_dict = torch.load(path, map_location=\"cpu\")"),
        ("/usr/local/lib/python3.10/dist-packages/torch/serialization.py", 1025, "load",
         "raise pickle.UnpicklingError(UNSAFE_MESSAGE + str(e)) from None"),
    ]
    out = [f"loading checkpoint step={step} path={path}", "Traceback (most recent call last):"]
    for file, line, func, code in frames:
        out += [f'  File "{file}", line {line}, in {func}', f"    {code}"]
    out.append(f"_pickle.UnpicklingError: invalid load key, '\\x00'. ({path}/model_optim_rng.pt is truncated)")
    return [f"[rank{w.rank}]:{line}" for line in out]


def peer_lost_warn(w: Worker, peer: str) -> str:
    return (f"{w.prefix(w.pid + 57)} NCCL WARN NET/IB : Connection closed by remote peer {peer}<52140>; "
            f"communicator aborted, waiting for the job to be restarted")


def path_loss_warn(w: Worker, hca: str, leaf: str, up: int, total: int) -> str:
    return (f"{w.prefix(w.pid + 57)} NCCL WARN NET/IB : {hca}:1 packet loss on the path through {leaf} "
            f"({up}/{total} uplinks up), hardware retransmission in progress")


def rerouted(w: Worker, hca: str, leaf: str, after_s: float, up: int, total: int) -> str:
    return (f"{w.prefix(w.pid + 57)} NCCL INFO NET/IB : {hca}:1 traffic rerouted around the failed uplink of "
            f"{leaf} after {after_s:.1f}s ({up}/{total} uplinks up)")


def rebalanced(w: Worker, leaf: str, up: int, total: int) -> str:
    return f"{w.prefix(w.pid + 57)} NCCL INFO NET/IB : traffic rebalanced over {up}/{total} uplinks of {leaf}"


def isolated_warn(w: Worker, hca: str, leaf: str) -> str:
    return (f"{w.prefix(w.pid + 57)} NCCL WARN NET/IB : {hca}:1 no route to any peer: every uplink of {leaf} "
            f"is down, collective stalled")


def watchdog_timeout(w: Worker, seq: int, timeout_s: float, ran_s: float) -> list[str]:
    ms, ran = int(timeout_s * 1000), int(ran_s * 1000)
    return [
        f"[rank{w.rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {w.rank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, "
        f"Timeout(ms)={ms}) ran for {ran} milliseconds before timing out.",
        f"{w.prefix(w.pid + 57)} NCCL WARN Timeout waiting for peers after {ran_s:.0f}s, aborting communicator",
        f"[rank{w.rank}]:[E ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {w.rank}] Exception (either an "
        f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ]


def socket_fallback(w: Worker, hca: str, socket_ifname: str, nranks: int, version: str) -> list[str]:
    """RoCE without PFC after a fabric event: IB completions fail and the communicator re-inits on sockets."""
    p = w.prefix(w.pid + 57)
    head = [f"{p} NCCL WARN NET/IB : Got completion from peer {w.ip}<41522> with error 12, opcode 0, len 0, "
            f"vendor err 129 (Send) on {hca}:1 (lossy RoCE, no PFC)",
            f"{p} NCCL WARN NET/IB : RDMA transport unusable, re-initializing communicator"]
    again = nccl_init(w, "Socket", [], socket_ifname, nranks, version)
    return head + [line for line in again if "Bootstrap" not in line and not line.startswith("NCCL version")]


def gpu_xid(w: Worker, xid: int = 48) -> list[str]:
    """What a worker prints when its GPU fails (the NVRM line is the driver's, as seen in the container's dmesg)."""
    driver, cuda = _XID.get(xid, _XID[48])
    return [
        f"NVRM: Xid (PCI:0000:18:00): {xid}, pid={w.pid}, name=python, {driver}",
        f"[rank{w.rank}]: RuntimeError: CUDA error: {cuda}",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
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
