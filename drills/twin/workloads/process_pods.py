"""Pods whose container the twin runs as a real local process (fio, locust): one task per Running pod,
cancelled (SIGTERM, the process stops in its own time) when the pod is deleted or terminating."""

from __future__ import annotations

import asyncio
from typing import Any, Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import key_of

__all__ = ["ProcessPodController"]

PODS = by_kind("v1", "Pod")


class ProcessPodController(Controller):
    """Subclasses say which pods are theirs (`command(pod)`, None: not ours) and start a Running one's
    process (`launch(key, pod)` → the task, or None to try again later)."""

    def __init__(self, ctx: Any):
        super().__init__(ctx)
        self.runs: dict[Hashable, asyncio.Task] = {}

    def command(self, pod: dict) -> Any:
        raise NotImplementedError

    def launch(self, key: Hashable, pod: dict) -> asyncio.Task | None:
        raise NotImplementedError

    def setup(self) -> None:
        self.pods = self.ctx.informers.informer(PODS)
        self.pods.add_handler(self._on_pod)

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        if self.command(pod) is not None:
            self.enqueue(key_of(pod))

    async def stop(self) -> None:
        for task in self.runs.values():
            task.cancel()
        await asyncio.gather(*self.runs.values(), return_exceptions=True)
        await super().stop()

    async def reconcile(self, key: Hashable) -> None:
        pod = self.pods.get(*key)  # type: ignore[misc]
        task = self.runs.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            if task is not None and not task.done():
                task.cancel()  # SIGTERM; the process stops in its own time, its log goes with the pod
            return
        if task is None and (pod.get("status") or {}).get("phase") == "Running":
            started = self.launch(key, pod)
            if started is not None:
                self.runs[key] = started
