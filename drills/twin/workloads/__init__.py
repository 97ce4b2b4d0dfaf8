"""The twin's workloads: training jobs that log like NCCL jobs, model servers behind an OpenAI-style
gateway, the switch fabric that drives NCCL's behaviour, and the ground truth of every recovery.

`install(twin)` is the component provider (`runtime.COMPONENT_PROVIDERS`): it creates the hub
(truth + checkpoint store + leaf states), serves `GET /twin/v1/truth`, and registers the fabric and
gateway components. The training and serving-truth controllers run inside the controller manager
(`controllers.manager.CONTROLLERS`) and find the hub on the twin.

twin.json keys added: `switches`, `switch_inventory`, `known_hosts`, `switch_key` (fabric),
`gateway`, `gateway_models` (gateway), `truth` (URL), `checkpoint_store` (directory: the mounted store
with a modelled bandwidth when the profile sets `storage.io_bandwidth_mb_s`), `checkpoint_store_model`.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from drills.twin.workloads.hub import WorkloadHub, hub_for

__all__ = ["install", "WorkloadHub", "hub_for", "TRUTH_APP_KEY"]

log = logging.getLogger(__name__)

TRUTH_APP_KEY = web.AppKey("truth", object)  # the API server's app key `GET /twin/v1/truth` reads


def install(twin: Any) -> None:
    """Component provider: hub, truth route data, fabric SSH switches, inference gateway."""
    from drills.twin.exporters import install as install_exporters
    from drills.twin.workloads.fabric_component import FabricComponent
    from drills.twin.workloads.inference_gateway import install_gateway

    hub = hub_for(twin)
    twin.server.app[TRUTH_APP_KEY] = hub.truth
    twin.store.volume_dir = hub.volume_dir  # pods' PersistentVolumeClaims are the checkpoint store (exec find/cat)
    twin.store.unlink_denied = bool(hub.storage is not None and hub.storage.unlink_denied)
    # Registered here (before the server starts) rather than in twin_routes: the truth lives with the workloads.
    twin.server.app.router.add_get("/twin/v1/truth", _truth)

    async def start(t: Any) -> dict:
        return {"truth": f"{t.url}/twin/v1/truth"}

    twin.add_component("workloads", start)
    twin.add_component("store", lambda t: hub.mount_store(), hub.unmount_store)
    fabric = FabricComponent(twin)
    twin.add_component("fabric", fabric.start, fabric.stop)
    install_gateway(twin)
    install_exporters(twin)


async def _truth(request: Any) -> Any:
    """`GET /twin/v1/truth[?kind=K][&subject=ns/name][&since=EPOCH]`: the snapshot, records filtered."""
    truth = request.app[TRUTH_APP_KEY]
    snap = truth.snapshot()
    q = request.query
    if q.get("kind") or q.get("subject") or q.get("since"):
        since = float(q["since"]) if q.get("since") else None
        snap["records"] = truth.records(kind=q.get("kind") or None, subject=q.get("subject") or None, since=since)
    return web.json_response(snap)
