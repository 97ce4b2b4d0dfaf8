"""The scheduler's queue of pods waiting for a node, kept in scheduling order as pods come and go.

A pod's place (priority, then age, then name) is computed once when it starts waiting, not on every
scheduling cycle: while thousands of DaemonSet pods wait on a 4,096-node twin, a cycle runs every few
milliseconds of wall time, and re-sorting them all each time made the work grow with the square of the pods.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Callable, Iterator

__all__ = ["WaitQueue"]

Key = tuple[str, str]


class WaitQueue:
    """Waiting pods by key, iterated in order; `order` is fixed per pod until `reorder` (a PriorityClass changed)."""

    def __init__(self) -> None:
        self._pods: dict[Key, dict] = {}
        self._order: dict[Key, tuple] = {}
        self._sorted: list[tuple[tuple, Key]] = []  # the pods not held, in order
        self._held: set[Key] = set()  # waiting, but out of the cycles (a binding is under way)

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def put(self, key: Key, pod: dict, order: Callable[[dict], tuple]) -> bool:
        """Add the pod, or keep its latest version in its place; True when it was not waiting before."""
        fresh = key not in self._pods
        self._pods[key] = pod
        if fresh:
            place = self._order[key] = order(pod)
            insort(self._sorted, (place, key))
        return fresh

    def pop(self, key: Key, default: dict | None = None) -> dict | None:
        pod = self._pods.pop(key, None)
        if pod is not None:
            place = self._order.pop(key)
            if key in self._held:
                self._held.discard(key)
            else:
                del self._sorted[bisect_left(self._sorted, (place, key))]
        return default if pod is None else pod

    def hold(self, key: Key) -> None:
        """Leave the pod out of `ordered` (its binding is under way) until `release`: a cycle then walks only
        the pods it may place, not the thousands whose bindings wait for a slot."""
        if key in self._pods and key not in self._held:
            self._held.add(key)
            del self._sorted[bisect_left(self._sorted, (self._order[key], key))]

    def release(self, key: Key) -> None:
        """Back in the cycles (its binding failed); nothing when it is no longer waiting."""
        if key in self._held:
            self._held.discard(key)
            insort(self._sorted, (self._order[key], key))

    def ordered(self) -> Iterator[tuple[Key, dict]]:
        """(key, pod) in scheduling order (a snapshot: the queue may change while the caller awaits)."""
        for _, key in list(self._sorted):
            pod = self._pods.get(key)
            if pod is not None:
                yield key, pod

    def reorder(self, order: Callable[[dict], tuple]) -> None:
        self._order = {key: order(pod) for key, pod in self._pods.items()}
        self._sorted = sorted((place, key) for key, place in self._order.items() if key not in self._held)
