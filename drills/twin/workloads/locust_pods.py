"""locust containers on the twin: a pod whose container runs `python -m locust` from the drills image (the `pods`
load generator's master and workers, drills/load/pods.py) runs as a real locust process here, as a container
runtime would run it, so the distributed path — master, workers, the Service between them, results in the logs —
is exercised for real against the twin's gateway.

What a node would provide, and how this machine provides it:
- the image's filesystem: the drills image is this checkout (a path under `/opt/gpu-drills`, the image's
  WORKDIR, is the same path under the repository root), and its `python` is this interpreter;
- the pod network: every pod shares this host's loopback. A master binds 127.0.0.1 on a free port (two masters
  never collide on 5557); a worker's `--master-host` naming a Service resolves, like cluster DNS, to the master
  pod that Service selects — 127.0.0.1 and that master's port. A worker is started once its master runs;
- stdout and stderr: the pod's log (`POST …/log`), line by line as they come; the exit code: the container's
  (`POST …/exit`), after the last line;
- termination: a deleted pod's process gets SIGTERM and stops in its own (wall) time, at most `STOP_S` — a
  real process cannot stop in the twin's dilated grace period (30 cluster seconds are 50 ms at 600×), so the
  pod object goes on the twin's clock while the process flushes and exits on the host's. SIGKILL after that.
  `--parent-pid` (this twin) ends an orphan if the twin itself is killed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.client import key_of
from drills.twin.workloads.process_pods import ProcessPodController

__all__ = ["LocustPodController", "locust_command", "IMAGE_APP_DIR"]

log = logging.getLogger(__name__)

SERVICES = by_kind("v1", "Service")
IMAGE_APP_DIR = "/opt/gpu-drills"  # drills.load.pods.IMAGE_APP_DIR: the image's copy of the source tree
REPO_ROOT = Path(__file__).resolve().parents[3]
STOP_S = 10.0  # wall seconds a SIGTERMed locust process gets to flush and quit


def locust_command(pod: dict) -> tuple[str, list[str]] | None:
    """(container name, locust's arguments) of the pod's first container running `python -m locust`; None if
    none does."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        argv = [str(a) for a in list(container.get("command") or []) + list(container.get("args") or [])]
        for i in range(len(argv) - 1):
            if argv[i] == "-m" and argv[i + 1] == "locust" and "python" in Path(argv[i - 1] if i else "").name:
                return container["name"], argv[i + 2:]
    return None


class LocustPodController(ProcessPodController):
    name = "locust-pods"

    def __init__(self, ctx: Any):
        super().__init__(ctx)
        self.ports: dict[Hashable, int] = {}  # master pod → the loopback port its process listens on

    def setup(self) -> None:
        super().setup()
        self.services = self.ctx.informers.informer(SERVICES)

    def command(self, pod: dict) -> Any:
        return locust_command(pod)

    def launch(self, key: Hashable, pod: dict) -> asyncio.Task | None:
        container, args = locust_command(pod)  # type: ignore[misc]
        argv = self._adapt(pod, args)
        if argv is None:  # a worker whose master does not run yet: as a worker retries the Service
            self.enqueue_after(key, self.ctx.clock.scale * 0.1)
            return None
        return asyncio.create_task(self._run_container(pod, container, argv), name=f"locust:{key}")

    # -- the process ---------------------------------------------------------------------------------
    async def _run_container(self, pod: dict, container: str, argv: list[str]) -> None:
        ns, name = key_of(pod)
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               **{e["name"]: str(e["value"]) for e in _container(pod, container).get("env") or []
                  if "value" in e and e.get("name") not in ("HOME",)}}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "locust", *argv, cwd=str(REPO_ROOT),
                                                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True)
        log.info("locust in pod %s/%s: pid %d", ns, name, proc.pid)
        pump = asyncio.create_task(self._pump(proc, ns, name, container))
        try:
            code = await proc.wait()
            await pump
        except asyncio.CancelledError:
            await asyncio.shield(self._terminate(proc, pump))
            raise
        finally:
            self.ports.pop((ns, name), None)
        await self._post(ns, name, "exit", json={"code": code, "reason": "Completed" if code == 0 else "Error",
                                                 "container": container})
        log.info("locust in pod %s/%s ended with code %d", ns, name, code)

    async def _pump(self, proc, ns: str, name: str, container: str) -> None:
        """The process's output into the pod's log: whole lines, as they come."""
        rest = b""
        while True:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                break
            rest += chunk
            text, _, rest = rest.rpartition(b"\n")
            if text:
                await self._post(ns, name, "log", data=text.decode(errors="replace") + "\n", container=container)
        if rest:
            await self._post(ns, name, "log", data=rest.decode(errors="replace") + "\n", container=container)

    async def _terminate(self, proc, pump: asyncio.Task) -> None:
        _killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_S)
        except asyncio.TimeoutError:
            log.warning("locust pid %d did not quit %.0f s after SIGTERM: killing it", proc.pid, STOP_S)
        _killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        try:
            await asyncio.wait_for(pump, 5.0)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 — the pod and its log may be gone
            pump.cancel()

    async def _post(self, ns: str, name: str, what: str, *, container: str | None = None, **body: Any) -> None:
        client = self.ctx.client
        url = f"{client.base_url}/twin/v1/namespaces/{ns}/pods/{name}/{what}"
        headers = {"Content-Type": "text/plain"} if "data" in body else None
        try:
            async with client.session.post(url, params={"container": container} if container else None,
                                           headers=headers, **body) as resp:
                if resp.status >= 400:
                    log.debug("locust %s of %s/%s: HTTP %s", what, ns, name, resp.status)
        except OSError as err:  # aiohttp's connection errors: the twin is stopping
            log.debug("locust %s of %s/%s: %s", what, ns, name, err)

    # -- what the node provides ------------------------------------------------------------------------
    def _adapt(self, pod: dict, args: list[str]) -> list[str] | None:
        """locust's arguments as this host runs them; None for a worker whose master is not running yet."""
        key = key_of(pod)
        out, i, master = [], 0, "--master" in args
        while i < len(args):
            arg, value = args[i], args[i + 1] if i + 1 < len(args) else None
            if arg == "-f" and value is not None:
                out += ["-f", _image_path(value)]
                i += 2
            elif arg in ("--master-bind-host", "--master-bind-port", "--master-port", "--parent-pid"):
                i += 2
            elif arg == "--master-host" and value is not None:
                port = self._resolve(key[0], value)
                if port is None:
                    return None
                out += ["--master-host", "127.0.0.1", "--master-port", str(port)]
                i += 2
            else:
                out.append(arg)
                i += 1
        if master:
            port = self.ports[key] = self.ports.get(key) or _free_port()
            out += ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
        return out + ["--parent-pid", str(os.getpid())]

    def _resolve(self, namespace: str, host: str) -> int | None:
        """Cluster DNS for a Service name (`svc`, `svc.ns`, `svc.ns.svc…`): the port of the master pod it selects."""
        parts = host.split(".")
        service = self.services.get(parts[1] if len(parts) > 1 else namespace, parts[0])
        selector = ((service or {}).get("spec") or {}).get("selector") or {}
        if not selector:
            return None
        for (ns, name), port in self.ports.items():
            pod = self.pods.get(ns, name)
            labels = ((pod or {}).get("metadata") or {}).get("labels") or {}
            if ns == (service or {})["metadata"]["namespace"] and all(labels.get(k) == v for k, v in selector.items()):
                return port
        return None


def _container(pod: dict, name: str) -> dict:
    return next((c for c in pod["spec"]["containers"] if c.get("name") == name), {})


def _image_path(path: str) -> str:
    prefix = IMAGE_APP_DIR.rstrip("/") + "/"
    return str(REPO_ROOT / path[len(prefix):]) if path.startswith(prefix) else path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
