"""The cluster's clock as drills read it: the twin's gated clock followed on this host, the twin's clock read over
HTTP, or the clock an API server serves (a twin reached like a real cluster) — the wall clock for any other server.
`drills.core.kube` connects with these; they are apart because they are one idea (which clock, read how)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from drills.core.clock import Clock, DilatedClock, WallClock
from drills.core.errors import TargetUnreachable
from drills.core.watch import short_reason

__all__ = ["FIRST_CALL_TIMEOUT_S", "followed_clock", "served_clock", "twin_clock"]

log = logging.getLogger(__name__)

# The first calls that tell "reachable" from "not": an API server starting, or the machine busy (a twin on 2 cores
# with two busy loops and the test suite took over 5 s to answer its clock read), is slow, not gone — kubectl
# itself waits far longer.
FIRST_CALL_TIMEOUT_S = 15.0


def served_clock(api, timeout: float = FIRST_CALL_TIMEOUT_S):
    """The cluster's clock as its API server publishes it: a twin reached through a kubeconfig or a service
    account (a site-like run) serves its dilated clock at /twin/v1/clock; any other server answers 404 (or
    403), and its clock is the wall clock. Only the clock: the target stays a real cluster for every other
    decision (`Cluster.is_twin` is False, twin-only faults are refused)."""
    from drills.core.servedclock import ServedClock

    def read() -> tuple[dict, float, float]:  # (the served body, monotonic midpoint, round trip)
        before = time.monotonic()
        request = api.param_serialize("GET", "/twin/v1/clock", auth_settings=["BearerToken"])
        resp = api.call_api(*request, _request_timeout=timeout)
        data = resp.read()
        after = time.monotonic()
        if resp.status != 200:  # a real API server: no such path
            raise LookupError(f"GET /twin/v1/clock answered {resp.status}")
        return json.loads(data), (before + after) / 2, after - before

    def served() -> tuple[float, float, float]:
        body, midpoint, rtt = read()
        return float(body["now"]), midpoint, rtt

    try:
        body, midpoint, rtt = read()
        scale = float(body["scale"])
    except LookupError:
        return WallClock()
    except (ValueError, KeyError, TypeError) as err:  # not a twin's answer
        log.debug("no served clock: %s", err)
        return WallClock()
    # the twin's clock is gated (it waits while the twin is busy): a copy read once would run ahead of it
    return ServedClock(scale=scale, epoch=float(body["now"]), wall_anchor=midpoint, error_s=rtt / 2 * scale,
                       read=served)


def followed_clock(state_dir: str) -> Clock | None:
    """The twin's gated clock followed on this host (drills/core/gatedclock.py): its deadlines wait when the
    twin waits. None for a twin elsewhere (or an older one): its clock is then read over HTTP."""
    from drills.core.followclock import FollowingClock

    try:
        info = json.loads(Path(state_dir, "twin.json").read_text())
    except (OSError, ValueError):
        return None
    return FollowingClock.of_twin(info) if isinstance(info, dict) else None


def twin_clock(twin_url: str, timeout: float = FIRST_CALL_TIMEOUT_S, samples: int = 5) -> DilatedClock:
    """The twin's clock, read over HTTP: of `samples` reads, the one with the shortest round trip, anchored
    at its midpoint: the copy is within RTT/2 (its `error_s`; at 600× a 20 ms round trip is already 6 cluster
    seconds)."""
    import requests

    url = twin_url.rstrip("/") + "/twin/v1/clock"
    best: tuple[float, float, float] | None = None  # (rtt, twin now, wall midpoint)
    try:
        with requests.Session() as session:  # one connection: later reads pay no TCP handshake
            for _ in range(max(1, samples)):
                before = time.monotonic()
                body = session.get(url, timeout=timeout).json()
                after = time.monotonic()
                if best is None or after - before < best[0]:
                    best = (after - before, float(body["now"]), (before + after) / 2)
    except (requests.RequestException, ValueError) as err:
        raise TargetUnreachable(f"cannot reach the Kubernetes API at {twin_url}: {short_reason(err)}; "
                                "check --target/kubeconfig") from None
    scale = float(body["scale"])
    return DilatedClock(scale=scale, epoch=best[1], wall_anchor=best[2], error_s=best[0] / 2 * scale)
