"""The profile's `monitoring:` section: whose Prometheus and Alertmanager judge detection, and how strictly.

No section (the default): the drills do not judge detection; their detection steps say so in the record.
`prometheus: managed`: the run starts a real Prometheus + Alertmanager (drills/detect/stack.py) loading `rules`
(built-in rule files of drills/detect/rules by name, or your own .yaml files) and scraping `targets` (static
host:port targets; on the twin, its exporters once they are wired). `prometheus: <url>` with `alertmanager:
<url>`: the site's own, read only (its own rules are what is judged; `rules` is then ignored).

```yaml
monitoring:
  prometheus: managed            # or http://prometheus.monitoring:9090
  alertmanager: http://alertmanager.monitoring:9093   # the site's; managed: started with Prometheus
  alert_budget: 3                # distinct alerts one fault may raise (more is an alert storm)
  rules: [gpu, training, network, inference, storage]
  scrape_interval: 15s           # the site's cadence, in cluster time (the twin's Prometheus runs it dilated)
  evaluation_interval: 15s
  resolve_within: 10m            # after the recovery, every alert the fault raised must be gone within this
```
"""

from __future__ import annotations

import logging
import os

from pydantic import Field, field_validator, model_validator

from drills.core.grammar import HostPort, HttpUrl, NameOrYaml, check
from drills.profile.base import Seconds, Strict

__all__ = ["MonitoringConfig", "DEFAULT_RULES", "OPT_OUT", "opted_out"]

log = logging.getLogger(__name__)

DEFAULT_RULES = ("gpu", "training", "network", "inference", "storage")  # the pack's own; `seed` is kept for comparison
OPT_OUT = "DRILLS_MONITORING"  # "off" in the environment: detection not judged in this run, whatever the profile says


def opted_out() -> bool:
    """Whether the environment turns detection off for this run (an operator's choice; the test suite's default)."""
    return os.environ.get(OPT_OUT, "").strip().lower() in ("off", "0", "false", "no")


class MonitoringConfig(Strict):
    prometheus: str = "managed"  # "managed", or the site's URL (the http_url grammar)
    alertmanager: HttpUrl | None = None  # required with a site's Prometheus; managed: the run starts one
    alert_budget: int = Field(3, ge=1, le=1000)
    rules: list[NameOrYaml] = list(DEFAULT_RULES)
    targets: list[HostPort] = []  # static scrape targets of a managed Prometheus
    scrape_interval: Seconds = 15.0
    evaluation_interval: Seconds = 15.0
    resolve_within: Seconds = 600.0
    poll_interval: Seconds = 5.0  # how often the drill reads Alertmanager (cluster s; the twin's floor: 0.1 wall s)

    @property
    def managed(self) -> bool:
        return self.prometheus == "managed"

    @field_validator("prometheus")
    @classmethod
    def _managed_or_url(cls, value: str) -> str:
        return value if value == "managed" else check("http_url", value, "'managed' or")

    @model_validator(mode="after")
    def _site_needs_alertmanager(self) -> "MonitoringConfig":
        if not self.managed and self.alertmanager is None:
            raise ValueError("a site's Prometheus needs its Alertmanager too: set monitoring.alertmanager to its URL")
        return self
