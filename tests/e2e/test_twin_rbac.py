"""RBAC on the twin's HTTPS listener: a service account may do what its bindings allow and gets the real
403 otherwise; `kubectl auth can-i` answers from the same rules. The least-privilege RBAC `drills schedule`
renders is sufficient for a scheduled drill run in in-cluster mode (no request refused: the twin audits
every request of a token with the authorizer's decision) and minimal: the site nightly (test_site_nightly.py)
uses every verb of every rule, and without a needed rule the drill that needs it fails on the 403."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from drills.schedule.cronjob import ScheduleOptions, render
from drills.twin.api.rbac import Attributes, rule_allows
from tests.e2e.drill_helpers import REPO, audit_of, drills, records

pytestmark = [pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")]

SA = "system:serviceaccount:gpu-drills:gpu-drills"


def schedule_rbac(profile: Path | None = None) -> list[dict]:
    """The RBAC documents (and the namespace) `drills schedule` renders for the built-in twin profile."""
    docs = render(ScheduleOptions(profile=str(profile or REPO / "drills" / "profile" / "twin.yaml"),
                                  image="gpu-drills:test"))
    home = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-drills"}}
    return [home, *(d for d in docs if d["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                                                     "ClusterRoleBinding"))]


def apply_as_admin(twin, docs: list[dict]) -> None:
    """Create the documents over the admin (plain) listener, as a cluster admin installs them."""
    from drills.twin.api.resources import by_kind

    for doc in docs:
        rt = by_kind(doc["apiVersion"], doc["kind"])
        ns = doc["metadata"].get("namespace")
        base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        path = f"{base}/namespaces/{ns}/{rt.plural}" if rt.namespaced and ns else f"{base}/{rt.plural}"
        resp = requests.post(twin.url + path, json=doc, timeout=10)
        assert resp.status_code in (201, 409), resp.text


def sa_kubectl(twin, tmp_path: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    tls = twin.info["tls"]
    sa_dir = Path(tls["serviceaccount_dir"])
    cmd = ["kubectl", "--kubeconfig", os.devnull, "--server", tls["url"],
           "--certificate-authority", str(sa_dir / "ca.crt"), "--token", (sa_dir / "token").read_text().strip(),
           "--cache-dir", str(tmp_path / "kube-cache"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=check)


def test_a_service_account_gets_403_until_bound_and_can_i_agrees(twin_factory, tmp_path):
    twin = twin_factory(tls=True)
    refused = sa_kubectl(twin, tmp_path, "get", "pods", "-n", "ai-platform")
    assert refused.returncode != 0
    assert (f'Error from server (Forbidden): pods is forbidden: User "{SA}" cannot list resource "pods" in API '
            f'group "" in the namespace "ai-platform"') in refused.stderr
    assert sa_kubectl(twin, tmp_path, "auth", "can-i", "list", "pods", "-n", "ai-platform").stdout.strip() == "no"

    apply_as_admin(twin, schedule_rbac())
    can = lambda *a: sa_kubectl(twin, tmp_path, "auth", "can-i", *a).stdout.strip()  # noqa: E731
    assert can("list", "pods", "--all-namespaces") == "yes"          # cluster rule: drain lists every namespace
    assert can("create", "pods", "--subresource=eviction", "-n", "kube-system") == "yes"
    assert can("patch", "nodes") == "yes" and can("delete", "nodes") == "no"
    assert can("delete", "pods", "-n", "ai-platform") == "yes"       # workload Role
    assert can("delete", "pods", "-n", "default") == "no"            # ... only in the workload namespaces
    assert can("get", "pods", "--subresource=log", "-n", "ai-platform") == "yes"
    assert can("get", "namespaces/kube-system") == "yes" and can("get", "namespaces/default") == "no"  # resourceNames
    assert can("list", "secrets", "-n", "ai-platform") == "no"
    assert "gpu-train-01" in sa_kubectl(twin, tmp_path, "get", "nodes", check=True).stdout
    forbidden = sa_kubectl(twin, tmp_path, "delete", "node", "gpu-train-01")
    assert (f'nodes "gpu-train-01" is forbidden: User "{SA}" cannot delete resource "nodes" in API group "" at the '
            f'cluster scope') in forbidden.stderr
    # the admin kubeconfig stays all-powerful
    admin = subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "auth", "can-i", "delete", "nodes"],
                           capture_output=True, text=True, timeout=60)
    assert admin.stdout.strip() == "yes"


CORDON = ("-m", "training", "-k", "cordon")


def _in_cluster_drill(twin, tmp_path: Path, name: str, select: tuple[str, ...] = CORDON,
                      profile: Path | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
    """`drills run` (the scenarios `select` picks; () every one) as the scheduled pod runs it."""
    from tests.e2e.test_revert_in_cluster import in_cluster

    if profile is None:
        text = (REPO / "drills" / "profile" / "twin.yaml").read_text()
        profile = tmp_path / f"{name}.yaml"
        profile.write_text(text.replace("  mode: twin ", "  mode: in-cluster "))
    return drills("run", *select, "--profile", str(profile), "--no-html", "--reports", str(tmp_path / "reports"),
                  "--run-id", name, "--lanes", "1", env=in_cluster(twin), timeout=timeout)


def sa_requests(twin) -> list[dict]:
    """The audit records of the scheduled run's service account (every request it made, reads included)."""
    return [r for r in audit_of(twin) if (r.get("user") or {}).get("username") == SA]


def refused(requests_: list[dict]) -> list[str]:
    return [f"{r['verb']} {r['path']}" for r in requests_
            if r["annotations"]["authorization.k8s.io/decision"] != "allow"]


def unused_grants(docs: list[dict], requests_: list[dict]) -> list[str]:
    """Each verb × resource of each rendered rule that no allowed request of the run needed."""
    allowed = [r for r in requests_ if r["annotations"]["authorization.k8s.io/decision"] == "allow"
               and not r["resource"].startswith("/")]
    unused = []
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        namespace = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
        for rule in doc["rules"]:
            for verb in rule["verbs"]:
                for resource in rule.get("resources", ()):
                    one = dict(rule, verbs=[verb], resources=[resource])
                    if not any(rule_allows(one, Attributes(verb=r["verb"], api_group=r["group"],
                                                           resource=r["resource"], subresource=r["subresource"],
                                                           namespace=r["namespace"], name=r["name"]))
                               for r in allowed if namespace is None or r["namespace"] == namespace):
                        unused.append(f"{doc['kind']} {namespace or ''} {verb} {resource}".replace("  ", " "))
    return unused


# The scheduled RBAC is sufficient (and minimal) for every drill the nightly runs in-cluster:
# tests/e2e/test_site_nightly.py (which asserts this test's checks for all of them).


def without(docs: list[dict], kind: str, resource: str) -> list[dict]:
    """The rendered documents with every rule of `kind` on `resource` removed."""
    for doc in docs:
        if doc["kind"] == kind:
            doc["rules"] = [r for r in doc["rules"] if resource not in r.get("resources", ())]
    return docs


@pytest.mark.slow
def test_without_the_node_rule_the_in_cluster_drill_cannot_run(twin_factory, tmp_path):
    twin = twin_factory(tls=True)
    apply_as_admin(twin, without(schedule_rbac(), "ClusterRole", "nodes"))
    run = _in_cluster_drill(twin, tmp_path, "denied")
    assert run.returncode != 0
    assert "forbidden" in (run.stdout + run.stderr).lower()
    assert any("/api/v1/nodes" in line for line in refused(sa_requests(twin)))


@pytest.mark.slow
def test_without_the_endpoints_rule_the_inference_drill_cannot_judge_serving(twin_factory, tmp_path):
    twin = twin_factory(tls=True)
    apply_as_admin(twin, without(schedule_rbac(), "Role", "endpoints"))
    run = _in_cluster_drill(twin, tmp_path, "no-endpoints", ("-m", "inference", "-k", "kill_one"))
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    (rec,) = records(tmp_path / "reports" / "no-endpoints")
    assert rec["drill"] == "inference-pod-kill" and rec["verdict"] != "pass"
    assert refused(sa_requests(twin)) == ["get /api/v1/namespaces/ai-platform/endpoints/llama-7b-infer"]
