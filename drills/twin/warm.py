"""What every twin loads as it starts, loaded once by a prefork server (drills/core/runner.py PRELOAD) so that
the twins forked from it do not: the parts its components import when they start (exporters, the inference
gateway, the FUSE store) the defect catalog (99 files parsed for each profile load), the switch dialects, the built-in profiles and stages. Nothing here changes
behaviour: a twin started without it loads the same things itself."""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

_COMPONENTS = ("drills.twin.exporters.dcgm", "drills.twin.exporters.kube_state", "drills.twin.exporters.mountstats",
               "drills.twin.exporters.snmp", "drills.twin.exporters.vllm", "drills.twin.workloads.inference_gateway",
               "drills.twin.workloads.fabric_component", "drills.twin.workloads.vllm_replica",
               "drills.twin.workloads.storefs", "drills.twin.workloads.store_mount", "prometheus_client", "fuse")


def warm() -> None:
    from drills.core import datafiles
    from drills.twin.profile import PROFILES_DIR, list_defects
    from drills.twin.profile_fabric import known_dialects
    from drills.twin.stages import STAGES_DIR

    for name in _COMPONENTS:
        try:
            importlib.import_module(name)
        except (ImportError, OSError) as err:  # fusepy without libfuse: the twin says so when it needs it
            log.debug("not preloaded: %s (%s)", name, err)
    list_defects()
    known_dialects()
    for path in (*sorted(PROFILES_DIR.glob("*.yaml")), *sorted(STAGES_DIR.glob("*.yaml"))):
        datafiles.load_file(path)  # kept parsed (datafiles): a twin forked from here gets a copy


warm()
