"""The profile's `workloads.inference.load_generator`: where the inference load comes from — locust here (a
master and `workers` local processes, the default) or locust as Kubernetes pods (a master Job, a worker Job of
`workers` pods and the master's Service, drills/load/pods.py) when one machine cannot make enough load."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from drills.core.grammar import DnsLabel, DnsSubdomain, LabelKey, LabelValue
from drills.profile.base import Seconds, Strict
from drills.profile.images import check_image

__all__ = ["LoadGenerator", "PodResources"]

_QUANTITY = re.compile(r"^\d+(?:\.\d+)?(?:m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


class PodResources(Strict):
    """Requests and limits of one container (Kubernetes quantities: "500m", "1", "512Mi")."""

    cpu: str = "1"
    memory: str = "512Mi"
    cpu_limit: str | None = None  # None: no CPU limit (a throttled load generator under-reports the endpoint)
    memory_limit: str = "1Gi"

    @field_validator("cpu", "memory", "cpu_limit", "memory_limit")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.fullmatch(str(value)):
            raise ValueError(f'must be a Kubernetes quantity like "500m", "2" or "512Mi" (got {value!r})')
        return value

    def to_k8s(self) -> dict[str, Any]:
        limits = {"memory": self.memory_limit, **({"cpu": self.cpu_limit} if self.cpu_limit else {})}
        return {"requests": {"cpu": self.cpu, "memory": self.memory}, "limits": limits}


class LoadGenerator(Strict):
    mode: Literal["local", "pods"] = "local"
    # local: worker processes beside the master (0: one process); pods: worker pods (at least 1).
    # `drills run --load-workers N` overrides it.
    workers: int = Field(0, ge=0, le=1000)
    # pods mode: the drills image (it holds the locustfile, /opt/gpu-drills/drills/load/locustfile.py)
    image: str = "registry.example.com/gpu-drills:0.1.0"
    namespace: DnsLabel | None = None  # None: the inference workload's namespace
    node_selector: dict[LabelKey, LabelValue] = {}
    tolerations: list[dict[str, Any]] = []
    priority_class_name: DnsSubdomain | None = None
    service_account: DnsSubdomain | None = None  # None: the namespace's default (the pods call no API)
    resources: PodResources = PodResources()
    start_timeout_s: Seconds = 300.0  # cluster seconds for the master and every worker pod to be Running

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        return check_image(value)

    @model_validator(mode="after")
    def _pods_need_workers(self) -> "LoadGenerator":
        if self.mode == "pods" and self.workers < 1:
            raise ValueError("mode pods needs workers ≥ 1 (the number of locust worker pods)")
        return self
