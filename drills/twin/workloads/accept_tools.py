"""What the acceptance tools print on a twin node, in their real shapes (tests/data/real/accept/ holds
public samples of each; drills/measure/accept parses both): nvidia-smi, dcgmi diag, gpu-burn,
nccl-tests all_reduce_perf (with NCCL_DEBUG=INFO), ibstat and ib_write_bw, and fio's JSON report.

Pure functions of figures (drills/twin/profile_acceptance.py): the workload decides the figures, these
only print them.
"""

from __future__ import annotations

import json
import zlib

from drills.twin.workloads import loglines as L

__all__ = ["gpu_uuid", "pci_bus_id", "MARK", "nvidia_smi", "nvidia_smi_list", "nic_guid", "nic_mac", "dcgmi_discovery", "dcgmi_diag", "gpu_burn", "all_reduce_perf", "ibstat", "ib_write_bw", "fio_json", "df_pt"]

MARK = "=== "  # the rdma Job's script echoes `=== <tool> <args>` before each tool it runs (one log, several tools)
_RULE = "+---------------------------+------------------------------------------------+"


def _uuid(node: str, gpu: int) -> str:
    h = f"{zlib.crc32(f'{node}/{gpu}'.encode()):08x}{zlib.crc32(f'{gpu}/{node}'.encode()):08x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[:4]}-{h[4:16]}"


def gpu_uuid(node: str, gpu: int) -> str:
    """GPU `gpu` of `node`'s UUID, the same wherever it is printed (nvidia-smi, dcgm-exporter's `UUID` label)."""
    return _uuid(node, gpu)


_DGX_H100_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)  # an 8-GPU HGX H100 board's PCI buses


def pci_bus_id(gpu: int) -> str:
    """GPU `gpu`'s PCI bus id as nvidia-smi and dcgm-exporter print it (a bus number stays within 0x00-0xFF)."""
    bus = _DGX_H100_BUSES[gpu] if gpu < len(_DGX_H100_BUSES) else (0x18 + 0x11 * gpu) % 0x100
    return f"00000000:{bus:02X}:00.0"


def nvidia_smi(node: str, name: str, visible: int, driver: str, cuda: str, temps: list[int]) -> list[str]:
    """`nvidia-smi -L` then `nvidia-smi` (shapes: nvidia-smi-L-2x-a100.txt, nvidia-smi-8x-h100.txt)."""
    if visible == 0:
        return ["No devices were found"]
    out = nvidia_smi_list(node, name, visible)
    width = 89
    out += ["+" + "-" * width + "+",
            f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda:<9}|",
            "|-----------------------------------------+------------------------+----------------------+",
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
            "|                                         |                        |               MIG M. |",
            "|=========================================+========================+======================|"]
    for i in range(visible):
        bus = pci_bus_id(i)
        out += [f"| {i:>3}  {name:<31}{'On':>3} |   {bus} Off |                    0 |",
                f"| N/A   {temps[i]:>2}C    P0            {70 + i % 4:>3}W /  700W |       1MiB /  81559MiB |      0%      Default |",
                "|                                         |                        |             Disabled |",
                "+-----------------------------------------+------------------------+----------------------+"]
    return out


def nvidia_smi_list(node: str, name: str, visible: int) -> list[str]:
    """`nvidia-smi -L` of the first `visible` GPUs of `node` (shape: nvidia-smi-L-2x-a100.txt); a GPU keeps
    its UUID wherever it is listed."""
    return [f"GPU {i}: {name} (UUID: {_uuid(node, i)})" for i in range(visible)] or ["No devices were found"]


def dcgmi_discovery(node: str, name: str, visible: int) -> list[str]:
    """`dcgmi discovery -l`: the host engine's GPUs, a box per GPU with its name, PCI bus id and UUID (shape:
    dcgmi-discovery-l-h100-sxm-null-names-excerpt.txt); the UUIDs are the machine's, as nvidia-smi prints them."""
    rule = "+--------+" + "-" * 70 + "+"
    out = [f"{visible} GPU{'s' if visible != 1 else ''} found.", rule,
           f"| {'GPU ID':<6} | {'Device Information':<68} |", rule]
    for i in range(visible):
        out += [f"| {i:<6} | {'Name: ' + name:<68} |", f"| {'':<6} | {'PCI Bus ID: ' + pci_bus_id(i):<68} |",
                f"| {'':<6} | {'Device UUID: ' + _uuid(node, i):<68} |", rule]
    return out


def dcgmi_diag(level: int, version: str, driver: str, gpus: int, failing: str | None = None,
               failing_gpu: int = 0, verdict: str = "Fail") -> list[str]:
    """`dcgmi diag -r LEVEL` in DCGM 3's table (dcgmi-diag-r3-gpu-memory-fail.txt); `failing` names the test
    that does not pass (`Fail - All`, or `Warn - All` with `verdict="Warn"`, and a Warning naming the GPU, as
    DCGM 3 prints it)."""
    def row(name: str, value: str) -> str:
        return f"| {name:<25} | {value:<46} |"

    def result(test: str) -> list[str]:
        if test != failing:
            return [row(test, "Pass - All" if scoped else "Pass")]
        note = (f"GPU {failing_gpu} {test} test failed: errors found in the GPU's memory. Drain the node, "
                f"reset the GPU and rerun the diagnostic; replace the GPU if it fails again.")
        lines = [row(test, f"{verdict} - All")]
        chunks = [note[i:i + 45] for i in range(0, len(note), 45)]
        return lines + [row("Warning" if k == 0 else "", c) for k, c in enumerate(chunks)]

    out = ["Successfully ran diagnostic for group.", _RULE,
           "| Diagnostic                | Result                                         |",
           "+===========================+================================================+",
           "|-----  Metadata  ----------+------------------------------------------------|",
           row("DCGM Version", version), row("Driver Version Detected", driver),
           row("GPU Device IDs Detected", ",".join(["2330"] * gpus)),
           "|-----  Deployment  --------+------------------------------------------------|"]
    scoped = False
    for test in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                 "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"):
        out += result(test)
    scoped = True
    sections = []  # level 1 is the Deployment checks only (DCGM's "quick" run); PCIe and memory from level 2
    if level >= 2:
        sections += [("Integration", ["PCIe"]), ("Hardware", ["GPU Memory"])]
    if level >= 3:
        sections.append(("Stress", ["Targeted Stress", "Targeted Power", "Memory Bandwidth"]))
    for section, tests in sections:
        out.append(f"+-----  {section}  " + "-" * (19 - len(section)) + "+------------------------------------------------+")
        for test in tests:
            out += result(test)
    return out + [_RULE]


def gpu_burn(node: str, name: str, seconds: int, gflops: list[float], temps: list[int]) -> list[str]:
    """gpu-burn's run (gpu-burn-2gpu-hot.txt, gpu-burn-1gpu-ok.txt): header, snapshots, verdict."""
    n = len(gflops)
    out = [f"Burning for {seconds} seconds."]
    out += [f"GPU {i}: {name} (UUID: {_uuid(node, i)})" for i in range(n)]
    out += [f"Initialized device {i} with 81008 MB of memory (80446 MB available, using 72401 MB of it), using FLOATS"
            for i in range(n)]
    for step, pct in enumerate((20.0, 40.0, 60.0, 80.0, 100.0), start=1):
        rise = step / 5
        procd = " - ".join(f"{int(g * seconds * pct / 100 / 13.7)} ({g:.0f} Gflop/s)" for g in gflops)
        errors = " - ".join("0" for _ in gflops)
        temp = " - ".join(f"{int(34 + (t - 34) * rise)} C" for t in temps)
        out += [f"{pct:.1f}%  proc'd: {procd}   errors: {errors}   temps: {temp} ", "\tSummary at:   (twin)", ""]
    out += ["Killing processes with SIGTERM (soft kill)", "done", "", f"Tested {n} GPUs:"]
    return out + [f"\tGPU {i}: OK" for i in range(n)]


def all_reduce_perf(hosts: list[tuple[str, str]], gpus: int, name: str, peak_busbw: float, transport: str,
                    hcas: list[str], rdma_kind: str, nccl_version: str = "2.21.5", unreachable: bool = False) -> list[str]:
    """`all_reduce_perf -b 8M -e 8G -f 2 -g 1` over `hosts` (name, IP) × `gpus` ranks, NCCL_DEBUG=INFO
    (nccl-tests-allreduce-*.txt shapes; the NCCL lines as the training workload prints them). `unreachable`:
    the hosts have no path to each other (a leaf cut off from the spines): the first collective's QPs run out
    of retries and the test dies (nccl-tests-allreduce-socket-cuda-failure.txt's failure shape)."""
    nranks = len(hosts) * gpus
    out = ["# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for h, (host, _ip) in enumerate(hosts):
        for g in range(gpus):
            out.append(f"#  Rank {h * gpus + g:>2} Group  0 Pid {4100 + h * 100 + g:>6} on {host:>10} device "
                       f"{g:>2} [0x{0x19 + 0x22 * g:02x}] {name}")
    if len(hosts) > 1:  # one rank per node prints its NCCL init, as with NCCL_DEBUG_SUBSYS=INIT,NET
        for h, (host, ip) in enumerate(hosts):
            out += L.nccl_init(L.Worker(host, h, ip, uid=host, gpus=gpus, nworkers=len(hosts)), transport, hcas,
                               "eth0", nranks, nccl_version, rdma_kind)
    if unreachable:
        (host, ip), (_, peer_ip) = hosts[0], hosts[-1]
        w = L.Worker(host, 0, ip, uid=host, gpus=gpus, nworkers=len(hosts))
        pid = 4100
        return out + [L.retry_exceeded(w, peer_ip),
                      f"{host}: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / '",
                      f" .. {host} pid {pid}: Test failure common.cu:590", f" .. {host} pid {pid}: Test failure common.cu:891"]
    out += ["#", "#                                                              out-of-place                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    factor = 2 * (nranks - 1) / nranks if nranks > 1 else 1.0
    total = 0.0
    sizes = [8388608 << k for k in range(11)]
    for size in sizes:
        busbw = peak_busbw * size / (size + 96e6)  # small messages pay latency, large ones reach the peak
        algbw = busbw / factor
        t_us = size / (algbw * 1e3) if algbw > 0 else 0.0
        total += busbw
        cells = f"{_time(t_us)} {algbw:7.2f} {busbw:7.2f} {0:6d}"
        out.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {cells}  {cells}")
    return out + ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {total / len(sizes):.3f} ", "#"]


def nic_guid(machine: str, hca: str) -> str:
    """The Node GUID of `machine`'s adapter `hca` as ibstat prints it: Mellanox's OUI 58:a2:e1, 03:00, then three
    bytes of its own (ibstat-roce-one-port-down.txt: Node GUID 0x58a2e10300dae626, MAC 58:a2:e1:da:e6:26)."""
    return f"0x58a2e10300{zlib.crc32(f'{machine}/{hca}'.encode()) & 0xffffff:06x}"


def nic_mac(machine: str, hca: str) -> str:
    """The MAC of `machine`'s RoCE adapter `hca`: what lldpd on the server sends as its Port ID, and what the
    port's GUID (its modified EUI-64: the universal/local bit flipped, ff:fe in the middle) encodes."""
    tail = nic_guid(machine, hca)[-6:]
    return ":".join(["58", "a2", "e1", tail[0:2], tail[2:4], tail[4:6]])


def ibstat(hcas: list[tuple[str, bool, int, str]], machine: str = "") -> list[str]:
    """`ibstat` for (HCA, up, rate Gb/s, link layer) (ibstat-*.txt shapes); each adapter's GUIDs are its own
    (Mellanox OUI 58:a2:e1, the rest from the machine and the HCA), so no two machines share one."""
    out = []
    for hca, up, rate, layer in hcas:
        guid = nic_guid(machine, hca)
        out += [f"CA '{hca}'", "\tCA type: MT4129", "\tNumber of ports: 1", "\tFirmware version: 28.39.1002",
                "\tHardware version: 0", f"\tNode GUID: {guid}", f"\tSystem image GUID: {guid}", "\tPort 1:",
                f"\t\tState: {'Active' if up else 'Down'}", f"\t\tPhysical state: {'LinkUp' if up else 'Disabled'}",
                f"\t\tRate: {rate if up else 40}", "\t\tBase lid: 0", "\t\tLMC: 0", "\t\tSM lid: 0",
                "\t\tCapability mask: 0x00010000", f"\t\tPort GUID: 0x5aa2e1fffe{guid[-6:]}",
                f"\t\tLink layer: {layer}"]
    return out


def ib_write_bw(hca: str, up: bool, link_type: str, gbps: float, peer_ip: str = "", reachable: bool = True) -> list[str]:
    """`ib_write_bw -d HCA -s 65536 -D 10 --report_gbits PEER` (ib-write-bw-roce-gbits.txt), perftest's
    refusal when the port is not active, or its connect failure when the peer cannot be reached
    (ib-write-bw-socket-connect-failure.txt)."""
    rule = "-" * 87
    if not reachable:
        return [f"Couldn't connect to {peer_ip}:18515",
                "Unable to open file descriptor for socket connection Unable to init the socket connection"]
    if not up:
        return [" Port number 1 state is Down", " Couldn't set the link layer", " Couldn't get context for the device"]
    iters = int(gbps * 1e9 / 8 / 65536 * 10)
    return [rule, "                    RDMA_Write BW Test",
            f" Dual-port       : OFF\t\tDevice         : {hca}", " Number of qps   : 1\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF", " PCIe relax order: ON", " ibv_wr* API     : ON",
            " TX depth        : 128", " CQ Moderation   : 1", " Mtu             : 4096[B]",
            f" Link type       : {link_type}", " GID index       : 3", " Max inline data : 0[B]",
            " rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", rule,
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
            f" 65536      {iters:<10}       {gbps * 1.004:.2f}             {gbps:.2f}  \t\t   {gbps * 1e9 / 8 / 65536 / 1e6:.6f}",
            rule]


def df_pt(source: str, fstype: str, mountpoint: str) -> list[str]:
    """`df -PT PATH` (coreutils): the filesystem holding the path."""
    return ["Filesystem                   Type  1024-blocks       Used   Available Capacity Mounted on",
            f"{source:<28} {fstype:<5} 107374182400 5368709120 102005473280       5% {mountpoint}"]


def fio_json(read_mb_s: float, write_mb_s: float, runtime_s: float) -> list[str]:
    """fio --output-format=json for a sequential read job and a write job (what drills.measure.fio_report reads)."""
    ms = int(runtime_s * 1000)

    def job(name: str, rw: str, mb_s: float) -> dict:
        bw = int(mb_s * 1e6)
        stats = {"io_bytes": int(bw * runtime_s), "bw_bytes": bw, "bw": bw // 1024, "iops": bw / 1048576,
                 "runtime": ms, "clat_ns": {"N": int(bw * runtime_s / 1048576), "mean": 4.2e6}}
        empty = {"io_bytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0, "runtime": 0, "clat_ns": {"N": 0, "mean": 0.0}}
        return {"jobname": name, "groupid": 0, "error": 0, "read": stats if rw == "read" else empty,
                "write": stats if rw == "write" else empty}

    report = {"fio version": "fio-3.33", "timestamp": 0, "jobs": [job("seqread", "read", read_mb_s),
                                                                  job("seqwrite", "write", write_mb_s)]}
    return json.dumps(report, indent=2).splitlines()


def _time(us: float) -> str:
    """nccl-tests' 7-wide time: more decimals for short times."""
    if us >= 10000:
        return f"{us:7.0f}"
    if us >= 100:
        return f"{us:7.1f}"
    return f"{us:7.2f}"
