"""The run lock's expiry logic (drills.core.lock): renewTime + leaseDurationSeconds against cluster time."""

from datetime import datetime, timezone

from drills.core.lock import lease_state, refusal

NOW = datetime(2026, 1, 1, 12, 2, 0, tzinfo=timezone.utc)


def _lease(holder, renew="2026-01-01T12:01:03.000000Z", duration=120):
    return {"spec": {"holderIdentity": holder, "renewTime": renew, "acquireTime": renew,
                     "leaseDurationSeconds": duration}}


def test_another_live_holder_blocks():
    state = lease_state(_lease("h/1/r"))
    assert state.blocks("me/2/s", NOW)
    assert refusal("ai-platform", "gpu-drills-run", state, NOW) == (
        "another drill run holds the cluster lock (lease ai-platform/gpu-drills-run held by h/1/r since 12:01:03Z, "
        "expires in 63 s): wait for it, or after a crash run `drills revert` which also releases it")


def test_expired_free_or_own_leases_do_not_block():
    assert not lease_state(_lease("h/1/r", renew="2026-01-01T11:59:59.999999Z")).blocks("me/2/s", NOW)
    assert not lease_state(_lease("h/1/r", renew="2026-01-01T11:58:00Z")).blocks("me/2/s", NOW)  # exactly expired
    assert not lease_state(_lease(None)).blocks("me/2/s", NOW)
    assert not lease_state(_lease("me/2/s")).blocks("me/2/s", NOW)
    assert not lease_state(_lease("h/1/r", renew=None)).blocks("me/2/s", NOW)  # never renewed
    assert not lease_state(None).blocks("me/2/s", NOW)
