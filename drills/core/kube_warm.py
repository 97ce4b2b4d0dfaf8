"""Build, once in the prefork server, the argument validators of the kubernetes client methods our code calls.

kubernetes client 37 wraps every API method in pydantic's `validate_call` with a deferred build: the first call
of a method in a process generates its schema (~7 ms each). Every forked `drills run` paid that again for each
method it used (≈ 6 % of a training drill's CPU); built here before the server forks, the children share them.
Which methods: the API attributes our source names (`.list_namespaced_pod(`, `api.connect_get_namespaced_pod_exec`),
found by scanning drills/ and fixtures/ when the server starts (~70 ms).

Importing this module does the work (drills.core.runner.PRELOAD names it); `warm()` returns what it built.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

__all__ = ["warm", "BUILT"]

log = logging.getLogger(__name__)

_ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"\.([a-z_][a-z0-9_]+)\b")


def warm() -> list[str]:
    """Build the deferred validators of the API methods named in our source; their `Class.method` names."""
    import kubernetes.client as k

    names: set[str] = set()
    for folder in ("drills", "fixtures"):
        for path in (_ROOT / folder).rglob("*.py"):
            try:
                names.update(_NAME.findall(path.read_text(encoding="utf-8")))
            except OSError:
                continue
    built = []
    for api in (k.CoreV1Api, k.AppsV1Api, k.BatchV1Api, k.PolicyV1Api, k.CoordinationV1Api, k.CustomObjectsApi,
                k.VersionApi):
        for name in sorted(names):
            for cell in getattr(getattr(api, name, None), "__closure__", None) or ():
                wrapper = getattr(cell.cell_contents, "__self__", None)
                if type(wrapper).__name__ == "ValidateCallWrapper" and not wrapper.__pydantic_complete__:
                    wrapper._create_validators()  # pydantic's own deferred build, done now
                    built.append(f"{api.__name__}.{name}")
    return built


try:
    BUILT = warm()
except Exception as err:  # noqa: BLE001 — an optimisation: a client that changed shape just builds on first call
    log.debug("kubernetes client validators not prebuilt: %s", err)
    BUILT = []
