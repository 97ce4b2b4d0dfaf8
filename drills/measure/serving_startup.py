"""A replacement inference pod's startup, phase by phase, read from its own stamps and its own log.

Scheduling → image pull → container start → server startup (the pod's creationTimestamp, its PodScheduled
condition, the `Pulled` event, the container's startedAt, the Ready condition), and the server startup
split by the replica's vLLM log (`drills.measure.vllm_startup`: model load, torch.compile, CUDA graph
capture, API server start — finished, or in progress when the watch ended), so a slow recovery names its
slow phase. Attribution is best effort: a log or event list that cannot be read leaves the phase whole.
It only measures; `drills.measure.serving` watches the recovery and `drills.verdicts.timeline` judges.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone

from drills.core.clock import parse_iso
from drills.core.kube import Cluster, obj_get
from drills.measure.logprefix import split_records
from drills.measure.vllm_startup import PHASE_LABELS, VllmStartup

__all__ = ["PodStartup", "StartupReader", "STARTUP_PHASES", "cond_time", "ready_now", "stamp"]

log = logging.getLogger(__name__)

# from the pod's events and conditions; "server startup" (container start → Ready) is split by the vLLM
# log into PHASE_LABELS' phases, what they do not cover stays "server startup"
STARTUP_PHASES = ("scheduling", "image pull", "container start", "server startup", *PHASE_LABELS.values())


@dataclass(frozen=True)
class PodStartup:
    """One replacement pod's startup, phase by phase (cluster seconds; an unfinished phase runs to `until`)."""

    pod: str
    node: str | None
    phases: dict[str, float]
    ready: bool
    pull_message: str | None = None
    pending_message: str | None = None  # the scheduler's last FailedScheduling message, while never bound
    vllm: dict = field(default_factory=dict)  # VllmStartup.summary() of its log (empty: not read or not vLLM)
    server_phases: dict[str, float] = field(default_factory=dict)  # PHASE_LABELS label → seconds, from its log

    def attributed(self) -> dict[str, float]:
        """The pod's phases with its server startup split by its vLLM log (the rest stays "server startup")."""
        if not self.server_phases or "server startup" not in self.phases:
            return dict(self.phases)
        out = {k: v for k, v in self.phases.items() if k != "server startup"}
        total = self.phases["server startup"]
        parts = {k: min(v, total) for k, v in self.server_phases.items()}
        out.update(parts)
        out["server startup"] = max(0.0, total - sum(parts.values()))
        return out

    def slowest(self) -> tuple[str, float] | None:
        phases = self.attributed()
        return max(phases.items(), key=lambda kv: kv[1]) if phases else None

    @property
    def from_log(self) -> bool:
        """Its slowest phase was read from its vLLM log, not from pod events."""
        slow = self.slowest()
        return slow is not None and slow[0] in self.server_phases


class StartupReader:
    """Reads the startups of one namespace's replacement pods (their events and logs through `cluster`)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace

    def startup(self, pod: dict, until: float, restart_mode: bool) -> PodStartup:
        """Scheduling → image pull → container start → model load of one replacement, from its own stamps."""
        name = pod["metadata"]["name"]
        events = self._events(name)
        created = stamp(obj_get(pod, "metadata", "creationTimestamp"))
        scheduled = cond_time(pod, "PodScheduled", "True")
        pulled = _event_time(events, "Pulled")
        running = obj_get(pod, "status", "containerStatuses", default=[{}])
        started = stamp(obj_get(running[0] if running else {}, "state", "running", "startedAt"))
        ready = cond_time(pod, "Ready", "True") if ready_now(pod) else None
        if restart_mode:
            points = [("container start", cond_time(pod, "Ready", "False"), started), ("server startup", started, ready)]
        else:
            points = [("scheduling", created, scheduled), ("image pull", scheduled, pulled or None),
                      ("container start", pulled, started), ("server startup", started, ready)]
        phases: dict[str, float] = {}
        for phase, begin, end in points:  # an unfinished phase runs until `until`; later ones never began
            if begin is None:
                break
            phases[phase] = max(0.0, (until if end is None else end) - begin)
            if end is None:
                break
        message = next((e.get("message") for e in reversed(events) if e.get("reason") in ("Pulled", "Pulling")), None)
        vllm, server = ({}, {})
        if started is not None:
            now = datetime.fromtimestamp(ready if ready is not None else until, timezone.utc)
            startup = self._vllm_log(pod, now)
            if startup is not None and startup.lines:
                vllm = startup.summary(now=now)
                server = {PHASE_LABELS[k]: v for k, v in startup.breakdown(now=now).items()}
        pending = None if scheduled else next((e.get("message") for e in reversed(events)
                                               if e.get("reason") == "FailedScheduling"), None)
        return PodStartup(name, obj_get(pod, "spec", "nodeName"), phases, ready is not None, message, pending, vllm,
                          server)

    def _vllm_log(self, pod: dict, until: datetime) -> VllmStartup | None:
        """The replica's startup as its vLLM log told it by `until` (the log is read later, with Kubernetes
        timestamps: lines printed after the watch ended are left out); None if unreadable."""
        containers = obj_get(pod, "spec", "containers", default=None) or [{}]
        kwargs = {"container": containers[0]["name"]} if containers[0].get("name") else {}
        try:
            resp = self.cluster.core.read_namespaced_pod_log(pod["metadata"]["name"], self.namespace, timestamps=True,
                                                             _preload_content=False, **kwargs)
            text = resp.data.decode("utf-8", "replace")
        except Exception as err:  # noqa: BLE001 — attribution is best effort; the verdict still stands
            log.warning("log of pod %s not read: %s", pod["metadata"]["name"], err)
            return None
        startup = VllmStartup()
        for line in text.splitlines():
            for rec in split_records(line):
                if rec.at is None or rec.at <= until:
                    startup.record(rec)
        return startup

    def _events(self, pod: str) -> list[dict]:
        try:
            resp = self.cluster.core.list_namespaced_event(self.namespace, _preload_content=False,
                                                           field_selector=f"involvedObject.name={pod}")
        except Exception as err:  # noqa: BLE001 — attribution is best effort; the verdict still stands
            log.warning("events of pod %s not read: %s", pod, err)
            return []
        items = json.loads(resp.data).get("items", [])
        return sorted(items, key=lambda e: _event_ts(e) or 0.0)


def cond_time(pod: dict, kind: str, status: str) -> float | None:
    for c in obj_get(pod, "status", "conditions", default=None) or []:
        if c.get("type") == kind and c.get("status") == status:
            return stamp(c.get("lastTransitionTime")) or 0.0
    return None


def _event_time(events: list[dict], reason: str) -> float | None:
    return next((_event_ts(e) for e in events if e.get("reason") == reason), None)


def _event_ts(event: dict) -> float | None:
    return stamp(event.get("eventTime") or event.get("firstTimestamp") or obj_get(event, "metadata", "creationTimestamp"))


def stamp(text: str | None) -> float | None:
    return parse_iso(text).timestamp() if text else None


def ready_now(pod: dict) -> bool:
    """Ready and not being deleted."""
    return not obj_get(pod, "metadata", "deletionTimestamp") and cond_time(pod, "Ready", "True") is not None
