"""The kubelets of every twin node, as one controller executing the pod stages of the profile
(`drills/twin/stages/pod.yaml`, kwok-style): accept → pull (cached vs cold) → start → ready.

- Context the stages get: `now`, `host_ip`, `pod_ip`, `image_cached` (the image is in the node's
  cache: `status.images` plus what this kubelet pulled; a pull adds the image to the node's
  `status.images`), `readiness` (the pod annotation `twin.gpu-drills.io/startup-s` in twin seconds,
  else the profile's `timings.pod_startup`, already jittered per container start: `readiness_delay`)
  and `delay` (the stage's actual delay).
- A node whose kubelet is stopped (node annotation `twin.gpu-drills.io/kubelet: stopped`, see
  `twin_node_routes`) runs no stages; when it starts again its pods are picked up where they were.
- Deletion: the API server marks a running pod (deletionTimestamp = now + grace); the
  `pod-terminating` stage takes it out of Ready at once, `pod-terminate` stops its containers after
  `termination` twin seconds — the process's own stop time (pod annotation `twin.gpu-drills.io/stop-s`,
  else `timings.container_stop`), at most what is left of the grace period — each container then shows
  its final `terminated` state (`stop`: 0 Completed, or 137 Error when SIGKILLed), and `pod-remove`
  removes it with grace 0. Its `Killing` event is recorded when the termination starts, as a real kubelet's is; a pod
  removed at once (`--force --grace-period=0`) gets it when it is gone.
- Container exit: set the pod annotation `twin.gpu-drills.io/exit` to JSON
  `{"code": 1, "reason": "Error", "message": "...", "container": "name"}` (or
  `POST /twin/v1/namespaces/{ns}/pods/{name}/exit` with that body, which writes it). The kubelet
  terminates the container with that exit code and applies `restartPolicy`: Never (or OnFailure
  with code 0) → phase Failed/Succeeded; Always/OnFailure → restartCount+1, `lastState.terminated`,
  CrashLoopBackOff back-off (0 s, then 10 s doubling to 300 s), log rotated to `previous`, running
  again and Ready after the readiness delay. The annotation is removed once handled (kubelet_exits.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Hashable

from drills.core.clock import parse_iso, to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.kubelet_exits import ContainerExits
from drills.twin.controllers.client import ApiError, key_of
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import (
    EXIT_ANNOTATION, STOP_ANNOTATION, container_statuses, kubelet_stopped, node_ip, pod_ip, pre_stop_seconds,
    readiness_delay,
    stop_outcome,
)
from drills.twin.stages import Stage

__all__ = ["Kubelet", "KUBELET_AGENT"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")
KUBELET_AGENT = "kubelet/v1.32.4 (linux/amd64) twin"


@dataclass
class _Planned:
    stage: str
    uid: str
    due: float
    delay: float


class Kubelet(ContainerExits, Controller):
    name = "kubelet"
    workers = 16  # a real cluster has one kubelet per node: one slow pod must not hold up the others

    def setup(self) -> None:
        from drills.twin.controllers.client import TwinClient

        self.client = TwinClient(self.ctx.client.base_url, user_agent=KUBELET_AGENT, app=self.ctx.client.app)
        self.pods, self.nodes = self.ctx.informers.informer(PODS), self.ctx.informers.informer(NODES)
        profile = self.ctx.profile
        self.timings = getattr(profile, "timings", None)
        stages = getattr(profile, "stages", None) or {}
        self.stages: list[Stage] = [s for s in stages.values() if s.resource == "Pod"]
        self._planned: dict[tuple, _Planned] = {}
        self._restart_due: dict[tuple, tuple[str, float]] = {}
        self._exiting: dict[tuple, dict] = {}  # exit requests taken off the pod, not yet applied
        self._images: dict[str, set[str]] = {}
        self._gone: dict[tuple, dict] = {}
        self._killing: dict[tuple, dict] = {}  # pods whose termination started: their Killing event is due
        self._killed_uids: set[str] = set()  # pods whose Killing event was recorded
        self._stopped: set[str] = set()
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)

    async def stop(self) -> None:
        await super().stop()
        await self.client.close()

    async def reconcile(self, key: Hashable) -> None:
        if key[0] in ("gone", "killing"):  # Killing when the termination starts; at removal only if it never did
            pod = self._gone.pop(key[1], None) if key[0] == "gone" else self._killing.pop(key[1], None)
            uid = (pod or {}).get("metadata", {}).get("uid")
            if key[0] == "killing" or uid not in self._killed_uids:
                self._killed_uids.add(uid)
                await self._killed(pod)
            if key[0] == "gone":
                self._killed_uids.discard(uid)
            return
        pod = self.pods.get(*key)
        if pod is None:
            self._forget(key)
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self.nodes.get("", node_name) if node_name else None
        if node is None or kubelet_stopped(node):
            return
        if (pod["metadata"].get("annotations") or {}).get(EXIT_ANNOTATION) or key in self._restart_due \
                or key in self._exiting:
            fresh = await self.client.get(PODS, *key)  # the cache may trail our own last write
            if fresh is None:
                return
            if (fresh["metadata"].get("annotations") or {}).get(EXIT_ANNOTATION) or key in self._exiting:
                await self._exit(fresh)
            elif key in self._restart_due:
                await self._restart(fresh, key)
            return
        await self._step(key, pod, node)

    # -- informer handlers ----------------------------------------------------------------------
    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        key = key_of(pod)
        if etype == "DELETED":
            self._forget(key)
            if (pod.get("spec") or {}).get("nodeName"):
                self._gone[key] = pod
                self.enqueue(("gone", key))
            return
        if (pod.get("spec") or {}).get("nodeName"):
            if pod["metadata"].get("deletionTimestamp") and pod["metadata"].get("uid") not in self._killed_uids \
                    and key not in self._killing:
                self._killing[key] = pod
                self.enqueue(("killing", key))
            self.enqueue(key)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        stopped = etype != "DELETED" and kubelet_stopped(node)
        if stopped:
            self._stopped.add(name)
        elif name in self._stopped:
            self._stopped.discard(name)
            for pod in self.pods.items():  # the kubelet is back: resume its pods
                if (pod.get("spec") or {}).get("nodeName") == name:
                    self.enqueue(key_of(pod))

    def _forget(self, key: tuple) -> None:
        self._planned.pop(key, None)
        self._exiting.pop(key, None)
        self._restart_due.pop(key, None)

    # -- stages ---------------------------------------------------------------------------------
    async def _step(self, key: tuple, pod: dict, node: dict) -> None:
        view = _with_phase(pod)
        ctx = self._context(pod, node)
        stage = next((s for s in self.stages if s.matches(view, ctx)), None)
        if stage is None:
            self._planned.pop(key, None)
            return
        # a second DELETE may shorten the grace period: the termination plan follows deletionTimestamp
        now = self.ctx.clock.timestamp()
        uid = pod["metadata"].get("uid", "") + pod["metadata"].get("deletionTimestamp", "")
        plan = self._planned.get(key)
        if plan is None or plan.stage != stage.name or plan.uid != uid:
            delay = stage.delay.seconds(self.timings, ctx, self.ctx.rng)
            plan = self._planned[key] = _Planned(stage.name, uid, now + delay, delay)
            for event in stage.render_enter_events(view, {**ctx, "delay": delay}):
                await self._event(pod, node, event)
        if now < plan.due:
            self.enqueue_after(key, plan.due - now)
            return
        self._planned.pop(key, None)
        ctx["delay"] = plan.delay
        ctx["now"] = to_iso(self.ctx.clock.now())
        rendered = stage.render(view, ctx)
        ns, name = key
        for sub, ptype, body in rendered.patches:
            if sub == "status":  # stage bodies nest under `status` (root: status); older ones did not
                status = body["status"] if isinstance(body.get("status"), dict) else body
                body = {"status": _keep_last_state(status, pod)}
            if await self._patch_pod(pod, body, sub=sub, kind=ptype) is None:
                self._forget(key)
                return
        for event in rendered.events:
            await self._event(pod, node, event)
        if any(c.path == "image_cached" for c in stage.selector.conditions):
            await self._cache_images(node, pod)
        if rendered.delete:
            try:
                await self.client.delete(PODS, ns, name, grace_period_s=0, uid=pod["metadata"].get("uid"))
            except ApiError as err:
                if err.status != 409:  # 409: a namesake replaced it already
                    raise

    async def _patch_pod(self, pod: dict, body: Any, *, sub: str | None = None, kind: str = "strategic") -> dict | None:
        """Patch this very pod: a uid precondition keeps a late write off a namesake that replaced it
        (Volcano re-creates `<job>-<task>-<i>` under the same name). None when it is gone or replaced."""
        if kind != "json" and isinstance(body, dict):
            body = {**body, "metadata": {**(body.get("metadata") or {}), "uid": pod["metadata"].get("uid")}}
        try:
            return await self.client.patch(PODS, *key_of(pod), body, sub=sub, kind=kind)
        except ApiError as err:
            if err.status == 409:
                log.debug("kubelet: %s/%s was replaced; dropping a late write", *key_of(pod))
                return None
            raise

    def _context(self, pod: dict, node: dict) -> dict[str, Any]:
        image = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image", "")
        readiness = readiness_delay(pod, self.timings)
        stop, left = self._stop_times(pod)
        return {"now": to_iso(self.ctx.clock.now()), "host_ip": node_ip(node), "pod_ip": pod_ip(node, pod),
                "image_cached": image in self._node_images(node), "readiness": readiness, "delay": 0.0,
                "termination": max(0.0, min(stop, left)), "stop": stop_outcome(stop, left),
                "container_statuses": container_statuses(pod)}

    def _stop_times(self, pod: dict) -> tuple[float, float]:
        """A deleted pod's containers' stop time (twin seconds) and what is left of its grace period."""
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            return 0.0, 0.0
        try:
            stop = float((meta.get("annotations") or {})[STOP_ANNOTATION])
        except (KeyError, ValueError):
            stop = float(getattr(self.timings, "container_stop", 2.0))
        stop += pre_stop_seconds(pod)  # SIGTERM comes after the preStop hook, the grace period counts from the delete
        return stop, parse_iso(meta["deletionTimestamp"]).timestamp() - self.ctx.clock.timestamp()

    def _node_images(self, node: dict) -> set[str]:
        name = node["metadata"]["name"]
        if name not in self._images:
            self._images[name] = {n for img in (node.get("status") or {}).get("images") or []
                                  for n in img.get("names") or []}
        return self._images[name]

    async def _cache_images(self, node: dict, pod: dict) -> None:
        pool = (getattr(self.ctx.profile, "node_pools", None) or {}).get(
            (node["metadata"].get("labels") or {}).get("gpu-drills.io/pool", ""))
        if pool is not None and not pool.keep_pulled_images:  # image GC: the next pod pulls again
            return
        known = self._node_images(node)
        fresh = [c.get("image") for c in (pod.get("spec") or {}).get("containers") or []
                 if c.get("image") and c.get("image") not in known]
        if not fresh:
            return
        known.update(fresh)
        # every image this kubelet knows, not the cache's list plus this pod's: two pods starting at once on
        # one node would each patch a list without the other's image (a merge patch replaces the list)
        current = self.nodes.get("", node["metadata"]["name"]) or node
        images = list((current.get("status") or {}).get("images") or [])
        listed = {n for img in images for n in img.get("names") or []}
        images += [{"names": [img], "sizeBytes": 8_000_000_000} for img in sorted(known - listed)]
        await self.client.patch(NODES, None, node["metadata"]["name"], {"status": {"images": images}},
                                sub="status", kind="merge")

    async def _event(self, pod: dict, node: dict, event: dict) -> None:
        await record_event(self.client, pod, event["reason"], event["message"], type=event.get("type", "Normal"),
                           component=event.get("source") or "kubelet", clock=self.ctx.clock,
                           host=node["metadata"]["name"])

    async def _killed(self, pod: dict | None) -> None:
        if pod is None:
            return
        node = self.nodes.get("", pod["spec"]["nodeName"])
        if node is None or kubelet_stopped(node):
            return
        for c in (pod.get("spec") or {}).get("containers") or []:
            await record_event(self.client, pod, "Killing", f"Stopping container {c.get('name')}",
                               component="kubelet", clock=self.ctx.clock, host=node["metadata"]["name"])


def _with_phase(pod: dict) -> dict:
    """The pod as stages see it: a missing phase reads Pending, as the API server defaults it."""
    if (pod.get("status") or {}).get("phase"):
        return pod
    return {**pod, "status": {**(pod.get("status") or {}), "phase": "Pending"}}


def _keep_last_state(status: dict, pod: dict) -> dict:
    """containerStatuses is replaced whole by any patch: carry each container's lastState over."""
    items = status.get("containerStatuses")
    if not isinstance(items, list):
        return status
    last = {s.get("name"): s["lastState"] for s in (pod.get("status") or {}).get("containerStatuses") or []
            if s.get("lastState")}
    if not last:
        return status
    return {**status, "containerStatuses": [
        {**i, "lastState": last[i.get("name")]} if i.get("name") in last and "lastState" not in i else i
        for i in items]}

