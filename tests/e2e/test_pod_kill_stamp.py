"""A pod-kill fault is stamped by the request that made it: a paced eviction (a drain's pace) refused by a
disruption budget (429) and retried once the budget allows is timed by the eviction that was accepted, not
from the first refusal — the stamp over the whole wait put `injected` as early as the budget held it."""

from __future__ import annotations

import threading
import time

import requests

from drills.core.kube import connect_twin
from drills.faults.pods import PodKillSpec, _Budget
from tests.e2e.drill_helpers import audit_of
from tests.e2e.twin_core_helpers import wait_for

NS, SELECTOR = "ai-platform", "app=llama-7b-infer"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _ready_pods(twin) -> list[str]:
    pods = requests.get(f"{twin.url}/api/v1/namespaces/{NS}/pods", params={"labelSelector": SELECTOR},
                        timeout=5).json()["items"]
    return [p["metadata"]["name"] for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                                       for c in p["status"].get("conditions") or [])]


def test_a_paced_eviction_is_timed_by_the_eviction_that_was_accepted(twin_factory):
    twin = twin_factory(scale=60.0)
    cluster = connect_twin(twin.kubeconfig, twin.url)
    try:
        victim = wait_for(lambda: len(_ready_pods(twin)) == 2 and _ready_pods(twin)[0], "two Ready replicas", 60)
        (pdb,) = requests.get(f"{twin.url}{PDBS}", timeout=5).json()["items"]  # the seeded one (one per pod)
        url, spec = f"{twin.url}{PDBS}/{pdb['metadata']['name']}", pdb["spec"]
        hold = {"spec": {"minAvailable": 2, "maxUnavailable": None}}
        assert requests.patch(url, json=hold, headers=MERGE, timeout=5).status_code == 200
        wait_for(lambda: (requests.get(url, timeout=5).json().get("status") or {}).get("disruptionsAllowed") == 0,
                 "the budget to allow no disruption", 30)
        since = audit_of(twin)[-1]["seq"]
        released: list[float] = []

        def release() -> None:  # the budget holds for a while, then someone lifts it (as a drain waits for)
            while cluster.clock.timestamp() < start + 60:  # a cluster minute: the twin's clock, not the wall's (a
                time.sleep(0.02)  # loaded machine holds the twin's clock, and a wall second is less than 60 s of it)
            released.append(cluster.clock.timestamp())
            lift = {"spec": {"minAvailable": spec.get("minAvailable"), "maxUnavailable": spec.get("maxUnavailable")}}
            requests.patch(url, json=lift, headers=MERGE, timeout=5)

        lifter = threading.Thread(target=release)
        start = cluster.clock.timestamp()
        lifter.start()
        with _Budget(cluster, PodKillSpec(NS, SELECTOR, mode="evict", budget_wait_s=3600)) as budget:
            before, after = budget.evict_paced(victim)
        lifter.join()
        evictions = [r for r in audit_of(twin) if r["seq"] > since and r.get("subresource") == "eviction"]
        assert [e["code"] for e in evictions][-1] == 201 and 429 in [e["code"] for e in evictions]
        # refused for the cluster minute the budget held, then timed by the accepted request: it
        # was answered after the lift (it may have been sent just before it — a retry on the budget's own status
        # update — and reached the API server after the lift's patch), and sent long after the first refusal
        assert after >= released[0] > start + 30 and before > start + 30
        assert before - 1 <= evictions[-1]["twinTime"] <= after + 1
    finally:
        cluster.close()
