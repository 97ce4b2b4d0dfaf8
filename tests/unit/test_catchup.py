"""What a catch-up hands over (drills.core.catchup): only what a stream had not delivered, never an older state
after a newer one, never another container's log spliced onto the one followed."""

from __future__ import annotations

from drills.core.catchup import LogSource, WatchSource, newer


def pod(name: str, rv: str, uid: str | None = None, **status) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "resourceVersion": rv},
            "status": status}


def source() -> WatchSource:
    return WatchSource(list_fn=lambda *a, **k: None, args=(), kwargs={})


def test_resource_versions_compare_as_revisions():
    assert newer("10", "9") and not newer("9", "10") and not newer("10", "10")
    assert newer("10", None) and not newer(None, "3")
    assert newer("abc", "abd")  # opaque and different: an extra event rather than a lost one


def test_a_watch_event_the_catch_up_already_delivered_is_not_delivered_again():
    src = source()
    assert src.admit("ADDED", pod("a", "5"))
    caught = src.differences([pod("a", "9", phase="Running")])
    assert [(t, o["metadata"]["resourceVersion"]) for t, o in caught] == [("MODIFIED", "9")]
    assert src.admit(*caught[0])
    assert not src.admit("MODIFIED", pod("a", "7"))  # the late stream's older state
    assert not src.admit("MODIFIED", pod("a", "9"))
    assert src.admit("MODIFIED", pod("a", "11"))


def test_an_object_gone_from_the_list_is_deleted_with_its_last_known_state():
    src = source()
    src.admit("ADDED", pod("a", "5", phase="Running"))
    src.admit("ADDED", pod("b", "6"))
    caught = src.differences([pod("b", "6"), pod("c", "8")])
    assert ("DELETED", pod("a", "5", phase="Running")) in caught
    assert ("ADDED", pod("c", "8")) in caught
    for etype, obj in caught:
        src.admit(etype, obj)
    assert not src.admit("DELETED", pod("a", "7"))  # the stream's own DELETED arrives later: already told
    assert not src.admit("MODIFIED", pod("a", "6"))


def test_a_log_catch_up_delivers_the_lines_past_those_followed():
    log = LogSource(read=lambda: "")
    assert log.admit(0, "t1 one") and log.admit(1, "t2 two")
    missing = log.missing("t1 one\nt2 two\nt3 three\nt4 fo")  # the last line is still being written
    assert missing == ["t3 three"]
    log.took(missing)
    assert not log.admit(2, "t3 three")  # the follow reaches it later: already delivered
    assert log.admit(3, "t4 four")


def test_a_log_that_does_not_continue_what_was_followed_is_not_spliced():
    log = LogSource(read=lambda: "")
    log.admit(0, "t1 old container")
    assert log.missing("t9 new container\nt10 more\n") == []  # a restarted container's log
    assert log.missing("") == []
    log.ended = True
    assert log.missing("t1 old container\nt2 more\n") == []  # the follow ended: the container stopped
