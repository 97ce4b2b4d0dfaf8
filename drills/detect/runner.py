"""The run's monitoring as the profile names it: a managed Prometheus + Alertmanager, or the site's own.

`open_monitoring(config, clock, workdir, scrape_configs)` returns a `Monitoring`: the Alertmanager to read, the
timing (the site's cadence in cluster time and what it became on this clock), and — managed — the running stack.
`Monitoring.watch()` starts an `AlertWatch` (drills/detect/alerts.py) at the moment a fault is injected.
Against a site's stack nothing is written anywhere: one GET of /api/v2/alerts per poll.

How time is kept (the twin's clock runs `clock.scale`× faster than the wall): a managed stack scrapes, evaluates,
looks back and resends at the site's cadence divided by the scale, and its rules' durations are divided too
(drills/detect/pack.py), so a rule means in cluster time what it means on a real cluster; every stamp the drill
keeps (injected, alerted, resolved) is the drill's cluster clock read by the poll that saw the change. Where
the wall floor (0.1 s) made scrapes or evaluations rarer in cluster time than the site's, `timing.slowed` is
true and a late or missing alert is inconclusive, never a FAIL blamed on the platform. The dilation assumes the
twin's nominal scale: when the twin's clock waits for its controllers (a busy machine), its cluster time runs
slower than that, the stack's wall durations then last fewer cluster seconds than the rules say and detection
can only look earlier than on a real cluster — the record keeps the watch's measured `effective_scale` so a
reviewer sees it. A site's stack runs on the wall clock: scale 1, nothing rewritten.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from drills.core.clock import Clock
from drills.detect.alerts import AlertWatch
from drills.detect.pack import pack_files
from drills.detect.stack import Stack, Timing, start_stack
from drills.profile.monitoring import MonitoringConfig

__all__ = ["Monitoring", "open_monitoring", "static_scrape_configs"]

log = logging.getLogger(__name__)


@dataclass
class Monitoring:
    """The monitoring a run judges detection with."""

    config: MonitoringConfig
    clock: Clock
    alertmanager_url: str
    prometheus_url: str
    timing: Timing
    stack: Stack | None = None

    @property
    def poll_wall_s(self) -> float:
        return self.timing.wall(self.config.poll_interval)

    def watch(self) -> AlertWatch:
        """An AlertWatch started now (its baseline: the alerts already active)."""
        return AlertWatch(self.alertmanager_url, self.clock, period_s=self.poll_wall_s).start()

    def describe(self) -> dict[str, Any]:
        """What the record keeps about the monitoring that judged (no secret: URLs and cadence only)."""
        out = {"managed": self.stack is not None, "prometheus": self.prometheus_url,
               "alertmanager": self.alertmanager_url, "scale": self.timing.scale,
               "scrape_interval_s": self.config.scrape_interval, "evaluation_interval_s": self.config.evaluation_interval,
               "resolution_s": round(self.timing.resolution_s, 3), "slowed": self.timing.slowed,
               "poll_s": round(self.poll_wall_s * self.timing.scale, 3)}
        if self.stack is not None:
            out["rules"] = list(self.config.rules)
            out["widened"] = [d.sentence() for d in self.stack.distortions]
        return out

    def close(self) -> None:
        if self.stack is not None:
            self.stack.stop()

    def __repr__(self) -> str:  # short: fixtures' reprs end up in reports
        return f"Monitoring({'managed' if self.stack else 'site'}, {self.alertmanager_url})"


def open_monitoring(config: MonitoringConfig, clock: Clock, workdir: Path,
                    scrape_configs: Sequence[dict[str, Any]] = ()) -> Monitoring:
    """The site's stack (read-only, wall clock), or a managed one started in `workdir` scraping `scrape_configs`
    plus the profile's static `targets`, its rules dilated to `clock`. DrillError when it cannot start."""
    if not config.managed:
        timing = Timing(scale=1.0, scrape_s=config.scrape_interval, evaluation_s=config.evaluation_interval)
        return Monitoring(config, clock, str(config.alertmanager), str(config.prometheus), timing)
    timing = Timing(scale=clock.scale, scrape_s=config.scrape_interval, evaluation_s=config.evaluation_interval)
    configs = [*scrape_configs, *static_scrape_configs(config.targets)]
    stack = start_stack(Path(workdir), pack_files(config.rules), configs, timing)
    for distortion in stack.distortions:
        log.warning("monitoring: %s", distortion.sentence())
    return Monitoring(config, clock, stack.alertmanager_url, stack.prometheus_url, timing, stack)


def static_scrape_configs(targets: Sequence[str], job: str = "targets") -> list[dict[str, Any]]:
    """One scrape job for the profile's static host:port targets (none: no job)."""
    return [{"job_name": job, "static_configs": [{"targets": list(targets)}]}] if targets else []
