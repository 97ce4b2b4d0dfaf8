"""Deployment controller: one ReplicaSet per pod template (named by `pod-template-hash`), rolling
update or recreate between them, and the status `kubectl rollout status` reads.

Mirrors kube's deployment controller closely enough for real tooling: revision annotations,
surge/unavailable arithmetic, Available/Progressing conditions with lastUpdateTime, and
ProgressDeadlineExceeded when a rollout stalls past `progressDeadlineSeconds` (twin time).
"""

from __future__ import annotations

import copy
import json
import logging
import math

from drills.core.clock import parse_iso, to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.podutil import OwnerIndex, condition, owner_ref, set_condition

__all__ = ["DeploymentController", "pod_template_hash", "rolling_limits"]

log = logging.getLogger(__name__)

DEPLOYMENTS = by_kind("apps/v1", "Deployment")
REPLICASETS = by_kind("apps/v1", "ReplicaSet")
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand.SafeEncodeString alphabet
_COMPONENT = "deployment-controller"


def pod_template_hash(template: dict, collision_count: int = 0) -> str:
    """FNV-1a (32 bit) of the template, encoded like kube's (digits mapped to a vowel-free alphabet)."""
    data = json.dumps(_strip_hash(template), sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(h))


def rolling_limits(deploy: dict) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as absolute pod counts (surge rounds up, unavailable down)."""
    spec = deploy.get("spec") or {}
    replicas = int(spec.get("replicas", 1) or 0)
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas, up=True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


class DeploymentController(Controller):
    name = "deployment"

    def setup(self) -> None:
        self.deploys = self.ctx.informers.informer(DEPLOYMENTS)
        self.rsets = self.ctx.informers.informer(REPLICASETS)
        self.index = OwnerIndex()
        self.deploys.add_handler(self._on_deploy)
        self.rsets.add_handler(self._on_rs)

    def _on_deploy(self, etype: str, obj: dict, old: dict | None) -> None:
        if etype != "DELETED":
            self.enqueue((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_rs(self, etype: str, obj: dict, old: dict | None) -> None:
        self.index.update(etype, obj)
        for ref in (obj["metadata"].get("ownerReferences") or ()):
            if ref.get("controller") and ref.get("kind") == "Deployment":
                self.enqueue((obj["metadata"]["namespace"], ref["name"]))

    async def reconcile(self, key) -> None:
        namespace, name = key
        deploy = self.deploys.get(namespace, name)
        if deploy is None or deploy["metadata"].get("deletionTimestamp"):
            return
        rsets = [r for r in (self.rsets.get(*k) for k in self.index.keys(deploy["metadata"]["uid"])) if r]
        new, olds = _split(deploy, rsets)
        created = False
        if not (deploy["spec"].get("paused")):
            if new is None:
                new = await self._create_new(deploy, olds)
                created = new is not None
                if new is not None:
                    rsets.append(new)
            else:
                await self._ensure_revision(deploy, new, olds)
            if new is not None:
                if (deploy["spec"].get("strategy") or {}).get("type") == "Recreate":
                    await self._recreate(deploy, new, olds)
                else:
                    await self._rolling(deploy, new, olds)
        await self._write_status(deploy, new, olds, created)

    # -- scaling ------------------------------------------------------------------------------------
    async def _create_new(self, deploy: dict, olds: list[dict]) -> dict | None:
        meta, spec = deploy["metadata"], deploy["spec"]
        collisions = int((deploy.get("status") or {}).get("collisionCount") or 0)
        hsh = pod_template_hash(spec.get("template") or {}, collisions)
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = hsh
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = hsh
        replicas = int(spec.get("replicas", 1) or 0)
        surge, _ = rolling_limits(deploy)
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            start = 0 if any(_spec_replicas(o) or _status(o, "replicas") for o in olds) else replicas
        else:
            start = max(0, min(replicas, replicas + surge - sum(_spec_replicas(o) for o in olds)))
        revision = _max_revision(olds) + 1
        rs = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f'{meta["name"]}-{hsh}', "namespace": meta["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {REVISION: str(revision), DESIRED: str(replicas),
                                         MAX_REPLICAS: str(replicas + surge)},
                         "ownerReferences": [owner_ref(deploy)]},
            "spec": {"replicas": start, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                     "selector": selector, "template": template},
        }
        try:
            created = await self.ctx.client.create(REPLICASETS, rs)
        except ApiError as err:
            if err.status == 409:  # a ReplicaSet of that name exists but is not ours: hash collision
                await self.ctx.client.patch(DEPLOYMENTS, meta["namespace"], meta["name"],
                                            {"status": {"collisionCount": collisions + 1}}, sub="status")
                self.enqueue((meta["namespace"], meta["name"]))
                return None
            raise
        await record_event(self.ctx.client, deploy, "ScalingReplicaSet",
                           f'Scaled up replica set {created["metadata"]["name"]} from 0 to {start}',
                           component=_COMPONENT, clock=self.ctx.clock)
        await self._set_deploy_revision(deploy, revision)
        return created

    async def _ensure_revision(self, deploy: dict, new: dict, olds: list[dict]) -> None:
        revision = int((new["metadata"].get("annotations") or {}).get(REVISION, "0") or 0)
        top = _max_revision(olds)
        if revision <= top:  # rolled back to an older template: it becomes the newest revision
            revision = top + 1
            await self.ctx.client.patch(REPLICASETS, new["metadata"]["namespace"], new["metadata"]["name"],
                                        {"metadata": {"annotations": {REVISION: str(revision)}}})
        await self._set_deploy_revision(deploy, revision)

    async def _set_deploy_revision(self, deploy: dict, revision: int) -> None:
        if (deploy["metadata"].get("annotations") or {}).get(REVISION) != str(revision):
            await self.ctx.client.patch(DEPLOYMENTS, deploy["metadata"]["namespace"], deploy["metadata"]["name"],
                                        {"metadata": {"annotations": {REVISION: str(revision)}}})

    async def _recreate(self, deploy: dict, new: dict, olds: list[dict]) -> None:
        for old in olds:
            if _spec_replicas(old):
                await self._scale(deploy, old, 0)
        if any(_status(o, "replicas") for o in olds) or any(_spec_replicas(o) for o in olds):
            return  # wait until every old pod is gone
        await self._scale(deploy, new, int(deploy["spec"].get("replicas", 1) or 0))

    async def _rolling(self, deploy: dict, new: dict, olds: list[dict]) -> None:
        replicas = int(deploy["spec"].get("replicas", 1) or 0)
        surge, unavailable = rolling_limits(deploy)
        everyone = [new, *olds]
        new_replicas = _spec_replicas(new)
        if new_replicas > replicas:
            await self._scale(deploy, new, replicas)
            new_replicas = replicas
        elif new_replicas < replicas:
            room = replicas + surge - sum(_spec_replicas(r) for r in everyone)
            if room > 0:
                new_replicas += min(room, replicas - new_replicas)
                await self._scale(deploy, new, new_replicas)
        olds = sorted((o for o in olds if _spec_replicas(o) > 0), key=lambda r: r["metadata"]["creationTimestamp"])
        if not olds:
            return
        min_available = replicas - unavailable
        new_unavailable = new_replicas - _status(new, "availableReplicas")
        total = new_replicas + sum(_spec_replicas(o) for o in olds)
        budget = total - min_available - new_unavailable
        if budget <= 0:
            return
        targets = {o["metadata"]["name"]: _spec_replicas(o) for o in olds}
        for old in olds:  # unhealthy old pods go first: removing them costs no availability
            unhealthy = max(0, targets[old["metadata"]["name"]] - _status(old, "availableReplicas"))
            take = min(unhealthy, budget)
            targets[old["metadata"]["name"]] -= take
            budget -= take
        available = _status(new, "availableReplicas") + sum(
            min(_status(o, "availableReplicas"), targets[o["metadata"]["name"]]) for o in olds)
        room = min(budget, available - min_available)
        for old in olds:
            take = max(0, min(targets[old["metadata"]["name"]], room))
            targets[old["metadata"]["name"]] -= take
            room -= take
        for old in olds:
            if targets[old["metadata"]["name"]] != _spec_replicas(old):
                await self._scale(deploy, old, targets[old["metadata"]["name"]])

    async def _scale(self, deploy: dict, rs: dict, replicas: int) -> None:
        before = _spec_replicas(rs)
        surge, _ = rolling_limits(deploy)
        want = int(deploy["spec"].get("replicas", 1) or 0)
        await self.ctx.client.patch(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"], {
            "metadata": {"annotations": {DESIRED: str(want), MAX_REPLICAS: str(want + surge)}},
            "spec": {"replicas": replicas}})
        rs.setdefault("spec", {})["replicas"] = replicas
        verb = "up" if replicas > before else "down"
        await record_event(self.ctx.client, deploy, "ScalingReplicaSet",
                           f'Scaled {verb} replica set {rs["metadata"]["name"]} from {before} to {replicas}',
                           component=_COMPONENT, clock=self.ctx.clock)

    # -- status -------------------------------------------------------------------------------------
    async def _write_status(self, deploy: dict, new: dict | None, olds: list[dict], created: bool) -> None:
        spec, cur = deploy["spec"], deploy.get("status") or {}
        now, now_iso = self.ctx.clock.timestamp(), to_iso(self.ctx.clock.now())
        everyone = ([new] if new else []) + olds
        replicas = int(spec.get("replicas", 1) or 0)
        _, unavailable = rolling_limits(deploy)
        status = {
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": sum(_status(r, "replicas") for r in everyone),
            "updatedReplicas": _status(new, "replicas") if new else 0,
            "readyReplicas": sum(_status(r, "readyReplicas") for r in everyone),
            "availableReplicas": sum(_status(r, "availableReplicas") for r in everyone),
        }
        status["unavailableReplicas"] = max(0, replicas - status["availableReplicas"])
        if cur.get("collisionCount"):
            status["collisionCount"] = cur["collisionCount"]
        conds = list(cur.get("conditions") or ())
        if status["availableReplicas"] >= replicas - unavailable:
            avail = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "message": "Deployment has minimum availability."}
        else:
            avail = {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                     "message": "Deployment does not have minimum availability."}
        conds = set_condition(conds, avail, now_iso, update_time=True)
        conds = self._progressing(deploy, new, status, conds, created, now, now_iso)
        status["conditions"] = conds
        counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "observedGeneration")
        if any(cur.get(k) != status.get(k) for k in (*counts, "unavailableReplicas", "conditions")):
            await self.ctx.client.patch(DEPLOYMENTS, deploy["metadata"]["namespace"], deploy["metadata"]["name"],
                                        {"status": status}, sub="status")

    def _progressing(self, deploy: dict, new: dict | None, status: dict, conds: list[dict], created: bool,
                     now: float, now_iso: str) -> list[dict]:
        spec, cur = deploy["spec"], deploy.get("status") or {}
        replicas = int(spec.get("replicas", 1) or 0)
        rs_name = new["metadata"]["name"] if new else ""
        complete = (new is not None and status["updatedReplicas"] == replicas and status["replicas"] == replicas
                    and status["availableReplicas"] >= replicas)
        prior = condition({"status": {"conditions": conds}}, "Progressing")
        if spec.get("paused"):
            return set_condition(conds, {"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused",
                                         "message": "Deployment is paused"}, now_iso, update_time=True)
        if complete:
            return set_condition(conds, {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                                         "message": f'ReplicaSet "{rs_name}" has successfully progressed.'},
                                 now_iso, update_time=True)
        if created:
            return set_condition(conds, {"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated",
                                         "message": f'Created new replica set "{rs_name}"'}, now_iso, update_time=True)
        # progress as kube's DeploymentProgressing: more updated/ready/available pods, or fewer old ones
        moved = prior is None or any(int(status.get(k) or 0) > int(cur.get(k) or 0)
                                     for k in ("updatedReplicas", "readyReplicas", "availableReplicas")) or (
            status["replicas"] - status["updatedReplicas"]
            < int(cur.get("replicas") or 0) - int(cur.get("updatedReplicas") or 0))
        deadline = spec.get("progressDeadlineSeconds")
        if moved:
            out = [c for c in conds if c.get("type") != "Progressing"]
            fresh = {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                     "message": f'ReplicaSet "{rs_name}" is progressing.', "lastUpdateTime": now_iso,
                     "lastTransitionTime": (prior or {}).get("lastTransitionTime", now_iso)
                     if (prior or {}).get("status") == "True" else now_iso}
            if deadline:
                self.enqueue_after((deploy["metadata"]["namespace"], deploy["metadata"]["name"]), float(deadline) + 1)
            return out + [fresh]
        if deadline and prior and prior.get("reason") not in ("ProgressDeadlineExceeded", "NewReplicaSetAvailable"):
            last = parse_iso(prior.get("lastUpdateTime") or prior.get("lastTransitionTime") or now_iso).timestamp()
            if now - last > float(deadline):
                return set_condition(conds, {"type": "Progressing", "status": "False",
                                             "reason": "ProgressDeadlineExceeded",
                                             "message": f'ReplicaSet "{rs_name}" has timed out progressing.'},
                                     now_iso, update_time=True)
            self.enqueue_after((deploy["metadata"]["namespace"], deploy["metadata"]["name"]),
                               float(deadline) - (now - last) + 1)
        return conds


def _split(deploy: dict, rsets: list[dict]) -> tuple[dict | None, list[dict]]:
    """(the ReplicaSet whose template equals the Deployment's, the others) — newest match wins."""
    want = _canon(deploy["spec"].get("template") or {})
    new, olds = None, []
    for rs in sorted(rsets, key=lambda r: r["metadata"]["creationTimestamp"]):
        if rs["metadata"].get("deletionTimestamp"):
            continue
        if _canon(rs["spec"].get("template") or {}) == want:
            if new is not None:
                olds.append(new)
            new = rs
        else:
            olds.append(rs)
    return new, olds


def _strip_hash(template: dict) -> dict:
    out = copy.deepcopy(template)
    labels = (out.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return out


def _canon(template: dict) -> str:
    return json.dumps(_strip_hash(template), sort_keys=True)


def _resolve(value, total: int, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        raw = float(text[:-1]) * total / 100
        return math.ceil(raw) if up else math.floor(raw)
    return int(text)


def _spec_replicas(rs: dict) -> int:
    return int((rs.get("spec") or {}).get("replicas", 1) or 0)


def _status(rs: dict | None, field: str) -> int:
    return int(((rs or {}).get("status") or {}).get(field) or 0)


def _max_revision(rsets: list[dict]) -> int:
    return max((int((r["metadata"].get("annotations") or {}).get(REVISION, "0") or 0) for r in rsets), default=0)
