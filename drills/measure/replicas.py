"""What a pod kill did to the replicas, and which replacements really serve — measured, not judged.

- **Fault effect** (DESIGN §3): each killed pod must really be gone (deleted, terminating, or absent from
  the first list) or, for a killed container, restarted (restartCount up). `FaultEffect.unaffected` names
  the pods the kill did not reach; a drill with any is inconclusive, not a pass.
- **Replacement** (DESIGN §5): a replacement counts only when it is Ready **and** listed in its Service's
  Endpoints (ready addresses) **and** has served — the load saw it answer (the endpoint's replica header:
  a pod name, or a pod IP with an optional port). When no answer named a replica at all, serving per pod
  cannot be seen from outside; `served` is then None and only Ready + Endpoints count.

Pure functions over API objects and the load's per-replica counts; `drills.verdicts.serving` judges.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from drills.core.kube import obj_get

__all__ = ["FaultEffect", "Replacement", "endpoint_pods", "ready_addresses", "replacement_states", "served_count"]

log = logging.getLogger(__name__)


@dataclass
class FaultEffect:
    """Which killed pods (by uid) the fault really took down; filled while watching, read after."""

    restart_mode: bool
    killed: dict[str, str]  # uid → name
    restarts_before: dict[str, int] = field(default_factory=dict)  # name → restartCount at the kill
    affected: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def observe(self, event_type: str, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        if uid not in self.killed:
            return
        self.seen.add(uid)
        if event_type == "DELETED" or obj_get(pod, "metadata", "deletionTimestamp"):
            self.affected.add(uid)
        elif self.restart_mode and _restart_count(pod) > self.restarts_before.get(pod["metadata"]["name"], 0):
            self.affected.add(uid)

    def finish(self) -> None:
        """A killed pod the first list never showed was already gone: that is an effect too."""
        self.affected |= set(self.killed) - self.seen

    @property
    def unaffected(self) -> tuple[str, ...]:
        return tuple(sorted(name for uid, name in self.killed.items() if uid not in self.affected))

    @property
    def had_effect(self) -> bool:
        return not self.unaffected

    def to_dict(self) -> dict:
        return {"had_effect": self.had_effect, "unaffected": list(self.unaffected),
                "how": "restarted" if self.restart_mode else "deleted"}


@dataclass(frozen=True)
class Replacement:
    """One replacement pod at the end of the watch: Ready, in the Service's Endpoints, answers served."""

    pod: str
    ready: bool
    in_endpoints: bool
    served: int | None  # successful answers it gave since the fault; None: the endpoint names no replica

    @property
    def counts(self) -> bool:
        return self.ready and self.in_endpoints and (self.served is None or self.served > 0)

    def to_dict(self) -> dict:
        return {"ready": self.ready, "in_endpoints": self.in_endpoints, "served": self.served}


def endpoint_pods(endpoints: dict | None) -> set[str]:
    """Pod names (targetRef) and IPs under the ready `addresses` of an Endpoints object."""
    out: set[str] = set()
    for subset in obj_get(endpoints or {}, "subsets", default=None) or []:
        for address in subset.get("addresses") or []:
            name = (address.get("targetRef") or {}).get("name")
            if name:
                out.add(name)
            if address.get("ip"):
                out.add(address["ip"])
    return out


def ready_addresses(endpoints: dict | None) -> int:
    """How many ready addresses an Endpoints object lists."""
    return sum(len(subset.get("addresses") or []) for subset in obj_get(endpoints or {}, "subsets", default=None) or [])


def served_count(pod: dict, served: dict[str, int]) -> int:
    """Answers attributed to `pod` by the replica header: by name, or by its IP (with or without a port)."""
    name, ip = pod["metadata"]["name"], obj_get(pod, "status", "podIP")
    return sum(n for key, n in served.items() if key == name or (ip and key.rsplit(":", 1)[0] == ip))


def replacement_states(fresh: list[dict], in_endpoints: set[str], served: dict[str, int] | None,
                       ready) -> tuple[Replacement, ...]:
    """Each replacement's state; `served` None when no answer named a replica (serving not observable)."""
    out = []
    for pod in sorted(fresh, key=lambda p: p["metadata"]["name"]):
        name, ip = pod["metadata"]["name"], obj_get(pod, "status", "podIP")
        out.append(Replacement(name, ready(pod), name in in_endpoints or (bool(ip) and ip in in_endpoints),
                               None if served is None else served_count(pod, served)))
    return tuple(out)


def _restart_count(pod: dict) -> int:
    statuses = obj_get(pod, "status", "containerStatuses", default=None) or [{}]
    return int(statuses[0].get("restartCount") or 0)
