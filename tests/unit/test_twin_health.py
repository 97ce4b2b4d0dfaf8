"""A bug in a twin controller is loud: the reconcile loop reports it (traceback kept), an API answer is not."""

from __future__ import annotations

import asyncio

from drills.core.clock import DilatedClock
from drills.twin.controllers.base import Controller, ControllerContext
from drills.twin.controllers.client import ApiError, TwinClient
from drills.twin.controllers.informer import InformerFactory
from drills.twin.health import Health


class _Flaky(Controller):
    """Key "bug" hits an AttributeError (a real past bug: a None where a dict was expected); key "conflict"
    meets a 409 once, as controllers do every day."""

    name = "flaky"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.calls: list[str] = []
        self.done = asyncio.Event()

    async def reconcile(self, key):
        self.calls.append(key)
        if key == "bug":
            pod = None
            return pod.get("spec")  # AttributeError
        if key == "conflict" and self.calls.count("conflict") == 1:
            raise ApiError(409, "Conflict", "the object has been modified")
        if key == "conflict":
            self.done.set()


async def _run(keys: list[str]) -> tuple[_Flaky, Health]:
    client = TwinClient("http://127.0.0.1:9")  # never called: the controller makes no request
    health = Health()
    ctx = ControllerContext(client=client, informers=InformerFactory(client, health), clock=DilatedClock(scale=60),
                            health=health)
    controller = _Flaky(ctx)
    controller.start()
    for key in keys:
        controller.enqueue(key)
    await asyncio.wait_for(controller.done.wait(), 5)
    while controller.calls.count("bug") < 3:  # it keeps retrying with backoff, and keeps counting
        await asyncio.sleep(0.01)
    await controller.stop()
    await client.close()
    return controller, health


def test_an_unexpected_exception_is_reported_with_its_traceback_and_an_api_answer_is_not(caplog):
    controller, health = asyncio.run(_run(["bug", "conflict"]))
    snapshot = health.snapshot()
    assert not snapshot["ok"] and len(snapshot["broken"]) == 1
    broken = snapshot["broken"][0]
    assert (broken["component"], broken["error"], broken["key"]) == ("controller flaky", "AttributeError", "bug")
    assert broken["message"] == "'NoneType' object has no attribute 'get'"
    assert broken["where"].rsplit(":", 1)[0].endswith("tests/unit/test_twin_health.py")
    assert 'return pod.get("spec")' in broken["traceback"] and broken["count"] >= 3
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "twin component controller flaky is broken: AttributeError" in errors[0].getMessage()
    assert controller.calls.count("conflict") == 2  # the 409 requeued quietly and succeeded


def test_a_key_enqueued_while_it_runs_runs_again_after_never_alongside():
    class Slow(Controller):
        name = "slow"
        workers = 4

        def __init__(self, ctx):
            super().__init__(ctx)
            self.running: set = set()
            self.overlap = False
            self.runs = 0

        async def reconcile(self, key):
            self.overlap |= key in self.running
            self.running.add(key)
            self.runs += 1
            await asyncio.sleep(0.01)
            self.running.discard(key)

    async def go() -> Slow:
        client = TwinClient("http://127.0.0.1:9")
        ctx = ControllerContext(client=client, informers=InformerFactory(client), clock=DilatedClock(scale=60))
        slow = Slow(ctx)
        slow.start()
        slow.enqueue("k")
        await asyncio.sleep(0.002)
        slow.enqueue("k")  # while the first run sleeps
        slow.enqueue("k")  # de-duplicated with the one above
        while slow.runs < 2 or slow.running or slow.backlog:
            await asyncio.sleep(0.005)
        await slow.stop()
        await client.close()
        return slow

    slow = asyncio.run(go())
    assert slow.runs == 2 and not slow.overlap
