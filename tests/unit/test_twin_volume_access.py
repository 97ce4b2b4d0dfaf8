"""Who may create a directory in a volume's root (drills/twin/workloads/volume_access.py), as Linux and the
kubelet's fsGroup handling decide it, on small literal pods; and the healthy default against the defect."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from drills.twin.workloads.volume_access import Identity, VolumeRoot, denied_line, identity, may_create


def pod(psc: dict | None = None, csc: dict | None = None) -> dict:
    return {"spec": {"securityContext": psc or {}, "containers": [{"name": "fio", "securityContext": csc or {}}]}}


def test_identity_takes_the_container_over_the_pod_and_root_without_either():
    assert identity(pod(), "fio") == Identity(0, 0, frozenset())
    who = identity(pod({"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001, "supplementalGroups": [5]},
                       {"runAsUser": 2000}), "fio")
    assert who == Identity(2000, 10001, frozenset({5, 10001}))


ROOT_OWNED = VolumeRoot(0, 0, 0o755, fs_group_applied=True)
IGNORES_FS_GROUP = VolumeRoot(1000, 1000, 0o755, fs_group_applied=False)  # defect store-ignores-fsgroup


@pytest.mark.parametrize("who, root, fs_group, ok", [
    (Identity(10001, 10001, frozenset({10001})), ROOT_OWNED, 10001, True),   # the kubelet made fsGroup its group
    (Identity(10001, 10001, frozenset()), ROOT_OWNED, None, False),          # no fsGroup: root's 0755 refuses
    (Identity(10001, 10001, frozenset({10001})), IGNORES_FS_GROUP, 10001, False),  # fsGroup not applied
    (Identity(1000, 1000, frozenset()), IGNORES_FS_GROUP, None, True),       # the owner
    (Identity(1001, 1000, frozenset()), IGNORES_FS_GROUP, None, False),      # its group, but 0755: no g+w
    (Identity(1001, 1000, frozenset()), VolumeRoot(1000, 1000, 0o775, False), None, True),
    (Identity(1001, 7, frozenset({1000})), VolumeRoot(1000, 1000, 0o775, False), None, True),  # supplementary
    (Identity(4242, 4242, frozenset()), VolumeRoot(1000, 1000, 0o777, False), None, True),     # world-writable
    (Identity(1000, 1000, frozenset()), VolumeRoot(1000, 1000, 0o555, False), None, False),    # read-only dir
    (Identity(0, 0, frozenset()), IGNORES_FS_GROUP, None, True),             # root (never what drills renders)
])
def test_may_create(who, root, fs_group, ok):
    assert may_create(who, root, fs_group) is ok


def test_the_twin_profile_section_and_the_shells_words():
    storage = SimpleNamespace(owner_uid=1000, owner_gid=1000, mode="0755", fs_group_applied=False)
    assert VolumeRoot.from_storage(storage) == IGNORES_FS_GROUP
    assert VolumeRoot.from_storage(None) == ROOT_OWNED
    assert denied_line("/store/d") == "mkdir: can't create directory '/store/d': Permission denied"
    assert denied_line("/d", "Read-only file system") == "mkdir: can't create directory '/d': Read-only file system"
