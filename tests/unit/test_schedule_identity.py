"""`drills schedule` installs carry an unambiguous identity (issue 32): two installs whose `<name>-<namespace>`
used to be the same (`a-b` in `c`, `a` in `b-c`) share no object name outside their namespaces and no label set,
so neither's `--apply` can prune the other's objects (the prune itself: tests/e2e/test_schedule_twin.py)."""

from __future__ import annotations

import pytest

from drills.schedule.cronjob import IDENTITY_LABELS, ScheduleOptions, render
from tests.unit.test_schedule import PROFILE

PAIRS = [(("a-b", "c"), ("a", "b-c")), (("x", "x"), ("x", "y")), (("gpu-drills", "gpu-drills"), ("gpu", "drills-gpu-drills"))]


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "prod.yaml"
    path.write_text(PROFILE)
    return str(path)


@pytest.mark.parametrize("first, second", PAIRS)
def test_two_installs_share_no_object_and_no_identity(profile, first, second):
    def objects(name, namespace):
        docs = render(ScheduleOptions(profile=profile, image="registry.example.com/gpu-drills:0.1.0", name=name,
                                      namespace=namespace))
        return docs, {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}

    docs_a, a = objects(*first)
    docs_b, b = objects(*second)
    assert a.isdisjoint(b)
    ids = [{k: d["metadata"]["labels"][k] for k in IDENTITY_LABELS} for d in (docs_a[0], docs_b[0])]
    assert ids[0] != ids[1]
    for docs, ident in ((docs_a, ids[0]), (docs_b, ids[1])):  # every object of an install carries all of it
        assert all({k: d["metadata"]["labels"][k] for k in IDENTITY_LABELS} == ident for d in docs)
