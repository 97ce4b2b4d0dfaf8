"""Ground truth for model-serving Deployments: when every desired replica is Ready, and when not.

Counts Ready pods (Ready condition True, not terminating) that match the Deployment's selector,
against its desired replicas, from the shared pod and Deployment informers; records `all_ready` /
`not_all_ready` transitions in the hub's Truth.

Each replica also prints vLLM's startup log (`vllm_log`) as it goes: the engine lines when its container
starts, each load phase's lines when their time comes, and uvicorn's lines when it turns Ready — so a
replica still loading shows the phase it is in, and the phases add up to the twin's startup delay.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api import status as st
from drills.twin.api.resources import by_kind
from drills.twin.api.selectors import match_label_selector
from drills.twin.api.twin_routes import write_stdout
from drills.twin.controllers.base import Controller
from drills.twin.controllers.nodeutil import startup_delay
from drills.twin.workloads import vllm_log
from drills.twin.workloads.hub import hub_for

__all__ = ["ServingTruthController", "pod_ready"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
DEPLOYMENTS = by_kind("apps/v1", "Deployment")


class ServingTruthController(Controller):
    name = "serving-truth"

    def setup(self) -> None:
        ctx = self.ctx
        self.hub = hub_for(ctx.twin)  # type: ignore[attr-defined]
        profile = ctx.profile
        deps = profile.workloads.inference.values() if profile is not None else []
        self.watched = {(d.namespace, d.name): d for d in deps}
        self.ready: dict[tuple[str, str], set[str]] = {key: set() for key in self.watched}
        self.all_ready: dict[tuple[str, str], bool | None] = {key: None for key in self.watched}
        self.pods = ctx.informers.informer(PODS)
        self.deployments = ctx.informers.informer(DEPLOYMENTS)
        self.pods.add_handler(self._on_pod)
        self.deployments.add_handler(self._on_deployment)
        self.plans: dict[str, list] = {}  # pod uid → its vLLM log batches (time, lines)
        self.written: dict[str, int] = {}  # pod uid → batches printed so far
        self.finished: set[str] = set()  # pod uids whose log reached the server-ready lines
        self.serves: dict[tuple[str, str], object] = {}  # pod → the InferenceDeployment it serves

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        meta = pod["metadata"]
        ns = meta.get("namespace", "")
        for key in self.watched:
            if key[0] != ns:
                continue
            dep = self.deployments.get(*key)
            selector = ((dep or {}).get("spec") or {}).get("selector") or {"matchLabels": {"app": key[1]}}
            if not match_label_selector(selector, meta.get("labels") or {}):
                continue
            if etype != "DELETED":
                self._maybe_log(pod, self.watched[key])
            was = meta["name"] in self.ready[key]
            now = etype != "DELETED" and pod_ready(pod)
            if now:
                self.ready[key].add(meta["name"])
            else:
                self.ready[key].discard(meta["name"])
            if was != now:
                self.enqueue(key)

    def _on_deployment(self, etype: str, dep: dict, old: dict | None) -> None:
        key = (dep["metadata"].get("namespace", ""), dep["metadata"]["name"])
        if key in self.watched:
            self.enqueue(key)

    def _maybe_log(self, pod: dict, spec) -> None:
        uid = pod["metadata"].get("uid", "")
        if _started_at(pod) is None or uid in self.finished:
            return
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        self.serves[key] = spec
        self.enqueue(("vllm-log", *key))

    async def _write_log(self, ns: str, name: str) -> None:
        """Print the replica's vLLM lines whose time has come; the rest when it turns Ready (clamped to then)."""
        pod = self.pods.get(ns, name)
        spec = self.serves.get((ns, name))
        started = _started_at(pod) if pod is not None else None
        if pod is None or spec is None or started is None:
            return
        uid = pod["metadata"].get("uid", "")
        if uid in self.finished:
            return
        container = pod["spec"]["containers"][0]
        if uid not in self.plans:  # planned for the Ready the kubelet will set (the same jittered delay)
            expected = started + startup_delay(pod, self.ctx.profile.timings)
            self.plans[uid] = vllm_log.plan(spec, container.get("image", ""), started, expected, uid, spec.graph_capture)
            self.written[uid] = 0
        batches, done = self.plans[uid], self.written[uid]
        now = self.ctx.clock.timestamp()
        probed = bool(container.get("readinessProbe"))  # without a probe, Ready says nothing of the server
        ready_at = _ready_at(pod) if probed else (batches[-1][0] if now >= batches[-1][0] else None)
        if ready_at is not None:
            due = [(min(at, ready_at), lines) for at, lines in batches[done:-1]] + [(ready_at, batches[-1][1])]
        else:
            due = [(at, lines) for at, lines in batches[done:-1] if at <= now]
        for at, lines in due:
            if not self._append(ns, name, container["name"], at, lines):
                return
            self.written[uid] += 1
        if ready_at is not None:
            self.finished.add(uid)
            self.plans.pop(uid, None)
        elif self.written[uid] < len(batches) - (1 if probed else 0):
            self.enqueue_after(("vllm-log", ns, name), batches[self.written[uid]][0] - now)

    def _append(self, ns: str, name: str, container: str, at: float, lines: list[str]) -> bool:
        """vLLM's startup lines into the pod's log, in-process as a container runtime writes it; False once gone."""
        try:
            write_stdout(self.ctx.twin.store, ns, name, container, lines, at)  # type: ignore[attr-defined]
        except st.ApiError as err:
            log.debug("vLLM log append to %s/%s: %s", ns, name, err)
            return False
        return True

    async def reconcile(self, key: Hashable) -> None:
        if key[0] == "vllm-log":  # type: ignore[index]
            await self._write_log(key[1], key[2])  # type: ignore[index]
            return
        dep = self.deployments.get(*key)  # type: ignore[misc]
        desired = int(((dep or {}).get("spec") or {}).get("replicas", self.watched[key].replicas))  # type: ignore[index]
        ready = len(self.ready[key])  # type: ignore[index]
        subject = f"{key[0]}/{key[1]}"  # type: ignore[index]
        state = desired > 0 and ready >= desired
        truth = self.hub.truth
        truth.update("inference", subject, desired_replicas=desired, ready_replicas=ready, all_ready=state)
        if state != self.all_ready[key]:  # type: ignore[index]
            first = self.all_ready[key] is None  # type: ignore[index]
            self.all_ready[key] = state  # type: ignore[index]
            if state or not first:
                truth.record("inference", subject, "all_ready" if state else "not_all_ready", ready=ready,
                             desired=desired)


def _started_at(pod: dict) -> float | None:
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        at = ((s.get("state") or {}).get("running") or {}).get("startedAt")
        if at:
            return _ts(at)
    return None


def _ready_at(pod: dict) -> float | None:
    if not pod_ready(pod):
        return None
    cond = next(c for c in pod["status"]["conditions"] if c.get("type") == "Ready")
    return _ts(cond["lastTransitionTime"]) if cond.get("lastTransitionTime") else None


def _ts(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def pod_ready(pod: dict) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
