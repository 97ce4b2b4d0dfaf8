"""`drills schedule`: render the scheduled-run manifests (drills.schedule.cronjob) to stdout or a file, or apply them.

`apply` creates each object through the official client against the current kubeconfig context (the
twin's too) and replaces the ones that already exist, so re-running it after a profile change updates
the schedule in place; then it prunes what it owns and no longer renders — objects of its kinds carrying this install's whole
identity (its name, its namespace, their hash and `managed-by: drills-schedule`: drills.schedule.cronjob) (a Role left in a namespace the profile no
longer drills, a features ConfigMap once `--features` is dropped). A Namespace is never pruned.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from drills.core.errors import DrillError, TargetUnreachable

__all__ = ["schedule", "apply"]

log = logging.getLogger(__name__)

# kind → (client API class, method suffix, namespaced)
_KINDS = {
    "Namespace": ("CoreV1Api", "namespace", False),
    "ServiceAccount": ("CoreV1Api", "service_account", True),
    "ConfigMap": ("CoreV1Api", "config_map", True),
    "ClusterRole": ("RbacAuthorizationV1Api", "cluster_role", False),
    "ClusterRoleBinding": ("RbacAuthorizationV1Api", "cluster_role_binding", False),
    "Role": ("RbacAuthorizationV1Api", "role", True),
    "RoleBinding": ("RbacAuthorizationV1Api", "role_binding", True),
    "CronJob": ("BatchV1Api", "cron_job", True),
}


def schedule(
    profile: str = typer.Option(..., "--profile", help="Target profile YAML (cluster.mode: in-cluster)."),
    image: str = typer.Option(..., "--image", help="The gpu-drills image (deploy/Containerfile), e.g. "
                                                   "registry.example.com/gpu-drills:0.1.0."),
    cron: str = typer.Option("0 2 * * *", "--cron", help="Cron schedule (5 fields or @daily…)."),
    markexpr: Optional[str] = typer.Option(None, "-m", "--selection", help="Drills to run (pytest -m expression)."),
    keyword: Optional[str] = typer.Option(None, "-k", help="Scenarios to run by name (pytest -k expression)."),
    features: Optional[str] = typer.Option(None, "--features", help="A folder of the site's .feature files, shipped "
                                                                     "in a ConfigMap (default: the image's drills)."),
    namespace: str = typer.Option("gpu-drills", "--namespace", "-n", help="Namespace of the scheduled run."),
    name: str = typer.Option("gpu-drills", "--name", help="Name of the CronJob, ServiceAccount and roles."),
    reports_pvc: Optional[str] = typer.Option(None, "--reports-pvc", help="PVC keeping reports and the journal "
                                                                          "(default: an emptyDir)."),
    switch_secret: Optional[str] = typer.Option(None, "--switch-secret", help="Secret with the switch SSH key, "
                                                                              "mounted read-only."),
    load_secret: Optional[str] = typer.Option(None, "--load-secret", help="Secret NAME[:KEY] holding the "
                                                                          "inference API key (key: api-key)."),
    checkpoint_pvc: Optional[str] = typer.Option(None, "--checkpoint-pvc", help="PVC of the checkpoint store, "
                                                                                "mounted at storage.checkpoint_store."),
    time_zone: Optional[str] = typer.Option(None, "--time-zone", help="CronJob time zone, e.g. Europe/Berlin."),
    no_html: bool = typer.Option(False, "--no-html", help="Skip the Allure HTML in the pod (image without Java)."),
    random: bool = typer.Option(False, "--random", help="Each run picks its node, uplink or replica at random "
                                "within the allowlist (a fresh seed each night, recorded): targets rotate."),
    create_namespace: bool = typer.Option(False, "--create-namespace", help="Render the Namespace too."),
    node_selector: list[str] = typer.Option([], "--node-selector", help="KEY=VALUE the run's node must carry "
                                                                          "(repeatable)."),
    toleration: list[str] = typer.Option([], "--toleration", help="KEY[=VALUE]:EFFECT the run's pod tolerates "
                                                                  "(repeatable)."),
    priority_class: Optional[str] = typer.Option(None, "--priority-class", help="PriorityClass of the run's pod."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the YAML here (default: stdout)."),
    do_apply: bool = typer.Option(False, "--apply", help="Apply to the current kubeconfig context."),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="Kubeconfig for --apply "
                                                                        "(default: $KUBECONFIG or ~/.kube/config)."),
    context: Optional[str] = typer.Option(None, "--context", help="Context for --apply (default: current)."),
) -> None:
    """Render (or apply) a CronJob that runs the drills in the cluster on a schedule, with least-privilege RBAC."""
    from drills.schedule.cronjob import (ScheduleOptions, parse_node_selector, parse_toleration, profile_warnings,
                                         render, render_yaml)

    opts = ScheduleOptions(profile=profile, image=image, cron=cron, namespace=namespace, name=name,
                           markexpr=markexpr, keyword=keyword, features=features, reports_pvc=reports_pvc, switch_secret=switch_secret,
                           load_secret=load_secret, checkpoint_pvc=checkpoint_pvc, time_zone=time_zone,
                           html=not no_html, random=random, create_namespace=create_namespace,
                           node_selector=parse_node_selector(node_selector),
                           tolerations=tuple(parse_toleration(t) for t in toleration), priority_class_name=priority_class)
    docs = render(opts)
    for warning in profile_warnings(opts):
        print(f"drills: warning: {warning}", file=sys.stderr)
    text = render_yaml(docs)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as err:
            raise DrillError(f"cannot write {output}: {err.strerror}") from None
        print(f"wrote {len(docs)} objects to {output}", file=sys.stderr)
    elif not do_apply:
        sys.stdout.write(text)
    if do_apply:
        for line in apply(docs, kubeconfig=kubeconfig, context=context):
            print(line)


def apply(docs: list[dict], *, kubeconfig: str | None = None, context: str | None = None) -> list[str]:
    """Create each object, or replace it when it exists; one line per object (`created cronjob ns/name`)."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    from drills.core.kube import USER_AGENT

    cfg = client.Configuration()
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None  # read now: the client reads it at import
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    except (config.ConfigException, OSError) as err:
        raise TargetUnreachable(f"cannot load kubeconfig {kubeconfig or '~/.kube/config'} "
                                f"(context {context or 'current'}): {err}") from None
    if not log.isEnabledFor(logging.DEBUG):  # connection retries: the error line says it
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    api = client.ApiClient(cfg)
    api.user_agent = f"{USER_AGENT} schedule"
    lines = []
    try:
        for doc in docs:
            kind, meta = doc["kind"], doc["metadata"]
            where = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
            try:
                verb = _create_or_replace(api, doc)
            except ApiException as err:
                raise DrillError(f"cannot apply {kind} {where}: {err.status} {_reason(err)}") from None
            except Exception as err:  # urllib3 connection errors: the API does not answer
                if type(err).__module__.startswith("urllib3"):
                    raise TargetUnreachable(f"cannot apply {kind} {where}: the API at {cfg.host} does not "
                                            "answer; check the kubeconfig context and that the cluster is up") from None
                raise
            lines.append(f"{verb} {kind.lower()} {where}")
        lines += _prune(api, docs)
    except ApiException as err:
        raise DrillError(f"cannot prune: {err.status} {_reason(err)}") from None
    finally:
        api.close()
    return lines


def _prune(api, docs: list[dict]) -> list[str]:
    """Delete this schedule's objects (its instance and managed-by labels) that `docs` no longer holds."""
    from kubernetes import client

    from drills.schedule.cronjob import IDENTITY_LABELS

    labels = next((d["metadata"].get("labels") or {} for d in docs if d["kind"] == "CronJob"), {})
    if not all(k in labels for k in IDENTITY_LABELS):
        return []
    selector = ",".join(f"{k}={labels[k]}" for k in IDENTITY_LABELS)  # this install's whole identity, never a part
    wanted = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}
    lines = []
    for kind, (cls, suffix, namespaced) in _KINDS.items():
        if kind == "Namespace":
            continue
        typed = getattr(client, cls)(api)
        lister = getattr(typed, f"list_{suffix}_for_all_namespaces" if namespaced else f"list_{suffix}")
        items = json.loads(lister(label_selector=selector, _preload_content=False).data).get("items", [])
        for item in items:
            meta = item["metadata"]
            ns = meta.get("namespace") if namespaced else None
            theirs = meta.get("labels") or {}
            if (kind, ns, meta["name"]) in wanted or any(theirs.get(k) != labels[k] for k in IDENTITY_LABELS):
                continue  # a server that ignored the selector must still not hand us another install's object
            infix = "namespaced_" if namespaced else ""
            getattr(typed, f"delete_{infix}{suffix}")(meta["name"], *((ns,) if namespaced else ()),
                                                      _preload_content=False)
            lines.append(f"pruned {kind.lower()} {f'{ns}/' if ns else ''}{meta['name']}")
    return lines


def _create_or_replace(api, doc: dict) -> str:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    cls, suffix, namespaced = _KINDS[doc["kind"]]
    typed = getattr(client, cls)(api)
    ns = (doc["metadata"].get("namespace"),) if namespaced else ()
    name = doc["metadata"]["name"]
    try:
        getattr(typed, f"create_{'namespaced_' if namespaced else ''}{suffix}")(*ns, doc, _preload_content=False)
        return "created"
    except ApiException as err:
        if err.status != 409:
            raise
    if doc["kind"] == "Namespace":
        return "unchanged"
    infix = "namespaced_" if namespaced else ""
    current = getattr(typed, f"read_{infix}{suffix}")(name, *ns, _preload_content=False)
    version = json.loads(current.data)["metadata"].get("resourceVersion")
    body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": version}}
    getattr(typed, f"replace_{infix}{suffix}")(name, *ns, body, _preload_content=False)
    return "replaced"


def _reason(err) -> str:
    try:
        return json.loads(err.body).get("message") or err.reason
    except (TypeError, ValueError, AttributeError):
        return err.reason or ""
