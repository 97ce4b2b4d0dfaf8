"""Ground truth for model-serving Deployments: when every desired replica is Ready, and when not.

Counts Ready pods (Ready condition True, not terminating) that match the Deployment's selector,
against its desired replicas, from the shared pod and Deployment informers; records `all_ready` /
`not_all_ready` transitions in the hub's Truth.

Each replica also prints vLLM's startup log (`vllm_log`): the engine lines when its container starts,
and the load phases when it turns Ready, stamped so that they add up to the twin's model-load delay
(container start → Ready).
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.api.selectors import match_label_selector
from drills.twin.controllers.base import Controller
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
        self.logged: dict[str, set[str]] = {}  # pod uid → vLLM log parts written ("start", "ready")
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
        done = self.logged.setdefault(uid, set())
        if _started_at(pod) is None:
            return
        if "start" not in done or ("ready" not in done and pod_ready(pod)):
            key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
            self.serves[key] = spec
            self.enqueue(("vllm-log", *key))

    async def _write_log(self, ns: str, name: str) -> None:
        pod = self.pods.get(ns, name)
        if pod is None:
            return
        spec = self.serves.get((ns, name))
        uid = pod["metadata"].get("uid", "")
        done = self.logged.setdefault(uid, set())
        started = _started_at(pod)
        if spec is None or started is None:
            return
        container = pod["spec"]["containers"][0]
        image = container.get("image", "")
        batches: list[tuple[float, list[str]]] = []
        if "start" not in done:
            done.add("start")
            batches.append((started, vllm_log.startup(spec, image, started, uid)))
        ready_at = _ready_at(pod)
        if "ready" not in done and ready_at is not None:
            done.add("ready")
            batches += vllm_log.loaded(spec, started, ready_at, uid)
        client = self.ctx.client
        url = f"{client.base_url}/twin/v1/namespaces/{ns}/pods/{name}/log"
        for at, lines in batches:
            async with client.session.post(url, params={"at": f"{at:.6f}", "container": container["name"]},
                                           data="\n".join(lines) + "\n",
                                           headers={"Content-Type": "text/plain"}) as resp:
                if resp.status >= 400:
                    log.debug("vLLM log append to %s/%s: HTTP %s", ns, name, resp.status)
                    return

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
