"""Runs the twin's controllers as one twin component: one API client, shared informers, one clock.

Add a controller by listing "module:Class" in CONTROLLERS; the class takes a ControllerContext,
wires its informers in `setup()` and reconciles keys (see base.Controller).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from drills.twin.controllers.base import Controller, ControllerContext
from drills.twin.controllers.client import TwinClient
from drills.twin.controllers.informer import InformerFactory

if TYPE_CHECKING:
    from drills.twin.runtime import Twin

__all__ = ["CONTROLLERS", "install", "ControllerManager"]

log = logging.getLogger(__name__)

# Order matters only for setup(); all run concurrently.
CONTROLLERS: list[str] = [
    "drills.twin.controllers.replicaset:ReplicaSetController",
    "drills.twin.controllers.replicaset:ReplicationControllerController",
    "drills.twin.controllers.deployment:DeploymentController",
    "drills.twin.controllers.daemonset:DaemonSetController",
    "drills.twin.controllers.volcano:VolcanoJobController",
    "drills.twin.controllers.endpoints:EndpointsController",
    "drills.twin.controllers.disruption:DisruptionController",
    "drills.twin.controllers.batchjob:BatchJobController",
    "drills.twin.controllers.gc:GarbageCollector",
    "drills.twin.controllers.podgc:PodGC",
    "drills.twin.controllers.namespace:NamespaceController",
    "drills.twin.controllers.scheduler:Scheduler",
    "drills.twin.controllers.kubelet:Kubelet",
    "drills.twin.controllers.nodeagent:NodeAgent",
    "drills.twin.controllers.nodelifecycle:NodeLifecycle",
    "drills.twin.controllers.healthagent:NodeHealthAgent",
    "drills.twin.controllers.resubmitter:BatchResubmitter",
    "drills.twin.controllers.pdbpruner:PdbPruner",
    "drills.twin.controllers.remediation:GpuRemediation",
    "drills.twin.workloads.training:TrainingController",
    "drills.twin.workloads.serving:ServingTruthController",
    "drills.twin.workloads.acceptance:AcceptanceController",
    "drills.twin.workloads.fio_pods:FioPodController",
    "drills.twin.workloads.locust_pods:LocustPodController",
]


class ControllerManager:
    def __init__(self, twin: "Twin", names: list[str] | None = None):
        self.twin = twin
        self.names = list(CONTROLLERS if names is None else names)
        self.ctx: ControllerContext | None = None
        self.controllers: list[Controller] = []

    async def start(self, twin: "Twin") -> dict:
        client = TwinClient(twin.url, user_agent="twin-controller-manager", app=twin.server.app)
        self.ctx = ControllerContext(client=client, informers=InformerFactory(client, twin.health, twin.clock),
                                     clock=twin.clock,
                                     profile=twin.profile, health=twin.health)
        self.ctx.twin = twin  # type: ignore[attr-defined]  # for components that need the state dir
        for spec in self.names:
            module, _, cls = spec.partition(":")
            controller = getattr(importlib.import_module(module), cls)(self.ctx)
            controller.setup()
            self.controllers.append(controller)
        self.ctx.informers.start()
        await self.ctx.informers.wait_synced()
        for controller in self.controllers:
            controller.start()
        log.info("twin controllers running: %s", ", ".join(c.name for c in self.controllers))
        return {"controllers": [c.name for c in self.controllers]}

    async def stop(self) -> None:
        for controller in reversed(self.controllers):
            await controller.stop()
        if self.ctx is not None:
            await self.ctx.informers.stop()
            await self.ctx.client.close()


def install(twin: "Twin") -> None:
    """Component provider (see runtime.COMPONENT_PROVIDERS)."""
    manager = ControllerManager(twin)
    # a kubelet now finishes deletions (DELETE with grace 0): running pods terminate gracefully
    twin.store.graceful_pods = True
    twin.store.graceful_namespaces = True  # and the namespace controller empties and finalizes namespaces
    twin.controller_manager = manager  # type: ignore[attr-defined]
    twin.add_component("controllers", manager.start, manager.stop)
