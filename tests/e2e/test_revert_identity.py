"""`reconnect` goes back to the cluster a run drilled, or refuses (DESIGN §6), against real twins.

Issue 13's case: a profile without a context, then `kubectl config use-context other` — the revert
must still reach the first cluster, because the context was pinned when the run connected.
"""

from __future__ import annotations

import pytest
import requests
import yaml

from drills.core.errors import TargetGone, UnsafeTarget
from drills.core.kube import connect_kubeconfig, connect_twin, reconnect

pytestmark = pytest.mark.slow


def test_kubeconfig_context_is_pinned_and_another_cluster_refused(twin_factory, tmp_path, monkeypatch):
    first, second = twin_factory(scale=600.0), twin_factory(scale=600.0)
    path = tmp_path / "config"
    _kubeconfig(path, {"first": first.url, "second": second.url}, current="first")
    monkeypatch.setenv("KUBECONFIG", str(path))
    run = connect_kubeconfig()  # no context given: the current one, pinned now
    described = run.describe()
    run.close()
    assert described == {"mode": "kubeconfig", "name": "first", "url": first.url, "uid": _uid(first),
                         "kubeconfig": str(path), "context": "first"}

    _kubeconfig(path, {"first": first.url, "second": second.url}, current="second")  # kubectl config use-context
    monkeypatch.delenv("KUBECONFIG")  # and the revert runs without the run's environment
    back = reconnect(described)
    assert (back.url, back.uid) == (first.url, _uid(first))
    back.close()

    _kubeconfig(path, {"first": second.url}, current="first")  # the same name now leads elsewhere
    with pytest.raises(UnsafeTarget) as err:
        reconnect(described, entry_id="node-1")
    assert str(err.value) == (f"journal entry node-1 was made on cluster UID {_uid(first)} at {first.url}; this "
                              f"connection reaches UID {_uid(second)} at {second.url}: refusing to revert; "
                              "reconnect to the right cluster")


def test_twin_is_found_by_its_state_dir_and_an_ended_twin_is_gone(twin_factory):
    twin = twin_factory(scale=600.0)
    run = connect_twin(twin.kubeconfig, twin.url, state_dir=str(twin.state_dir))
    described = run.describe()
    run.close()
    assert described["mode"] == "twin" and described["twin_state"] == str(twin.state_dir)
    assert described["uid"] == _uid(twin)
    back = reconnect(described)
    assert back.uid == _uid(twin)
    back.close()
    twin.stop()
    with pytest.raises(TargetGone):
        reconnect(described)


def _kubeconfig(path, servers: dict[str, str], current: str) -> None:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in servers]}))


def _uid(twin) -> str:
    return requests.get(f"{twin.url}/api/v1/namespaces/kube-system", timeout=5).json()["metadata"]["uid"]
