"""A container that exits, and its restart: the half of the twin's kubelet (kubelet.py) that applies `restartPolicy`.

An exit is asked for with the pod annotation `twin.gpu-drills.io/exit` (JSON `{"code", "reason", "message",
"container"}`, or a bare exit code): the kubelet takes the request off the pod first, then writes the container's
`terminated` state — phase Failed/Succeeded when the policy does not restart it (Never, or OnFailure with code 0),
else restartCount+1, `lastState.terminated` and CrashLoopBackOff, and a restart after kubelet's back-off (at once
the first time, then 10 s doubling to 5 min) with the log rotated to `previous`. Kept apart from the stages because
it is the one path that does not follow them: an exit can come at any stage.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.client import ApiError, key_of
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import EXIT_ANNOTATION

__all__ = ["ContainerExits", "backoff"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
_MAX_BACKOFF = 300.0


class ContainerExits:
    """Mixed into the Kubelet controller: uses its `ctx`, `client`, `_exiting`, `_restart_due`, `_planned`,
    `_patch_pod`, `_forget` and `enqueue_after`."""

    async def _exit(self, pod: dict) -> None:
        ns, name = key_of(pod)
        if (ns, name) not in self._exiting:
            # take the request off first, so whoever sees the pod Failed no longer sees it pending
            self._exiting[(ns, name)] = _exit_request(pod)
            if await self._patch_pod(pod, {"metadata": {"annotations": {EXIT_ANNOTATION: None}}}, kind="merge") is None:
                self._forget((ns, name))
                return
        req = self._exiting[(ns, name)]
        statuses = (pod.get("status") or {}).get("containerStatuses") or [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
             "started": False, "state": {}} for c in pod["spec"]["containers"]]  # exited before it started
        container = req.get("container") or (statuses[0]["name"] if statuses else
                                             pod["spec"]["containers"][0]["name"])
        code = int(req.get("code", 1))
        now = to_iso(self.ctx.clock.now())
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        new_statuses, restarts = [], 0
        for s in statuses:
            if s.get("name") != container:
                new_statuses.append(s)
                continue
            terminated = {"exitCode": code, "reason": req.get("reason") or ("Completed" if code == 0 else "Error"),
                          "startedAt": ((s.get("state") or {}).get("running") or {}).get("startedAt") or now,
                          "finishedAt": now, "containerID": s.get("containerID", "")}
            if req.get("message"):
                terminated["message"] = str(req["message"])
            s = dict(s, ready=False, started=False)
            if restart:
                restarts = int(s.get("restartCount") or 0)
                s.update(lastState={"terminated": terminated}, restartCount=restarts + 1,
                         state={"waiting": {"reason": "CrashLoopBackOff",
                                            "message": f"back-off {int(backoff(restarts))}s restarting failed "
                                                       f"container={container} pod={name}_{ns}"},
                                "running": None, "terminated": None})
            else:
                s["state"] = {"terminated": terminated, "running": None, "waiting": None}
            new_statuses.append(s)
        done = [s for s in new_statuses if "terminated" in (s.get("state") or {})]
        status: dict[str, Any] = {"containerStatuses": new_statuses, "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodFailed" if not restart else "ContainersNotReady",
             "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "reason": "PodFailed" if not restart else
             "ContainersNotReady", "lastTransitionTime": now}]}
        if not restart and len(done) == len(new_statuses):
            failed = any(s["state"]["terminated"]["exitCode"] != 0 for s in done)
            status["phase"] = "Failed" if failed else "Succeeded"
            for cond in status["conditions"]:
                cond["reason"] = "PodFailed" if failed else "PodCompleted"
        # strategic: conditions merge by type and containers by name; the nulls above drop the old state
        done_ok = await self._patch_pod(pod, {"status": status}, sub="status", kind="strategic")
        self._exiting.pop((ns, name), None)
        if done_ok is None:
            return
        self._planned.pop((ns, name), None)
        log.info("kubelet: %s/%s container %s exited with code %d (restart=%s)", ns, name, container, code, restart)
        if restart:
            delay = backoff(restarts)
            self._restart_due[(ns, name)] = (container, self.ctx.clock.timestamp() + delay)
            if delay > 0:
                await record_event(self.client, pod, "BackOff", f"Back-off restarting failed container {container} "
                                   f"in pod {name}_{ns}({pod['metadata'].get('uid', '')})", type="Warning",
                                   component="kubelet", clock=self.ctx.clock, host=pod["spec"]["nodeName"])
            self.enqueue_after((ns, name), delay)

    async def _restart(self, pod: dict, key: tuple) -> None:
        container, due = self._restart_due[key]
        now = self.ctx.clock.timestamp()
        if now < due:
            self.enqueue_after(key, due - now)
            return
        del self._restart_due[key]
        ns, name = key
        try:
            await self.client.post(f"/twin/v1/namespaces/{ns}/pods/{name}/log?container={container}&restart=true",
                                   "", content_type="text/plain")
        except ApiError as err:
            log.debug("log rotation for %s/%s failed: %s", ns, name, err)
        statuses = []
        for s in (pod.get("status") or {}).get("containerStatuses") or []:
            if s.get("name") == container:
                s = dict(s, started=True, state={"running": {"startedAt": to_iso(now)}, "waiting": None,
                                                 "terminated": None})
            statuses.append(s)
        if await self._patch_pod(pod, {"status": {"containerStatuses": statuses}}, sub="status",
                                 kind="strategic") is None:
            return
        image = next((c.get("image") for c in pod["spec"]["containers"] if c.get("name") == container), "")
        host = pod["spec"]["nodeName"]
        for reason, message in (("Pulled", f'Container image "{image}" already present on machine'),
                                ("Created", f"Created container {container}"),
                                ("Started", f"Started container {container}")):
            await record_event(self.client, pod, reason, message, component="kubelet", clock=self.ctx.clock, host=host)


def _exit_request(pod: dict) -> dict:
    raw = (pod["metadata"].get("annotations") or {}).get(EXIT_ANNOTATION) or "{}"
    try:
        req = json.loads(raw)
    except ValueError:
        req = {"code": int(raw)} if raw.strip().lstrip("-").isdigit() else {}
    return req if isinstance(req, dict) else {}


def backoff(restart_count: int) -> float:
    """kubelet's crash-loop back-off: restart at once the first time, then 10 s doubling up to 5 min."""
    return 0.0 if restart_count <= 0 else min(10.0 * 2 ** (restart_count - 1), _MAX_BACKOFF)
