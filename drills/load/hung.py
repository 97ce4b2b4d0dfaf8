"""When a request without an answer counts as hung, on a twin whose clock is dilated (no gevent here: the
locustfile drives `HangJudge` from greenlets, `post_asking_twin` from a thread for the steady-state probe).

On a real endpoint the client timeout is wall time and wall time is cluster time. On the twin, cluster time
runs `scale`× faster, so the wall wait is the timeout divided by the scale (floored at a quarter second): at
600× a busy machine's quarter-second hiccup — the gateway's process or locust's not scheduled — is already
150 cluster seconds, and a healthy platform failed on "requests hung past the client timeout". So the load
does not count a request hung when its wall wait is up: it asks the gateway (`GET /twin/v1/requests/{id}`,
drills/twin/workloads/owed.py) what it owes that request, in cluster time:

- an answer due within the client timeout: late on the wall clock only — wait for it (re-asking when due);
- an answer due after the timeout, or none (a wedged replica that never answers): hung once the gateway's
  clock has passed arrival + timeout;
- not in flight (404): not arrived yet (or answered this instant): hung once a timeout of the gateway's clock
  passed since it first said so;
- no answer from the gateway itself: hung (as the wall timeout would have said).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["HangJudge", "REPROBE_MIN_S", "REQUEST_ID_HEADER", "SAFETY_NET_MIN_S", "dilated", "post_asking_twin"]

REQUEST_ID_HEADER = "x-request-id"  # drills.twin.workloads.owed.REQUEST_ID_HEADER
SAFETY_NET_MIN_S = 10.0  # wall seconds: the longest the HTTP client itself waits (a twin that never answers)

REPROBE_MIN_S = 0.005  # wall seconds: the shortest wait before asking the gateway again


def dilated(clock: Any) -> bool:
    """Whether `clock` runs faster than the wall (only a twin's does): the endpoint is then a twin's gateway, whatever
    URL names it (a site-like profile names it as a real site would), and it is asked before a request is hung."""
    return float(getattr(clock, "scale", 1.0) or 1.0) > 1.0


@dataclass
class HangJudge:
    """One request's: cluster seconds left before it counts as hung, from each answer of the gateway."""

    timeout_s: float  # the client timeout (cluster seconds)
    unseen_since: float | None = None  # the gateway's clock when it first did not know the request

    def left(self, status: int | None, answer: dict | None) -> float:
        """Cluster seconds left (≤ 0: hung now) after the gateway answered `status` with `answer` (None, None:
        the gateway did not answer)."""
        if status is None or not isinstance(answer, dict) or not _number(answer.get("now")):
            return 0.0
        now = float(answer["now"])
        if status == 404:
            if self.unseen_since is None:
                self.unseen_since = now
            return self.timeout_s - (now - self.unseen_since)
        if status != 200 or not _number(answer.get("arrived")):
            return 0.0
        arrived, due = float(answer["arrived"]), answer.get("due")
        if _number(due) and float(due) - arrived <= self.timeout_s:
            return max(float(due) - now, 0.0) + self.timeout_s * 0.01  # owed in time: ask again once it is due
        return self.timeout_s - (now - arrived)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def post_asking_twin(url: str, body: dict, gateway: str, wall_wait_s: float, cluster_timeout_s: float, scale: float,
                     headers: dict | None = None) -> Any:
    """POST `body` to `url` (a completion on the twin's `gateway`); the `requests.Response`, or the exception the
    client would have raised — `requests.Timeout` when the twin says the request is hung (see above)."""
    import requests

    rid = uuid.uuid4().hex
    box: dict[str, Any] = {}

    def send() -> None:
        try:
            box["answer"] = requests.post(url, json=body, headers={**(headers or {}), REQUEST_ID_HEADER: rid},
                                          timeout=max(40 * wall_wait_s, SAFETY_NET_MIN_S))
        except requests.RequestException as err:
            box["answer"] = err

    sender = threading.Thread(target=send, name="post-asking-twin", daemon=True)
    sender.start()
    judge, wait = HangJudge(cluster_timeout_s), wall_wait_s
    while True:
        sender.join(wait)
        if not sender.is_alive():
            return box["answer"]
        try:
            asked = requests.get(f"{gateway.rstrip('/')}/twin/v1/requests/{rid}", timeout=SAFETY_NET_MIN_S)
            left = judge.left(asked.status_code, asked.json())
        except (requests.RequestException, ValueError):
            left = 0.0
        if left <= 0:  # the sender thread ends at its own timeout, or when the gateway gives up
            return requests.Timeout(f"no answer within the {cluster_timeout_s:g} s client timeout (the twin's clock)")
        wait = max(left / scale, REPROBE_MIN_S)
