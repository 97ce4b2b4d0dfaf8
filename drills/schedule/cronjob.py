"""`drills schedule`: nightly acceptance runs inside the cluster, as Kubernetes manifests.

`render(ScheduleOptions)` turns a target profile into the objects one scheduled run needs: a
ServiceAccount, the least-privilege ClusterRole/Roles and their bindings (rules are data in
`rbac.yaml`), a ConfigMap holding the profile, and a CronJob (`concurrencyPolicy: Forbid`)
whose pod reverts any leftover fault and then runs `drills run` as non-root. With `features` (a
folder of the site's own `.feature` files) a second ConfigMap carries them, with a binder module, and
the run drills those instead of the image's: a site adds or edits a drill without rebuilding the
image. The `-m`/`-k` selection is checked at render time against the features the run will read: an
expression pytest cannot parse, or one that selects no scenario, is refused here, not at 2 a.m. Secrets are only ever
referenced by name (switch credentials mounted read-only, the load API key as an env var from a
Secret); no secret value is ever rendered. `apply(docs)` creates or replaces them through the official
client against the current kubeconfig context, the twin included.
"""

from __future__ import annotations

import importlib.resources
import logging
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from drills.profile.model import TargetProfile, load_target
from drills.core.errors import DrillError
from drills.schedule.cron import validate_cron
from drills.schedule.options import check_options, parse_node_selector, parse_toleration

__all__ = ["ScheduleOptions", "render", "render_yaml", "profile_warnings", "validate_cron", "rbac_rules",
           "feature_files", "parse_toleration", "parse_node_selector", "PROFILE_DIR", "FEATURES_DIR", "FEATURES_BINDER", "SWITCH_DIR", "REPORTS_DIR", "LOAD_KEY_ENV", "SCHEDULE_LABEL",
           "INSTANCE_NAMESPACE_LABEL", "IDENTITY_LABELS", "install_id", "check_options"]

log = logging.getLogger(__name__)

PROFILE_DIR = "/etc/gpu-drills/profile"  # the ConfigMap: profile.yaml (and a switch inventory beside it)
FEATURES_DIR = "/etc/gpu-drills/features"  # the site's features ConfigMap, when --features is given
FEATURES_BINDER = "test_site_drills.py"  # binds the mounted features to pytest (pytest-bdd scenarios("."))
_BINDER_TEXT = ('"""Binds the site\'s drill features (the ConfigMap rendered by `drills schedule --features`)."""\n\n'
                "from pytest_bdd import scenarios\n\nscenarios(\".\")\n")
CONFIGMAP_MAX_BYTES = 1_000_000  # the API server refuses a ConfigMap over 1 MiB
_CONFIGMAP_KEY = re.compile(r"[^-._a-zA-Z0-9]")
SWITCH_DIR = "/etc/gpu-drills/switch"  # the switch-credential Secret (SSH key, known_hosts), read-only
REPORTS_DIR = "/var/lib/gpu-drills/reports"  # the reports PVC (or an emptyDir)
LOAD_KEY_ENV = "DRILLS_LOAD_API_KEY"
SCHEDULE_LABEL = "gpu-drills.io/schedule"  # a hash of the install's namespace and name (install_id)
INSTANCE_NAMESPACE_LABEL = "gpu-drills.io/schedule-namespace"  # the install's namespace (its name: …/instance)
IDENTITY_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", INSTANCE_NAMESPACE_LABEL,
                   SCHEDULE_LABEL)  # what `--apply` selects on to prune: every one, never a part
RUN_AS = 10001  # the image's non-root user (deploy/Containerfile)
@dataclass(frozen=True)
class ScheduleOptions:
    profile: str  # the target profile file (carried into the cluster in a ConfigMap)
    image: str
    cron: str = "0 2 * * *"
    namespace: str = "gpu-drills"
    name: str = "gpu-drills"
    markexpr: str | None = None  # `drills run -m`
    keyword: str | None = None  # `drills run -k`
    features: str | None = None  # a folder of the site's .feature files, shipped in a ConfigMap (None: the image's)
    reports_pvc: str | None = None  # None: an emptyDir (the report lives as long as the pod)
    switch_secret: str | None = None  # Secret with the switch SSH key / known_hosts / password keys
    load_secret: str | None = None  # "NAME" or "NAME:KEY" (KEY defaults to api-key)
    checkpoint_pvc: str | None = None  # mounted at storage.checkpoint_store for the storage drill
    time_zone: str | None = None  # CronJob spec.timeZone (None: the controller manager's zone)
    html: bool = True  # build the Allure HTML in the pod (needs the image's Java)
    random: bool = False  # `drills run --random auto`: each night a fresh seed, so targets rotate (recorded)
    create_namespace: bool = False
    deadline_s: int = 4 * 3600  # the Job's activeDeadlineSeconds: SIGTERM, then every fault is reverted
    # placement of the run's pod: e.g. a system node pool, its taint tolerated, a PriorityClass that keeps it
    # from being preempted by the workloads it drills
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict, ...] = ()
    priority_class_name: str | None = None


def render(opts: ScheduleOptions) -> list[dict]:
    """The manifests, in apply order; raises DrillError (one line) for input that cannot work."""
    validate_cron(opts.cron)
    check_options(opts)
    features = _check_selection(opts)
    profile = load_target(opts.profile)
    if profile.cluster.mode == "kubeconfig":
        raise DrillError(f"profile {opts.profile}: cluster.mode is kubeconfig, but a scheduled run runs inside the "
                         "cluster with its own service account: set cluster.mode: in-cluster")
    from drills.profile.safety import check_target

    check_target("twin", profile, source=opts.profile)  # the rule the scheduled run applies, refused at render time
    text = Path(opts.profile).read_text(encoding="utf-8")
    meta = _Meta(opts)
    docs: list[dict] = []
    if opts.create_namespace:
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": opts.namespace,
                                                                            "labels": meta.labels}})
    docs.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta.of(opts.name)})
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta.of(f"{opts.name}-profile"),
                 "data": {"profile.yaml": text, **_inventory_files(opts.profile, text)}})
    if features is not None:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta.of(f"{opts.name}-features"),
                     "data": {key: text for key, (_, text) in features.items()}})
    docs += _rbac(opts, profile, meta)
    docs.append(_cronjob(opts, profile, meta, features))
    return docs


def install_id(name: str, namespace: str) -> str:
    """One install's identity as a label value: unambiguous (the pair, hashed), ≤ 63 characters."""
    import hashlib

    return "s-" + hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:24]


def render_yaml(docs: list[dict]) -> str:
    """A multi-document YAML stream (`kubectl apply -f -` reads it as is)."""
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def profile_warnings(opts: ScheduleOptions) -> list[str]:
    """What in the profile will not resolve inside the pod (paths outside the mounted folders)."""
    profile = load_target(opts.profile)
    out = []
    if profile.cluster.mode == "twin":
        out.append("the profile's cluster.mode is twin: the scheduled run drills an embedded twin, not this cluster")
    for device in profile.switches.devices:
        for field in ("key_file", "known_hosts"):
            path = getattr(device, field)
            if path and not opts.switch_secret:
                out.append(f"switch {device.name}: {field} {path} needs --switch-secret (mounted at {SWITCH_DIR}/)")
            elif path and not path.startswith(SWITCH_DIR + "/"):
                out.append(f"switch {device.name}: {field} {path} is outside the switch Secret's mount "
                           f"({SWITCH_DIR}/); the pod will not find it")
    raw = yaml.safe_load(Path(opts.profile).read_text(encoding="utf-8")) or {}
    inventory = (raw.get("switches") or {}).get("inventory") if isinstance(raw.get("switches"), dict) else None
    if inventory and not _inventory_files(opts.profile, Path(opts.profile).read_text(encoding="utf-8")):
        out.append(f"switches.inventory {inventory}: only an inventory beside the profile (a bare file name) is "
                   "carried into the cluster; list the switches under switches.devices instead")
    if profile.storage.checkpoint_store != "from-twin" and opts.checkpoint_pvc is None:
        out.append(f"storage.checkpoint_store {profile.storage.checkpoint_store} is not mounted in the pod "
                       "(--checkpoint-pvc NAME mounts the store's claim there); the storage drill cannot reach it")
    return out


def feature_files(folder: str | Path) -> dict[str, tuple[str, str]]:
    """The site's features as ConfigMap entries: key → (path under the mount, text), plus the binder.
    Keys follow the ConfigMap grammar (the relative path with / as .); DrillError if two collide, a file is
    not UTF-8, or the whole exceeds what one ConfigMap holds."""
    from drills.core.preflight import check_utf8

    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DrillError(f"--features {folder}: not a folder; pass a folder of .feature files")
    from drills.core.selection import drill_feature_files

    files = [p for p in map(Path, drill_feature_files(root))  # the acceptance runbook is no nightly drill
             if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    if not files:
        raise DrillError(f"--features {folder}: no .feature file in it; pass a folder of drills")
    out: dict[str, tuple[str, str]] = {FEATURES_BINDER: (FEATURES_BINDER, _BINDER_TEXT)}
    for path in files:
        rel = path.relative_to(root).as_posix()
        key = _CONFIGMAP_KEY.sub("_", rel.replace("/", "."))
        if key in out:
            raise DrillError(f"--features {folder}: {rel} and {out[key][0]} would share the ConfigMap key {key}; "
                             "rename one")
        check_utf8(path, "feature")
        out[key] = (rel, path.read_text(encoding="utf-8"))
    size = sum(len(k) + len(t.encode()) for k, (_, t) in out.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise DrillError(f"--features {folder}: {size} bytes of features do not fit one ConfigMap (1 MiB); "
                         "ship fewer, or bake them into the image")
    return out


def rbac_rules() -> dict[str, list[dict]]:
    """The rule sets of rbac.yaml: cluster, workload, rollout, burst, storage_job, store_reader, gpu_use, gpu_fault,
    gpu_exporter, load_pods, lock, home, switch_secret."""
    text = (importlib.resources.files("drills.schedule") / "rbac.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


# -- helpers ------------------------------------------------------------------------------------
class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the profile in the ConfigMap) as literal blocks, readable in a review."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


class _Meta:
    """An install's identity: its name and namespace, each a DNS label (no '.'), so `name.namespace` — or `name` when
    the two are equal, the only dot-less form — names its objects outside its namespace without two installs ever
    sharing one (`a-b` in `c` and `a` in `b-c` used to share `a-b-c`); its labels carry name and namespace
    apart, and SCHEDULE_LABEL a hash of both: `--apply` prunes only what carries all of them (IDENTITY_LABELS)."""

    def __init__(self, opts: ScheduleOptions):
        self.namespace = opts.namespace
        self.cluster_name = opts.name if opts.name == opts.namespace else f"{opts.name}.{opts.namespace}"
        self.labels = {"app.kubernetes.io/name": "gpu-drills", "app.kubernetes.io/instance": opts.name,
                       "app.kubernetes.io/managed-by": "drills-schedule", INSTANCE_NAMESPACE_LABEL: opts.namespace,
                       SCHEDULE_LABEL: install_id(opts.name, opts.namespace)}

    def of(self, name: str, namespace: str | None = None) -> dict:
        return {"name": name, "namespace": namespace or self.namespace, "labels": dict(self.labels)}

    def cluster(self) -> dict:
        return {"name": self.cluster_name, "labels": dict(self.labels)}


TRAINING_DRILLS = ("gpu-node-loss", "switch-uplink", "storage-saturation")  # their steady state reads the job


def _rbac(opts: ScheduleOptions, profile: TargetProfile, meta: _Meta) -> list[dict]:
    from drills.profile.nominal import NominalState

    rules = rbac_rules()
    subject = [{"kind": "ServiceAccount", "name": opts.name, "namespace": opts.namespace}]
    group = "rbac.authorization.k8s.io"
    docs = [{"apiVersion": f"{group}/v1", "kind": "ClusterRole", "metadata": meta.cluster(), "rules": rules["cluster"]},
            {"apiVersion": f"{group}/v1", "kind": "ClusterRoleBinding", "metadata": meta.cluster(),
             "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": meta.cluster_name}, "subjects": subject}]
    per_ns: dict[str, list[dict]] = {}
    for ns in (profile.workloads.training.namespace, profile.workloads.inference.namespace):
        per_ns.setdefault(ns, [])
        _merge(per_ns[ns], rules["workload"])
    _merge(per_ns[profile.workloads.inference.namespace], rules["rollout"])  # every profile runs these two drills
    _merge(per_ns[profile.workloads.training.namespace], rules["burst"])
    if profile.storage.saturation.mode == "job":
        _merge(per_ns.setdefault(profile.storage.saturation.namespace, []), rules["storage_job"])
    if profile.workloads.training.checkpoint_store.read == "pod":
        _merge(per_ns.setdefault(profile.workloads.training.namespace, []), rules["store_reader"])
    if any((profile.nominal.of(d) or NominalState()).gpus_in_use for d in TRAINING_DRILLS):
        _merge(per_ns.setdefault(profile.workloads.training.namespace, []), rules["gpu_use"])
    gen = profile.workloads.inference.load_generator
    if gen.mode == "pods":
        _merge(per_ns.setdefault(gen.namespace or profile.workloads.inference.namespace, []), rules["load_pods"])
    gpu = profile.faults.gpu_fault
    if gpu is not None and (profile.faults.node_modes is None or "gpu-unhealthy" in profile.faults.node_modes):
        _merge(per_ns.setdefault(gpu.dcgm_namespace, []), rules["gpu_fault"])
        _merge(per_ns.setdefault(gpu.exporter_namespace, []), rules["gpu_exporter"])
    lock_ns = profile.safety.lock_namespace or profile.workloads.training.namespace
    _merge(per_ns.setdefault(lock_ns, []), rules["lock"])
    home = per_ns.setdefault(opts.namespace, [])
    _merge(home, rules["home"])
    if opts.switch_secret:
        _merge(home, [{**rule, "resourceNames": [opts.switch_secret]} for rule in rules["switch_secret"]])
    for ns, ns_rules in per_ns.items():
        name = opts.name if ns == opts.namespace else meta.cluster_name
        docs.append({"apiVersion": f"{group}/v1", "kind": "Role", "metadata": meta.of(name, ns), "rules": ns_rules})
        docs.append({"apiVersion": f"{group}/v1", "kind": "RoleBinding", "metadata": meta.of(name, ns),
                     "roleRef": {"apiGroup": group, "kind": "Role", "name": name}, "subjects": subject})
    return docs


def _merge(into: list[dict], rules: list[dict]) -> None:
    for rule in rules:
        if rule not in into:
            into.append(dict(rule))


def _check_selection(opts: ScheduleOptions) -> dict[str, tuple[str, str]] | None:
    """The features the run will read (the site's, as ConfigMap entries; None: the image's) and a check that
    -m/-k parse and select at least one of their scenarios."""
    from drills.core.runner import REPO
    from drills.core.selection import select

    features = feature_files(opts.features) if opts.features else None
    folder = Path(opts.features) if opts.features else REPO / "features"
    if (opts.markexpr or opts.keyword) and not select(folder, opts.markexpr, opts.keyword):
        chosen = " ".join(f"{flag} {expr!r}" for flag, expr in (("-m", opts.markexpr), ("-k", opts.keyword)) if expr)
        raise DrillError(f"{chosen} selects no scenario of {folder}; check the tags and names "
                         f"(`drills run --dry-run {chosen}` lists what a selection runs)")
    return features


def _cronjob(opts: ScheduleOptions, profile: TargetProfile, meta: _Meta,
             features: dict[str, tuple[str, str]] | None = None) -> dict:
    volumes = [{"name": "profile", "configMap": {"name": f"{opts.name}-profile"}},
               {"name": "reports", **({"persistentVolumeClaim": {"claimName": opts.reports_pvc}} if opts.reports_pvc
                                      else {"emptyDir": {}})},
               {"name": "tmp", "emptyDir": {}}]
    mounts = [{"name": "profile", "mountPath": PROFILE_DIR, "readOnly": True},
              {"name": "reports", "mountPath": REPORTS_DIR},
              {"name": "tmp", "mountPath": "/tmp"}]
    env = [{"name": "HOME", "value": "/tmp"}, {"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"}]
    if opts.switch_secret:
        volumes.append({"name": "switch", "secret": {"secretName": opts.switch_secret, "defaultMode": 0o440}})
        mounts.append({"name": "switch", "mountPath": SWITCH_DIR, "readOnly": True})
        for device in profile.switches.devices:  # a password, if any, comes from the key named like its variable
            if device.password_env and device.password_env not in {e["name"] for e in env}:
                env.append({"name": device.password_env, "valueFrom": {"secretKeyRef": {
                    "name": opts.switch_secret, "key": device.password_env, "optional": True}}})
    if opts.load_secret:
        secret, _, key = opts.load_secret.partition(":")
        env.append({"name": LOAD_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": secret, "key": key or "api-key"}}})
    if features is not None:  # items rebuild the folders (a ConfigMap key holds no /)
        volumes.append({"name": "features", "configMap": {"name": f"{opts.name}-features", "items": [
            {"key": key, "path": rel} for key, (rel, _) in features.items()]}})
        mounts.append({"name": "features", "mountPath": FEATURES_DIR, "readOnly": True})
    if opts.checkpoint_pvc:
        volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": opts.checkpoint_pvc}})
        mounts.append({"name": "checkpoints", "mountPath": profile.storage.checkpoint_store})
    container = {
        "name": "drills", "image": opts.image, "imagePullPolicy": "IfNotPresent",
        "args": ["sh", "-c", _command(opts, features is not None)], "env": env, "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    pod = {"serviceAccountName": opts.name, "restartPolicy": "Never",
           "terminationGracePeriodSeconds": 300,  # SIGTERM → every injected fault is reverted before exit
           "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                               "seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [container], "volumes": volumes,
           **({"nodeSelector": dict(opts.node_selector)} if opts.node_selector else {}),
           **({"tolerations": [dict(t) for t in opts.tolerations]} if opts.tolerations else {}),
           **({"priorityClassName": opts.priority_class_name} if opts.priority_class_name else {})}
    spec = {"schedule": opts.cron, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 5, "suspend": False,
            "jobTemplate": {"metadata": {"labels": dict(meta.labels)},
                            "spec": {"backoffLimit": 0,  # a failed drill is a finding, never retried blindly
                                     "activeDeadlineSeconds": opts.deadline_s,
                                     "template": {"metadata": {"labels": dict(meta.labels)}, "spec": pod}}}}
    if opts.time_zone:
        spec["timeZone"] = opts.time_zone
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta.of(opts.name), "spec": spec}


def _command(opts: ScheduleOptions, site_features: bool = False) -> str:
    """Revert leftovers of a killed run first (the journal is on the reports volume), then check the profile and
    the cluster (`drills validate`, read-only: a ✗ ends the run red before any fault), then run."""
    profile = f"{PROFILE_DIR}/profile.yaml"
    run = ["drills", "run", "--profile", profile, "--reports", REPORTS_DIR]
    validate = ["drills", "validate", "--profile", profile]
    if opts.markexpr:
        run += ["-m", opts.markexpr]
        validate += ["-m", opts.markexpr]
    if opts.keyword:
        run += ["-k", opts.keyword]
    if not opts.html:
        run.append("--no-html")
    if opts.random:
        run += ["--random", "auto"]
    if site_features:
        run.append(FEATURES_DIR)
    return f"drills revert --reports {REPORTS_DIR} && {shlex.join(validate)} && exec {shlex.join(run)}"


def _inventory_files(profile_path: str, text: str) -> dict[str, str]:
    """A switch inventory named by a bare file name travels in the ConfigMap beside the profile."""
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}
    switches = raw.get("switches") if isinstance(raw, dict) else None
    inventory = switches.get("inventory") if isinstance(switches, dict) else None
    if not isinstance(inventory, str) or PurePosixPath(inventory).name != inventory or inventory == "profile.yaml":
        return {}
    return {inventory: (Path(profile_path).resolve().parent / inventory).read_text(encoding="utf-8")}
