"""Assemble and run one twin in one asyncio loop: store + seed + API server + components.

Readiness contract: `STATE_DIR/kubeconfig` is written once the server listens, then every component
starts, then `STATE_DIR/twin.json` is written LAST (atomically) — its presence means "ready".
It is removed on a clean stop (SIGINT/SIGTERM).

Components (controllers, gateway, switches…) start in the same loop after the API server:
`twin.add_component(name, start, stop)` where `start(twin)` is awaited and returns a dict merged
into twin.json (e.g. `{"gateway": "http://…"}`) and `stop()` is awaited on shutdown, in reverse
order. Providers listed in `COMPONENT_PROVIDERS` ("module:function", called with the Twin before
it starts) register theirs, so `drills twin up` and the launcher get them without more wiring.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

import yaml

from drills.core.clock import to_iso
from drills.core.gatedclock import GatedClock
from drills.core.heap import freeze_after_slow_collections, freeze_startup_heap
from drills.twin.api.watchlag import WATCH_LAG
from drills.core.errors import DrillError
from drills.core.liveness import ProcessIdentity
from drills.twin.api.audit import AuditLog
from drills.twin.api.resources import by_kind
from drills.twin.api.server import ApiServer
from drills.twin.api.store import DEFAULT_HISTORY, Store
from drills.twin.api.tls import make_tls
from drills.twin.api.twin_routes import HEALTH
from drills.twin.health import Health
from drills.twin.launcher import TWIN_JSON

__all__ = ["Twin", "Component", "COMPONENT_PROVIDERS", "DEFAULT_SCALE", "TWIN_JSON", "KUBECONFIG", "run_twin",
           "write_kubeconfig"]

log = logging.getLogger(__name__)

DEFAULT_SCALE = 60.0
KUBECONFIG = "kubeconfig"
TOKEN = "twin-dummy-token"

# "module:function" — function(twin) calls twin.add_component(...); add a line to plug a component in.
COMPONENT_PROVIDERS: list[str] = ["drills.twin.controllers.manager:install", "drills.twin.workloads:install"]

StartFn = Callable[["Twin"], Awaitable[dict | None]]
StopFn = Callable[[], Awaitable[None]]


@dataclass
class Component:
    name: str
    start: StartFn
    stop: StopFn | None = None


class Twin:
    """One simulated cluster: `store`, `clock`, `server` (`url`), `profile`, and its components."""

    def __init__(self, state_dir: str | Path, profile: str = "minimal", defects: Iterable[str] = (),
                 scale: float | None = None, port: int = 0, host: str = "127.0.0.1",
                 providers: Iterable[str] | None = None, watch_history: int = DEFAULT_HISTORY, tls: bool = False):
        self.state_dir = Path(state_dir)
        self.profile_name = profile
        self.defects = tuple(defects)
        self.profile = _load_profile(profile, self.defects)
        profile_scale = getattr(self.profile, "scale", None) if self.profile is not None else None
        # one clock for every part of the twin, and it waits for the twin's work (drills/core/gatedclock.py)
        self.clock = GatedClock(scale=float(scale or profile_scale or DEFAULT_SCALE))
        self.store = Store(self.clock, history=watch_history)
        self.audit = AuditLog(self.clock, self.state_dir / "audit.jsonl")
        self.server = ApiServer(self.store, self.audit, host=host, port=port,
                                tls=make_tls(self.state_dir, host) if tls else None)
        self.health = Health()  # what broke in the twin's components (health.py), served at /twin/v1/health
        self.server.app[HEALTH] = self.health
        self.server.app[WATCH_LAG] = self.profile.timings.watch_lag if self.profile is not None else 0.0
        self.info: dict[str, Any] = {}
        self._components: list[Component] = []
        self._started: list[Component] = []
        self._unfreeze: Callable[[], None] | None = None
        for spec in COMPONENT_PROVIDERS if providers is None else providers:
            _provider(spec)(self)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / KUBECONFIG

    @property
    def scale(self) -> float:
        return self.clock.scale

    def add_component(self, name: str, start: StartFn, stop: StopFn | None = None) -> None:
        """Start `start(twin)` after the API server (its dict goes into twin.json); `stop()` on shutdown."""
        self._components.append(Component(name, start, stop))

    async def start(self) -> dict:
        """Seed, serve, start components, then write twin.json; returns its content."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / TWIN_JSON).unlink(missing_ok=True)
        self.seed()
        await self.server.start()
        write_kubeconfig(self.kubeconfig, self.url)
        self.info = {
            "url": self.url, **ProcessIdentity.current().to_dict(), "scale": self.scale,
            "kubeconfig": str(self.kubeconfig),
            "state_dir": str(self.state_dir.resolve()),
            "profile": self.profile_name, "defects": list(self.defects),
            "started": time.time(), "twinStarted": self.clock.timestamp(),
            "startedIso": to_iso(self.clock.now()), "audit": str(self.audit.path),
            "clock": self.clock.publish_to(self.state_dir),  # clients on this host follow the same clock
        }
        if self.server.tls is not None:  # paths only: the token stays in its file
            self.info["tls"] = {"url": self.server.tls_url, "ca": str(self.server.tls.ca.resolve()),
                                "serviceaccount_dir": str(self.server.tls.serviceaccount_dir.resolve())}
        for comp in self._components:
            extra = await comp.start(self)
            self._started.append(comp)
            if extra:
                self.info.update(extra)
            log.info("twin component %s started", comp.name)
        freeze_startup_heap()
        self._unfreeze = freeze_after_slow_collections()  # state loaded or grown later: frozen after a slow collection
        _write_atomic(self.state_dir / TWIN_JSON, json.dumps(self.info, indent=2) + "\n")
        return self.info

    def seed(self) -> int:
        """Create the profile's seed objects (namespaces first) straight in the store."""
        objs = _seed_objects(self.profile) if self.profile is not None else []
        names = {o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace"}
        objs = [ns for ns in _system_namespaces() if ns["metadata"]["name"] not in names] + objs
        objs = sorted(objs, key=lambda o: 0 if o.get("kind") == "Namespace" else 1)
        for obj in objs:
            rt = by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
            if rt is None:
                raise DrillError(f"seed object {obj.get('kind')}/{obj.get('metadata', {}).get('name')} has no "
                                 f"resource type (apiVersion {obj.get('apiVersion')!r}): fix the profile seed")
            self.store.create(rt, obj, (obj.get("metadata") or {}).get("namespace"))
        return len(objs)

    async def stop(self) -> None:
        (self.state_dir / TWIN_JSON).unlink(missing_ok=True)
        for comp in reversed(self._started):
            if comp.stop is not None:
                try:
                    await comp.stop()
                except Exception:  # noqa: BLE001 — one failing component must not keep the others running
                    log.exception("twin component %s failed to stop", comp.name)
        self._started.clear()
        await self.server.stop()
        self.audit.close()
        self.clock.close()
        if self._unfreeze is not None:
            self._unfreeze()
            self._unfreeze = None

    async def run_until_signal(self, on_ready: Callable[[dict], None] | None = None,
                               parent_pid: int | None = None) -> None:
        """Start, then serve until SIGINT or SIGTERM (or until `parent_pid` is gone), then stop cleanly."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        watcher = asyncio.create_task(_watch_parent(parent_pid, stopping)) if parent_pid else None
        try:
            info = await self.start()
            if on_ready:
                on_ready(info)
            await stopping.wait()
        finally:
            if watcher is not None:
                watcher.cancel()
            await self.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def run_twin(state_dir: str | Path, profile: str = "minimal", defects: Iterable[str] = (),
             scale: float | None = None, port: int = 0, on_ready: Callable[[dict], None] | None = None,
             watch_history: int = DEFAULT_HISTORY, parent_pid: int | None = None, tls: bool = False) -> None:
    """Blocking: run a twin in the foreground until SIGINT/SIGTERM (or until `parent_pid` exits)."""
    twin = Twin(state_dir, profile=profile, defects=defects, scale=scale, port=port, watch_history=watch_history,
                tls=tls)
    asyncio.run(twin.run_until_signal(on_ready, parent_pid=parent_pid))


async def _watch_parent(parent_pid: int, stopping: asyncio.Event, every_s: float = 0.5) -> None:
    """A twin started for a drill run must not outlive it, even when the run is SIGKILLed."""
    while not stopping.is_set():
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            log.warning("parent process %d is gone: stopping the twin", parent_pid)
            stopping.set()
            return
        except PermissionError:  # alive, owned by someone else
            pass
        await asyncio.sleep(every_s)


def write_kubeconfig(path: Path, url: str) -> None:
    """A kubeconfig whose current context `twin` points at `url` with a dummy token."""
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "twin", "cluster": {"server": url}}],
        "users": [{"name": "twin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": "twin", "namespace": "default"}}],
        "current-context": "twin",
    }
    _write_atomic(path, yaml.safe_dump(doc, sort_keys=False))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _provider(spec: str) -> Callable[[Twin], None]:
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def _load_profile(name: str, defects: tuple[str, ...]) -> Any:
    try:
        from drills.twin.profile import load_profile  # type: ignore[import-not-found]
    except ImportError:
        log.warning("twin profiles are not available yet: starting a bare twin (namespaces only)")
        return None
    return load_profile(name, defects=defects)


def _seed_objects(profile: Any) -> list[dict]:
    try:
        from drills.twin.seed import seed_objects  # type: ignore[import-not-found]
    except ImportError:
        log.warning("twin seed is not available yet: starting a bare twin (namespaces only)")
        return []
    return seed_objects(profile)


def _system_namespaces() -> list[dict]:
    """The namespaces every cluster has, whatever the profile says."""
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            for ns in ("default", "kube-system", "kube-public", "kube-node-lease")]
