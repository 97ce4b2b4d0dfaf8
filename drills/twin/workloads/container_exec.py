"""What a simulated container answers to `kubectl exec` (the twin has no processes: a few commands an
operator types during a drill are answered from the twin's model, anything else is not on the image).

- `nvidia-smi -L`: the GPUs the container was given (its `nvidia.com/gpu` limit, the first of its node's,
  with the UUIDs the acceptance tools print for that node); none → "No devices were found", exit 6
  (NVML_ERROR_NOT_FOUND). The name is the node's GPU feature discovery label `nvidia.com/gpu.product`
  with GFD's dashes read back as spaces (exact for the twin's H100 pools; a product whose real name has
  dashes, e.g. "A100-SXM4-80GB", would be spelled with spaces).
- `env` / `printenv [NAME]`: the container's literal env plus what the kubelet adds (HOSTNAME, the API
  service's KUBERNETES_* variables, PATH, HOME).
- `hostname`, `true`, `false`, `cat FILE` (no file on the image: "No such file or directory", exit 1).
- anything else: the container runtime's "executable file not found in $PATH" (`NotFound`).
"""

from __future__ import annotations

from dataclasses import dataclass

from drills.twin.controllers.nodeutil import parse_quantity
from drills.twin.workloads.accept_tools import nvidia_smi_list

__all__ = ["ExecResult", "NotFound", "run"]

GPU = "nvidia.com/gpu"
_PATH = "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SERVICE_HOST, _SERVICE_PORT = "10.96.0.1", "443"  # the default `kubernetes` Service a pod sees


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str = ""
    code: int = 0


class NotFound(Exception):
    """The command is not an executable on the container's image."""

    def __init__(self, executable: str):
        super().__init__(executable)
        self.executable = executable


def run(command: list[str], pod: dict, container: str, node: dict | None) -> ExecResult:
    """Run `command` in `container` of `pod` on `node`: what it prints and its exit code."""
    if not command:
        raise NotFound("")
    exe, args = command[0].rsplit("/", 1)[-1], command[1:]
    spec = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    if exe == "nvidia-smi" and args == ["-L"]:
        return _nvidia_smi_list(spec, node)
    if exe in ("env", "printenv"):
        env = _env(pod, spec)
        if args:
            found = [env[name] for name in args if name in env]
            return ExecResult("".join(f"{v}\n" for v in found), code=0 if len(found) == len(args) else 1)
        return ExecResult("".join(f"{k}={v}\n" for k, v in env.items()))
    if exe == "hostname":
        return ExecResult(pod["metadata"]["name"] + "\n")
    if exe in ("true", "false"):
        return ExecResult("", code=0 if exe == "true" else 1)
    if exe == "cat":
        return ExecResult("", "".join(f"cat: {path}: No such file or directory\n" for path in args), code=1)
    raise NotFound(command[0])


def _nvidia_smi_list(spec: dict, node: dict | None) -> ExecResult:
    limits = (spec.get("resources") or {}).get("limits") or {}
    given = int(parse_quantity(limits.get(GPU)))
    if node is None or given == 0:
        return ExecResult("No devices were found\n", code=6)
    product = (node["metadata"].get("labels") or {}).get(f"{GPU}.product", "NVIDIA-GPU")
    return ExecResult("".join(f"{line}\n" for line in nvidia_smi_list(node["metadata"]["name"],
                                                                       product.replace("-", " "), given)))


def _env(pod: dict, spec: dict) -> dict[str, str]:
    env = {"PATH": _PATH, "HOSTNAME": pod["metadata"]["name"]}
    env.update({e["name"]: e["value"] for e in spec.get("env") or () if "value" in e})
    env.update({"KUBERNETES_SERVICE_HOST": _SERVICE_HOST, "KUBERNETES_SERVICE_PORT": _SERVICE_PORT,
                "KUBERNETES_SERVICE_PORT_HTTPS": _SERVICE_PORT, "KUBERNETES_PORT": f"tcp://{_SERVICE_HOST}:443",
                "HOME": "/root"})
    return env
