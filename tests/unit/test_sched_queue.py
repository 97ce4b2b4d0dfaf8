"""WaitQueue: pods waiting for a node, in scheduling order, with pods whose binding is under way held out."""

from drills.twin.controllers.schedqueue import WaitQueue


def _order(pod: dict) -> tuple:
    return (-pod["priority"], pod["created"], pod["name"])


def _pod(name: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z") -> dict:
    return {"name": name, "priority": priority, "created": created}


def test_pods_come_out_by_priority_then_age_then_name():
    queue = WaitQueue()
    queue.put(("ns", "b"), _pod("b"), _order)
    queue.put(("ns", "a"), _pod("a", created="2026-01-01T00:00:05Z"), _order)
    queue.put(("ns", "c"), _pod("c", priority=10, created="2026-01-01T00:00:09Z"), _order)
    queue.put(("ns", "d"), _pod("d"), _order)
    assert [k[1] for k, _ in queue.ordered()] == ["c", "b", "d", "a"]
    assert not queue.put(("ns", "b"), {**_pod("b"), "seen": 2}, _order)  # an update keeps its place
    assert [p.get("seen") for k, p in queue.ordered() if k[1] == "b"] == [2]
    assert queue.pop(("ns", "c"))["name"] == "c" and queue.pop(("ns", "c")) is None
    assert [k[1] for k, _ in queue.ordered()] == ["b", "d", "a"]


def test_held_pods_wait_out_of_the_cycles_until_released():
    queue = WaitQueue()
    for name in "abc":
        queue.put(("ns", name), _pod(name), _order)
    queue.hold(("ns", "a"))
    queue.hold(("ns", "b"))
    assert [k[1] for k, _ in queue.ordered()] == ["c"] and len(queue) == 3 and ("ns", "a") in queue
    queue.release(("ns", "a"))  # its binding failed: scheduled again, in its place
    assert [k[1] for k, _ in queue.ordered()] == ["a", "c"]
    queue.pop(("ns", "b"))  # bound
    queue.release(("ns", "b"))
    assert [k[1] for k, _ in queue.ordered()] == ["a", "c"] and len(queue) == 2


def test_reorder_follows_new_priorities_and_keeps_held_pods_out():
    queue = WaitQueue()
    queue.put(("ns", "a"), _pod("a"), _order)
    queue.put(("ns", "b"), _pod("b"), _order)
    queue.put(("ns", "c"), _pod("c"), _order)
    queue.hold(("ns", "c"))
    queue.reorder(lambda pod: (pod["name"] != "b",) + _order(pod))
    assert [k[1] for k, _ in queue.ordered()] == ["b", "a"]
    queue.release(("ns", "c"))
    assert [k[1] for k, _ in queue.ordered()] == ["b", "a", "c"]
