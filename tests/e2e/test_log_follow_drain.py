"""A catch-up takes the last lines of a pod removed meanwhile: its log cannot be read again (404), so the
drill waits for its follow to deliver what the server sends before ending the stream.

A drill on a busy machine judged a node loss with the old workers' logs still on their way: the job resumed
from step 9000 while the drill "knew" only the save at 6000 — and a stale resume from 6000 would have passed.
The construction here: the follow's reader is held (as a starved thread is) while the pod writes its last
lines and is removed; the catch-up must still hand over every line.
"""

from __future__ import annotations

import threading

import requests
from kubernetes import client

from drills.core.clock import WallClock
from drills.core.watch import EventMerger
from fixtures.twin import make_pod
from tests.e2e.twin_core_helpers import wait_for


def test_a_removed_pods_last_lines_reach_the_catch_up(kube_api, twin_namespace, twin):
    core, ns = client.CoreV1Api(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("worker", containers=("main",)))
    append = f"{twin.url}/twin/v1/namespaces/{ns}/pods/worker/log"
    requests.post(append, data="step 6150\n", timeout=5).raise_for_status()
    taken: list[str] = []
    with EventMerger(WallClock()) as merger:
        merger.follow_log("log", core, "worker", ns)
        first = next(e for e in merger.events(deadline_ts=WallClock().timestamp() + 30, tick_wall_s=0.05)
                     if e is not None and e.type == "LOG")
        taken.append(first.obj)
        merger._lock.acquire()  # the follow's thread cannot hand over a line: a starved reader
        try:
            requests.post(append, data="saved checkpoint at iteration 7500\nstep 7510\n", timeout=5).raise_for_status()
            core.delete_namespaced_pod("worker", ns, grace_period_seconds=0)
            wait_for(lambda: not [p for p in core.list_namespaced_pod(ns).items if p.metadata.name == "worker"],
                     "the pod removed")
            threading.Timer(0.3, merger._lock.release).start()  # the reader gets the CPU back meanwhile
            taken += [e.obj for e in merger.catch_up() if e.type == "LOG"]
        finally:
            if merger._lock.locked():
                merger._lock.release()
    assert [line.split(" ", 1)[1] for line in taken] == ["step 6150", "saved checkpoint at iteration 7500", "step 7510"]
