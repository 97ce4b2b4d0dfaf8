"""When did a write happen, in cluster time: the drill's own clock around the request, narrowed by the API server's.

A fault is stamped by the request that made it (`Cluster.around`): the drill reads its copy of the cluster's
clock before the request and after the answer, and the change lies between. On a real cluster that window is a
few milliseconds. On a twin at 600× every millisecond the request spends outside the twin (the drill's process
building it under a busy CPU, the socket, the twin's loop taking it) is 0.6 cluster seconds, and the twin's clock
does not wait for a request it has not received yet: a kill's window measured 7-30 cluster seconds on a loaded
2-core machine, and its middle put the kill seconds before the twin's own audit stamp — every recovery read from
it was that much too long (issue 32: 1-5 % of a 5-minute target at 600× with two busy loops).

The server says when it answered: every HTTP response carries `Date` (RFC 9110 §6.6.1: an origin server with a
clock must send it; Kubernetes' API server, Go's net/http, does; the twin sends its cluster clock). The change
came before that answer, so it lies in [Date, Date + 1 s) — one second's resolution — as well as in the window;
the stamp is the middle of both. A window narrower than a second (a real cluster, a quiet twin) is kept as it
is; one that does not meet the server's second (the two clocks disagree) is kept too, and logged.
"""

from __future__ import annotations

import logging
import threading
from email.utils import parsedate_to_datetime
from typing import Any, Callable

__all__ = ["capture_served", "around", "narrow", "served_at"]

log = logging.getLogger(__name__)

DATE_RESOLUTION_S = 1.0  # IMF-fixdate carries whole seconds
_last = threading.local()  # the Date of this thread's last answer from the API server (epoch seconds or None)


def capture_served(api: Any) -> None:
    """Note the `Date` of every answer the kubernetes ApiClient `api` receives, per thread (`served_at`)."""
    rest = api.rest_client
    request = rest.request

    def noted(*args, **kwargs):
        resp = request(*args, **kwargs)
        _last.date = _date_of(resp)
        return resp

    rest.request = noted


def served_at() -> float | None:
    """The server's `Date` of this thread's last answer (epoch seconds, whole), None when it sent none."""
    return getattr(_last, "date", None)


def around(clock: Any, request: Callable[[], object]) -> tuple[float, float]:
    """`request()` made; the cluster-time window in which the change it made happened: the drill's clock before
    and after it (`Clock.around`), narrowed to the server's second when they meet (see the module docstring)."""
    _last.date = None
    window = clock.around(request)
    return narrow(window, served_at())


def narrow(window: tuple[float, float], served: float | None) -> tuple[float, float]:
    """`window` ∩ [served, served + 1 s) when they meet; else `window` (no Date, or clocks that disagree)."""
    if served is None:
        return window
    lo, hi = max(window[0], served), min(window[1], served + DATE_RESOLUTION_S)
    if lo > hi:
        log.debug("the server's Date %.0f is outside the request's window %.3f-%.3f: its clocks disagree; "
                  "the window stands", served, *window)
        return window
    return lo, hi


def _date_of(resp: Any) -> float | None:
    try:
        headers = getattr(resp, "headers", None)
        value = headers.get("Date") if headers is not None else resp.getheader("Date")
        return parsedate_to_datetime(value).timestamp() if value else None
    except (AttributeError, TypeError, ValueError, IndexError):
        return None
