"""The twin's `pods/log?follow` stream: a follower that is busy when the container writes its last lines and
the pod is deleted still receives those lines (a kubelet's stream delivers them after the container exits).
A save logged just before an eviction was lost this way and the drill reported an older checkpoint."""

from __future__ import annotations

import asyncio

from drills.core.clock import WallClock
from drills.twin.api.logs import PodLogs


def test_lines_written_before_the_pod_is_deleted_reach_a_busy_follower():
    async def scenario() -> list[str]:
        logs = PodLogs(WallClock())
        logs.append("ns", "w-0", "main", ["step 1"])
        got: list[str] = []
        first = asyncio.Event()
        resume = asyncio.Event()

        async def reader():
            async for line in logs.follow("ns", "w-0", "main"):
                got.append(line.text)
                if len(got) == 1:
                    first.set()
                    await resume.wait()  # the reader is busy (writing to a slow client) while the end comes

        task = asyncio.create_task(reader())
        await asyncio.sleep(0)
        logs.append("ns", "w-0", "main", ["step 2"])
        await first.wait()
        logs.append("ns", "w-0", "main", ["saved checkpoint at step 3", "step 3"])
        logs.drop("ns", "w-0")
        resume.set()
        await asyncio.wait_for(task, 5)
        return got

    assert asyncio.run(scenario()) == ["step 2", "saved checkpoint at step 3", "step 3"]


def test_a_follower_of_a_closed_log_ends():
    async def scenario() -> list[str]:
        logs = PodLogs(WallClock())
        logs.append("ns", "w-0", "main", ["a"])
        task = asyncio.create_task(_collect(logs))
        await asyncio.sleep(0)
        logs.restart("ns", "w-0", "main")
        return await asyncio.wait_for(task, 5)

    assert asyncio.run(scenario()) == []


async def _collect(logs: PodLogs) -> list[str]:
    return [line.text async for line in logs.follow("ns", "w-0", "main")]
