"""Chunked lists and selective reads in the twin's store: continue tokens over one snapshot, 410 Expired with
an inconsistent token, remainingItemCount, and indexes that answer exactly what a scan would."""

from __future__ import annotations

import base64
import json
import random

import pytest

from drills.core.clock import DilatedClock
from drills.twin.api import status as st
from drills.twin.api.resources import by_path
from drills.twin.api.selection import ALL, from_query
from drills.twin.api.store import Store

PODS = by_path("", "v1", "pods")
NODES = by_path("", "v1", "nodes")
NAMESPACES = by_path("", "v1", "namespaces")


def _store(history: int = 1000, spaces: tuple[str, ...] = ("a", "b")) -> Store:
    store = Store(DilatedClock(scale=60), history=history)
    for ns in spaces:
        store.create(NAMESPACES, {"metadata": {"name": ns}})
    return store


def _pod(name: str, node: str = "", labels: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def _names(page) -> list[str]:
    return [f'{e.obj["metadata"]["namespace"]}/{e.obj["metadata"]["name"]}' for e in page.entries]


def _all_pages(store: Store, selection=ALL, limit: int = 2, namespace: str | None = None) -> list[str]:
    out, token = [], ""
    while True:
        page = store.list_page(PODS, namespace, selection, limit=limit, continue_token=token)
        out += _names(page)
        token = page.continue_token
        if not token:
            return out


def test_chunks_walk_namespaces_in_key_order_with_remaining_counts():
    store = _store()
    for ns, name in [("b", "x"), ("a", "z"), ("a", "m"), ("b", "c"), ("a", "b")]:
        store.create(PODS, _pod(name), ns)
    first = store.list_page(PODS, None, ALL, limit=2)
    assert _names(first) == ["a/b", "a/m"] and first.remaining == 3
    token = json.loads(base64.urlsafe_b64decode(first.continue_token + "=="))
    assert token == {"v": "meta.k8s.io/v1", "rv": int(first.resource_version), "start": "a/m\x00"}
    assert first.list_meta() == {"resourceVersion": first.resource_version, "continue": first.continue_token,
                                 "remainingItemCount": 3}
    assert _all_pages(store) == ["a/b", "a/m", "a/z", "b/c", "b/x"]
    assert _all_pages(store, namespace="b", limit=1) == ["b/c", "b/x"]
    last = store.list_page(PODS, None, ALL, limit=5)
    assert not last.continue_token and last.remaining is None and len(last.entries) == 5


def test_later_chunks_read_the_first_chunks_snapshot():
    store = _store()
    for name in "abcdef":
        store.create(PODS, _pod(name), "a")
    first = store.list_page(PODS, "a", ALL, limit=2)
    store.create(PODS, _pod("cc"), "a")  # created after the snapshot: not in it
    store.delete(PODS, "a", "d")  # deleted after: still in it, as it was
    store.update(PODS, "a", "e", lambda o: dict(o, metadata=dict(o["metadata"], labels={"v": "2"})))
    second = store.list_page(PODS, "a", ALL, limit=2, continue_token=first.continue_token)
    assert _names(second) == ["a/c", "a/d"] and second.resource_version == first.resource_version
    assert second.remaining == 2
    third = store.list_page(PODS, "a", ALL, limit=2, continue_token=second.continue_token)
    assert _names(third) == ["a/e", "a/f"] and not third.continue_token
    assert third.entries[0].obj["metadata"]["labels"] == {}  # e as it was at the snapshot
    assert [p["metadata"]["name"] for p in store.list(PODS, "a")[0]] == ["a", "b", "c", "cc", "e", "f"]


def test_a_token_past_the_history_is_410_expired_with_an_inconsistent_token():
    store = _store(history=3)
    for name in "abcde":
        store.create(PODS, _pod(name), "a")
    first = store.list_page(PODS, "a", ALL, limit=2)
    for name in "vwxy":  # four more events: the snapshot's version falls out of the history
        store.create(PODS, _pod(name), "a")
    with pytest.raises(st.ApiError) as err:
        store.list_page(PODS, "a", ALL, limit=2, continue_token=first.continue_token)
    assert (err.value.code, err.value.reason) == (410, "Expired")
    assert err.value.message.startswith("The provided continue parameter is too old to display a consistent list")
    body = err.value.body()
    inconsistent = body["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(inconsistent + "=="))["rv"] == -1
    rest = store.list_page(PODS, "a", ALL, limit=10, continue_token=inconsistent)
    assert _names(rest) == ["a/c", "a/d", "a/e", "a/v", "a/w", "a/x", "a/y"]  # over the current state


def test_bad_tokens_are_400():
    store = _store()
    for token in ("not-base64!", base64.urlsafe_b64encode(b'{"v":"x","rv":1,"start":"a"}').decode()):
        with pytest.raises(st.ApiError) as err:
            store.list_page(PODS, None, ALL, limit=1, continue_token=token)
        assert err.value.code == 400 and err.value.message.startswith("continue key is not valid")


def test_selector_pages_have_no_remaining_count():
    store = _store()
    for i in range(6):
        store.create(PODS, _pod(f"p{i}", labels={"app": "web" if i % 2 else "db"}), "a")
    sel = from_query("app=web", None, PODS)
    page = store.list_page(PODS, None, sel, limit=2)
    assert _names(page) == ["a/p1", "a/p3"] and page.continue_token and page.remaining is None
    assert _all_pages(store, sel) == ["a/p1", "a/p3", "a/p5"]


def test_indexed_reads_answer_what_a_scan_answers():
    rng = random.Random(3)
    store = _store(spaces=("a", "b", "c"))
    nodes = [f"n{i}" for i in range(8)] + [""]
    for i in range(400):
        store.create(PODS, _pod(f"p{i:03}", rng.choice(nodes), {"job": rng.choice("xyz"), "tier": rng.choice("12")}),
                     rng.choice("abc"))
    for i in range(0, 400, 7):  # move some pods: the indexes must follow
        ns = next(n for n in "abc" if store.find(PODS, n, f"p{i:03}"))
        store.update(PODS, ns, f"p{i:03}", lambda o: dict(o, spec=dict(o["spec"], nodeName=rng.choice(nodes)),
                                                           metadata=dict(o["metadata"], labels={"job": "x"})))
    for i in range(3, 400, 11):
        ns = next((n for n in "abc" if store.find(PODS, n, f"p{i:03}")), None)
        if ns:
            store.delete(PODS, ns, f"p{i:03}")
    queries = [(None, "spec.nodeName=n3"), (None, "spec.nodeName="), ("job=x,tier=2", "spec.nodeName=n1"),
               ("job in (y)", None), ("job=z", "metadata.namespace=b"), (None, "metadata.name=p010"),
               ("tier!=1", "spec.nodeName!=n2")]
    for labels, fields in queries:
        sel = from_query(labels, fields, PODS)
        for ns in (None, "a"):
            scanned = [e for e in store.list_entries(PODS, ns) if sel.matches(e.obj)]
            assert store.list_entries(PODS, ns, sel) == scanned, (labels, fields, ns)
            assert _all_pages(store, sel, limit=3, namespace=ns) == _names(type("P", (), {"entries": scanned}))


def test_field_selectors_follow_the_kind():
    with pytest.raises(ValueError, match="field label not supported: spec.nodeName"):
        from_query(None, "spec.nodeName=n1", NODES)
    assert from_query(None, "spec.unschedulable=true", NODES).keys == ()


def test_a_node_scoped_watch_hears_only_its_pods_and_pods_that_move_there():
    store = _store()
    store.create(PODS, _pod("on-n1", "n1"), "a")
    store.create(PODS, _pod("on-n2", "n2"), "a")
    store.create(PODS, _pod("pending"), "a")
    watcher = store.watch(PODS, None, from_query(None, "spec.nodeName=n1", PODS), since=None)
    assert watcher.route == ("field", "spec.nodeName", "n1")
    store.update(PODS, "a", "on-n2", lambda o: dict(o, metadata=dict(o["metadata"], labels={"x": "1"})))
    store.update(PODS, "a", "pending", lambda o: dict(o, spec=dict(o["spec"], nodeName="n1")))
    store.delete(PODS, "a", "on-n1")
    seen = []
    while not watcher.queue.empty():
        etype, entry = watcher.queue.get_nowait()
        seen.append((etype, entry.obj["metadata"]["name"]))
    assert seen == [("ADDED", "on-n1"), ("ADDED", "pending"), ("DELETED", "on-n1")]
    store.unwatch(watcher)
    assert store.watcher_count() == 0
