"""What a simulated container answers to `kubectl exec` (the twin has no processes: the programs an
operator or a client's tests type are answered from the twin's model, anything else is not on the image).

Programs (`_PROGRAMS`, by executable name; every image has them):
- `nvidia-smi -L`: the GPUs the container was given (its `nvidia.com/gpu` limit, the first of its node's,
  with the UUIDs the acceptance tools print for that node); none → "No devices were found", exit 6
  (NVML_ERROR_NOT_FOUND). The name is the node's GPU feature discovery label `nvidia.com/gpu.product`
  with GFD's dashes read back as spaces (exact for the twin's H100 pools; a product whose real name has
  dashes, e.g. "A100-SXM4-80GB", would be spelled with spaces).
- `nvidia-smi --query-gpu=utilization.gpu --format=csv` / `nvidia-smi --query-compute-apps=pid,used_memory
  --format=csv`: the given GPUs busy (≈ 97 %, one compute process each holding ≈ 62 GiB) while the pod runs,
  idle (0 %, no process) when its process cannot initialise CUDA (pod annotation `twin.gpu-drills.io/cuda`,
  defect gpus-unseen: the image's CUDA runtime is newer than the node's driver, torch falls back to the CPU).
- `env` / `printenv [NAME]`: the container's literal env plus what the kubelet adds (HOSTNAME, the API
  service's KUBERNETES_* variables, PATH, HOME).
- `hostname`, `true`, `false`, `echo [-n]`, `seq [FIRST [INC]] LAST`, `date` (the twin's clock, busybox's
  format), `uptime` (since the node was created), `sleep N` (takes N twin seconds), `gzip` (stdin, as
  `gzip` writes it to a pipe), `ls [/]` (the image's root: busybox's for busybox images, Debian's
  otherwise), `cat` (stdin; a file on a volume the twin backs — container_files.py —, else "No such file or
  directory", exit 1), `find` over those volumes.
- `sh -c SCRIPT` and `sh` reading commands from stdin: container_shell.py's subset of sh.
- `dcgmi` on DCGM's images only (`test --inject`, `dmon`: drills/twin/workloads/dcgmi.py); an injection's
  change to the node's DCGM cache comes back as `Output.node_annotations` for the exec handler to write.
- anything else: the container runtime's "executable file not found in $PATH" (`NotFound`).

An exec with stdin attached (`start`): `sh` without `-c` runs each line it reads until `exit` (or the
end of stdin); `cat` (or `sh -c cat`) copies stdin to stdout until stdin is closed; any other command
runs at once and does not read stdin.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from drills.core.clock import parse_iso
from drills.twin.controllers.nodeutil import parse_quantity
from drills.twin.workloads import container_files
from drills.twin.workloads.accept_tools import nvidia_smi_list
from drills.twin.workloads.container_shell import Output, Program, Shell
from drills.twin.workloads.dcgmi import dcgmi, has_dcgmi

__all__ = ["NotFound", "Output", "Session", "run", "start"]

GPU = "nvidia.com/gpu"
CUDA_ANNOTATION = "twin.gpu-drills.io/cuda"  # the process cannot initialise CUDA (defect gpus-unseen): GPUs idle
UTILIZATION = ["--query-gpu=utilization.gpu", "--format=csv"]
COMPUTE_APPS = ["--query-compute-apps=pid,used_memory", "--format=csv"]
_PATH = "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SERVICE_HOST, _SERVICE_PORT = "10.96.0.1", "443"  # the default `kubernetes` Service a pod sees
_ROOTS = {"busybox": "bin dev etc home lib lib64 proc root sys tmp usr var",
          "debian": "bin boot dev etc home lib lib64 media mnt opt proc root run sbin srv sys tmp usr var"}
SHELLS = ("sh",)


class NotFound(Exception):
    """The command is not an executable on the container's image."""

    def __init__(self, executable: str):
        super().__init__(executable)
        self.executable = executable


@dataclass
class _Container:
    pod: dict
    spec: dict
    node: dict | None
    now: float  # twin epoch seconds
    files: dict = field(default_factory=dict)  # mountPath → host directory (container_files.mounts)
    read_only: set = field(default_factory=set)  # mountPaths mounted readOnly (rm refuses them)
    unlink_denied: bool = False  # the store refuses unlinking (twin profile storage.unlink_denied)

    @property
    def flavour(self) -> str:
        return "busybox" if (self.spec.get("image") or "").rsplit("/", 1)[-1].startswith("busybox") else "debian"


def run(command: list[str], pod: dict, container: str, node: dict | None, now: float,
        volume_dir: "container_files.VolumeDir | None" = None, unlink_denied: bool = False) -> Output:
    """Run `command` (stdin not attached) in `container` of `pod` on `node`: what it prints, its exit code."""
    return start(command, pod, container, node, now, stdin=False, volume_dir=volume_dir,
                 unlink_denied=unlink_denied).output


def start(command: list[str], pod: dict, container: str, node: dict | None, now: float, stdin: bool,
          volume_dir: "container_files.VolumeDir | None" = None, unlink_denied: bool = False) -> "Session":
    """A started exec; raises NotFound when `command[0]` is not on the image. `volume_dir` backs the pod's
    volumes with host directories (the twin's store), for `find` and `cat FILE`."""
    if not command:
        raise NotFound("")
    spec = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    box = _Container(pod, spec, node, now, container_files.mounts(pod, spec, volume_dir),
                     container_files.read_only(spec), unlink_denied)
    exe, args = _base(command[0]), command[1:]
    shell = Shell(lambda name: _program(box, name), _env(box))
    if exe in SHELLS:
        if args[:1] == ["-c"] and len(args) > 1:
            if stdin and args[1].strip() == "cat":
                return Session(copying=True)
            output, _ = shell.run(args[1])
            return Session(output=output, finished=True)
        return Session(shell=shell) if stdin else Session(output=Output(), finished=True)
    if exe == "cat" and not args and stdin:
        return Session(copying=True)
    program = _program(box, exe)
    if program is None:
        raise NotFound(command[0])
    return Session(output=program([exe, *args], b""), finished=True)


@dataclass
class Session:
    """An exec in progress: what it printed so far (`output`, drained by `take`), whether it ended."""

    output: Output = field(default_factory=Output)
    finished: bool = False
    shell: Shell | None = None
    copying: bool = False
    _line: bytes = b""

    def feed(self, data: bytes) -> None:
        if self.finished:
            return
        if self.copying:
            self.output.stdout += data
            return
        if self.shell is not None:
            self._line += data
            while b"\n" in self._line and not self.finished:
                line, self._line = self._line.split(b"\n", 1)
                out, exited = self.shell.run(line.decode(errors="replace"))
                self._add(out)
                self.finished = exited

    def close_stdin(self) -> None:
        """End of stdin: a copying command and a shell reading its commands end (a shell runs what is left)."""
        if self.finished:
            return
        if self.shell is not None and self._line.strip():
            out, _ = self.shell.run(self._line.decode(errors="replace"))
            self._add(out)
        if self.shell is not None:
            self.output.code = self.shell.last
        self.finished = True

    def take(self) -> Output:
        out, self.output = self.output, Output(code=self.output.code)
        return out

    def _add(self, out: Output) -> None:
        self.output.stdout += out.stdout
        self.output.stderr += out.stderr
        self.output.seconds += out.seconds
        self.output.code = out.code


# -- the programs ------------------------------------------------------------------------------------------
def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _program(box: _Container, name: str) -> Program | None:
    if _base(name) == "dcgmi" and has_dcgmi(box.spec.get("image") or ""):
        return lambda argv, stdin: dcgmi(argv[1:], box.node)
    make = _PROGRAMS.get(_base(name))
    return (lambda argv, stdin: make(box, argv[1:], stdin)) if make is not None else None


def _text(text: str, code: int = 0) -> Output:
    return Output(text.encode(), b"", code)


def _echo(box: _Container, args: list[str], stdin: bytes) -> Output:
    newline = not args[:1] == ["-n"]
    return _text(" ".join(args if newline else args[1:]) + ("\n" if newline else ""))


def _seq(box: _Container, args: list[str], stdin: bytes) -> Output:
    try:
        nums = [int(a) for a in args]
    except ValueError as err:
        return Output(b"", f"seq: invalid number '{err.args[0].split(': ', 1)[-1]}'\n".encode(), 1)
    first, inc, last = {1: (1, 1, nums[-1] if nums else 0), 2: (nums[0], 1, nums[-1]),
                        3: (nums[0], nums[1], nums[-1])}.get(len(nums), (1, 1, 0))
    if not nums or len(nums) > 3 or inc == 0:
        return Output(b"", b"Usage: seq [-w] [-s SEP] [FIRST [INC]] LAST\n", 1)
    return _text("".join(f"{n}\n" for n in range(first, last + (1 if inc > 0 else -1), inc)))


def _date(box: _Container, args: list[str], stdin: bytes) -> Output:
    moment = datetime.fromtimestamp(box.now, timezone.utc)
    return _text(moment.strftime("%a %b ") + f"{moment.day:2d}" + moment.strftime(" %H:%M:%S UTC %Y\n"))


def _uptime(box: _Container, args: list[str], stdin: bytes) -> Output:
    created = ((box.node or {}).get("metadata") or {}).get("creationTimestamp")
    up = int(box.now - parse_iso(created).timestamp()) if created else 0
    days, rest = divmod(max(up, 0), 86400)
    hours, minutes = rest // 3600, rest % 3600 // 60
    clock = datetime.fromtimestamp(box.now, timezone.utc).strftime("%H:%M:%S")
    span = (f"{days} day{'s' if days != 1 else ''}, " if days else "") + \
        (f"{hours:2d}:{minutes:02d}" if hours else f"{minutes} min")
    return _text(f" {clock} up {span},  0 users,  load average: 0.00, 0.00, 0.00\n")


def _sleep(box: _Container, args: list[str], stdin: bytes) -> Output:
    try:
        seconds = float(args[0]) if args else None
    except ValueError:
        seconds = None
    if seconds is None:
        return Output(b"", f"sleep: invalid number '{args[0] if args else ''}'\n".encode(), 1)
    return Output(seconds=seconds)


def _ls(box: _Container, args: list[str], stdin: bytes) -> Output:
    paths = [a for a in args if not a.startswith("-")] or ["/"]
    missing = [p for p in paths if p.rstrip("/") != ""]
    if missing:
        return Output(b"", "".join(f"ls: {p}: No such file or directory\n" for p in missing).encode(),
                      1 if box.flavour == "busybox" else 2)
    return _text("".join(f"{name}\n" for name in _ROOTS[box.flavour].split()))


def _cat(box: _Container, args: list[str], stdin: bytes) -> Output:
    if not args:
        return Output(stdin)
    if box.files:
        return container_files.cat(box.files, args)
    return Output(b"", "".join(f"cat: {path}: No such file or directory\n" for path in args).encode(), 1)


def _env_program(box: _Container, args: list[str], stdin: bytes) -> Output:
    env = _env(box)
    if args:
        found = [env[name] for name in args if name in env]
        return _text("".join(f"{v}\n" for v in found), 0 if len(found) == len(args) else 1)
    return _text("".join(f"{k}={v}\n" for k, v in env.items()))


def _nvidia_smi(box: _Container, args: list[str], stdin: bytes) -> Output:
    if args not in (["-L"], UTILIZATION, COMPUTE_APPS):
        return Output(b"", b"nvidia-smi: only -L and the utilization / compute-apps CSV queries are modelled by the "
                      b"twin\n", 2)
    limits = (box.spec.get("resources") or {}).get("limits") or {}
    given = int(parse_quantity(limits.get(GPU)))
    if box.node is None or given == 0:
        return _text("No devices were found\n", 6)
    busy = ((box.pod.get("status") or {}).get("phase") == "Running"
            and not ((box.pod.get("metadata") or {}).get("annotations") or {}).get(CUDA_ANNOTATION))
    if args == UTILIZATION:  # shape: `utilization.gpu [%]` then `97 %` per GPU (nvidia-smi --format=csv)
        return _text("utilization.gpu [%]\n" + "".join(f"{96 + i % 3 if busy else 0} %\n" for i in range(given)))
    if args == COMPUTE_APPS:  # shape: `pid, used_gpu_memory [MiB]` then `4860, 2437 MiB` per process; none: header only
        base = 1000 + zlib.crc32(box.pod["metadata"]["name"].encode()) % 60000
        return _text("pid, used_gpu_memory [MiB]\n" +
                     "".join(f"{base + i}, {63488 + 128 * i} MiB\n" for i in range(given) if busy))
    product = (box.node["metadata"].get("labels") or {}).get(f"{GPU}.product", "NVIDIA-GPU")
    return _text("".join(f"{line}\n" for line in nvidia_smi_list(box.node["metadata"]["name"],
                                                                  product.replace("-", " "), given)))


_PROGRAMS: dict[str, Callable[[_Container, list[str], bytes], Output]] = {
    "true": lambda box, args, stdin: Output(),
    "false": lambda box, args, stdin: Output(code=1),
    "echo": _echo,
    "seq": _seq,
    "date": _date,
    "uptime": _uptime,
    "sleep": _sleep,
    "gzip": lambda box, args, stdin: Output(gzip.compress(stdin, mtime=0)),
    "ls": _ls,
    "cat": _cat,
    "find": lambda box, args, stdin: container_files.find(box.files, args, gnu=box.flavour != "busybox"),
    "test": lambda box, args, stdin: container_files.test(box.files, args),
    "rm": lambda box, args, stdin: container_files.rm(box.files, box.read_only, box.unlink_denied, args),
    "env": _env_program,
    "printenv": _env_program,
    "hostname": lambda box, args, stdin: _text(box.pod["metadata"]["name"] + "\n"),
    "nvidia-smi": _nvidia_smi,
}


def _env(box: _Container) -> dict[str, str]:
    env = {"PATH": _PATH, "HOSTNAME": box.pod["metadata"]["name"]}
    env.update({e["name"]: e["value"] for e in box.spec.get("env") or () if "value" in e})
    env.update({"KUBERNETES_SERVICE_HOST": _SERVICE_HOST, "KUBERNETES_SERVICE_PORT": _SERVICE_PORT,
                "KUBERNETES_SERVICE_PORT_HTTPS": _SERVICE_PORT, "KUBERNETES_PORT": f"tcp://{_SERVICE_HOST}:443",
                "HOME": "/root"})
    return env
