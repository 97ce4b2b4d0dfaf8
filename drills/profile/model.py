"""The target profile: which cluster, which workloads, which switches, what targets, what is safe.

One YAML file per target, validated by pydantic (`extra="forbid"`: a typo is an error, not a silently
ignored key). `load_target(None)` is the built-in twin profile (drills/profile/twin.yaml). A bad
profile is one InvalidProfile line naming the file, the field path and the fix.

Durations (SLO targets, timeouts) accept seconds as a number (`900`) or text with units
(`"900s"`, `"15m"`, `"1h30m"`, `"500ms"`); they are stored as float seconds.
Relative paths in a profile (kubeconfig, switch inventory, key and known_hosts files) are relative
to the profile's directory; `~` is expanded. Secrets never live here: `password_env` names an
environment variable.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from drills.core import datafiles
from drills.core.errors import InvalidProfile
from drills.core.grammar import (DnsLabel, DnsSubdomain, Glob, HostName, Interface, KubeContext, LabelKey, LocalPath,
                                  NameOrYaml, SwitchName, Text, UserName)
from drills.profile.acceptance import AcceptanceConfig
from drills.profile.base import Ratio, Seconds, Strict, parse_duration
from drills.profile.gpu_fault import GpuFault
from drills.profile.storage import Saturation, StorageConfig
from drills.profile.explain import explain_validation_error
from drills.profile.load import LoadGenerator
from drills.profile.monitoring import MonitoringConfig
from drills.profile.nominal import NominalConfig
from drills.profile.workloads import InferenceWorkload, LoadShape, TrainingWorkload, Workloads

__all__ = [
    "TargetProfile",
    "FabricConfig",
    "UNVERIFIED_PORTS",
    "ClusterConfig",
    "TwinConfig",
    "TrainingWorkload",
    "InferenceWorkload",
    "LoadShape",
    "LoadGenerator",
    "Workloads",
    "SwitchConfig",
    "Switches",
    "Saturation",
    "StorageConfig",
    "SloConfig",
    "FaultsConfig",
    "InferenceFaults",
    "Allowlist",
    "BlastRadius",
    "SafetyConfig",
    "StopCondition",
    "NominalConfig",
    "MonitoringConfig",
    "load_target",
    "parse_profile",
    "parse_duration",
    "BUILTIN_TWIN_PROFILE",
]

log = logging.getLogger(__name__)

BUILTIN_TWIN_PROFILE = "built-in twin profile"


class TwinConfig(Strict):
    profile: NameOrYaml = "minimal"
    defects: list[DnsLabel] = []
    scale: float = Field(60.0, gt=0, le=10_000, allow_inf_nan=False)  # twin seconds per wall second


class ClusterConfig(Strict):
    mode: Literal["twin", "kubeconfig", "in-cluster"] = "twin"
    kubeconfig: LocalPath | None = None  # None: $KUBECONFIG or ~/.kube/config
    context: KubeContext | None = None  # None: the kubeconfig's current context
    # kubeconfig contexts drills may use (exact names). Empty: any. A context not listed — given with
    # --target, set above, or the kubeconfig's current one — is refused before anything connects.
    allowed_contexts: list[KubeContext] = []
    twin: TwinConfig = TwinConfig()


class SwitchConfig(Strict):
    name: str
    host: HostName
    port: int = Field(22, gt=0, lt=65536)
    username: UserName = "admin"
    key_file: LocalPath | None = None
    password_env: str | None = None  # the NAME of an environment variable holding the password
    known_hosts: LocalPath | None = None
    dialect: NameOrYaml = "sonic"
    uplinks: list[str] = []
    # the far end of each uplink's cable as recorded: uplink → "switch:interface" (the twin's inventory writes it).
    # The uplink drill confirms it by LLDP on both switches before the fault (a disagreement: nothing is shut) and
    # verifies its revert on the end LLDP confirmed (drills/faults/switch/ends.py)
    peers: dict[str, str] = {}
    role: Text | None = None  # leaf | spine (informative; the twin's inventory writes it)
    # rail-optimised fabric: the rails this leaf carries (NIC i of a node belongs on a leaf listing i); empty: not
    # said (every NIC of a node is then expected on its own leaf, the node's leaf label)
    rails: list[Annotated[int, Field(ge=0, le=63)]] = []
    host_key_type: Text | None = None  # informative, e.g. ssh-ed25519 (known_hosts is what is checked)

    @model_validator(mode="after")
    def _names_in_grammar(self) -> "SwitchConfig":
        """Switch and uplink names reach a switch CLI: each must be in its grammar (DESIGN §6)."""
        from drills.faults.switch.dialect import check_switch_name, load_switch_dialect

        try:
            check_switch_name(self.name)
            dialect = load_switch_dialect(self.dialect)
            for uplink in self.uplinks:
                dialect.check_interface(uplink)
        except InvalidProfile as err:
            raise ValueError(str(err)) from None
        return self

    @field_validator("password_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
            # Never echo the value: it may be the password pasted in by mistake.
            raise ValueError("must name an environment variable (e.g. SWITCH_PASSWORD), never the password itself")
        return value


class Switches(Strict):
    inventory: LocalPath | None = None  # a YAML list of switches; read into `devices` by load_target
    devices: list[SwitchConfig] = []
    accept_unknown_host_keys: bool = False
    connect_timeout_s: Seconds = 5.0  # TCP connect, SSH banner and login, each (at most a day, as every Seconds)
    command_timeout_s: Seconds = 10.0  # one command's answer (exec status or shell prompt)


UNVERIFIED_PORTS = "port identity from the inventory, not verified by the fabric"


class FabricConfig(Strict):
    """What the site's fabric can tell: `lldp: unavailable` (with its reason) is the explicit opt-out for switches
    that run no LLDP — the ports facing nodes and the far ends of uplinks are then taken from the inventory and
    every use says so (the acceptance sign-off lists each such port; the uplink drill's record names it, and its
    verdict still needs the fault's effect on the judged job). Never implied: LLDP that does not answer without
    this opt-out is a precondition not met."""

    lldp: Literal["available", "unavailable"] = "available"
    lldp_reason: Text | None = None  # why not (required with `unavailable`): shown wherever the opt-out is used

    @model_validator(mode="after")
    def _reason(self) -> "FabricConfig":
        if self.lldp == "unavailable" and not (self.lldp_reason or "").strip():
            raise ValueError("fabric.lldp: unavailable needs fabric.lldp_reason (why the switches run no LLDP): it is "
                             "printed wherever a port's identity is taken from the inventory")
        return self

    def opt_out(self) -> str | None:
        """The words every use of the opt-out carries; None when LLDP is available."""
        if self.lldp != "unavailable":
            return None
        return f"{UNVERIFIED_PORTS} (fabric.lldp: unavailable — {self.lldp_reason})"


class SloConfig(Strict):
    """Site overrides of the features' numbers. A contract field counts only when the profile sets it:
    the feature's number is the contract, and these defaults apply only where a scenario states no
    number (the one rule: drills/verdicts/targets.py). `throughput_sustain_s` is the profile's own."""

    training_recovery_s: Seconds = 900.0
    inference_recovery_s: Seconds = 300.0
    network_recovery_s: Seconds = 900.0
    lost_steps_budget: int | None = Field(None, ge=0, le=100_000_000)  # None: the feature's "no more than N steps are lost"
    inference_error_budget: float = Field(0.01, ge=0, le=1)
    throughput_recovery_ratio: Ratio = 0.9
    throughput_sustain_s: Seconds = 60.0  # throughput must hold ≥ the ratio this long to count as recovered
    training_stability_s: Seconds = 300.0  # a resumed job is watched this long (and until caught up): no restart,
    # not Failed, throughput and transport as before — or it has not recovered
    stability_window_s: Seconds = 300.0  # network: after recovery NCCL is still watched this long (transport, job alive)
    p99_latency_factor: float = Field(2.0, ge=1, le=1000)
    checkpoint_save_ratio: float = Field(2.0, ge=1, le=1000)  # save time under saturation vs. baseline
    # the loss after a resume (median of its first readings) may not be this many times the loss before the fault
    # (median of the last): a fresh model's loss means the checkpoint's weights were not restored
    resume_loss_ratio: float = Field(1.5, gt=1, le=1000)
    # a job whose optimizer skips its steps learns nothing while its step counter advances (a loss scaler at its floor,
    # `OVERFLOW! … Attempted loss scale: 1, reducing to 1` every step). A healthy fp16 scaler skips one step per
    # growth window (loss_scale_window 1000: ~0.1 %) and, from a fresh scale, a warm-up of at most hysteresis 2 ×
    # log2(2^32 / 2^16) = 32 steps (DeepSpeed fp16 initial_scale_power 16–32, hysteresis 2; Megatron
    # --initial-loss-scale 2^32, --hysteresis 2). So: more than `skipped_steps_allowed` skipped AND at least
    # `skipped_step_fraction` of the steps made in the window skipped is not learning. Range: fraction (0, 1]
    # (0.05 for a strict site, 1.0 only when every step is skipped); allowance 0–100,000 steps.
    skipped_step_fraction: float = Field(0.5, gt=0, le=1)
    skipped_steps_allowed: int = Field(32, ge=0, le=100_000)
    rollout_s: Seconds = 600.0  # "the rollout completes within …" (a rolling restart of the serving Deployment)
    rollout_error_budget: float = Field(0.0, ge=0, le=1)  # "no more than 0% of requests fail during the rollout"
    rollout_max_unavailable: int | None = Field(None, ge=0, le=10_000)  # "no more than 0 replicas are unavailable …"
    burst_hold_s: Seconds = 300.0  # "no serving replica is evicted or preempted within …" (a training burst)


class InferenceFaults(Strict):
    # The most replicas one Example may kill; "all its replicas" beyond it is skipped, naming it (a full
    # outage is a site's decision). None: no limit (the twin).
    max_kill: int | None = Field(None, gt=0, le=10_000)


class FaultsConfig(Strict):
    node: DnsSubdomain | None = None  # a named target node; None: one running the job
    # How a node may be lost (the node-loss Examples); an Example with another mode is skipped, naming it.
    # None: every mode the target supports (twin-only modes only on the twin).
    node_modes: list[Literal["cordon-drain", "taint-noexecute", "gpu-unhealthy", "kubelet-stop"]] | None = None
    inference: InferenceFaults = InferenceFaults()
    eviction_timeout_s: Seconds = 300.0
    pod_kill_mode: Literal["delete", "evict", "kill-container"] = "delete"
    pods_to_kill: int = Field(1, gt=0, le=10_000)
    switch: SwitchName | None = None  # a named leaf switch; None: the leaf of a node running the job
    uplink: Interface | None = None  # a named uplink of that switch; None: its first uplink in the inventory
    leaf_label: LabelKey = "network.gpu-drills.io/leaf"  # node label naming the node's leaf switch
    switch_transport: Literal["exec", "shell"] = "exec"
    # gpu-unhealthy through DCGM field injection (drills/profile/gpu_fault.py); a real target must set it to run that
    # mode (where its DCGM runs, who remediates); None on the twin: the GPU Operator's defaults
    gpu_fault: GpuFault | None = None


class Allowlist(Strict):
    """What drills may touch. Empty lists allow nothing: a real target must say what is fair game."""

    nodes: list[Glob] = []  # globs on node names
    node_labels: dict[LabelKey, Glob] = {}  # every label must be present; values are globs
    namespaces: list[Glob] = []
    switches: list[Glob] = []
    interfaces: list[Glob] = []


class BlastRadius(Strict):
    max_nodes: int = Field(1, ge=0, le=10_000)
    max_pods: int = Field(4, ge=0, le=100_000)
    max_ports: int = Field(1, ge=0, le=10_000)


class StopCondition(Strict):
    """A guard over the steady state, watched while a fault is in (drills/core/stop.py): a breach — the
    metric above `above` for `for_s` cluster seconds — reverts every fault at once and aborts the drill."""

    metric: Literal["not_ready_nodes", "unschedulable_nodes", "inference_error_rate"]
    above: float = Field(ge=0, le=1_000_000, allow_inf_nan=False)
    for_s: Annotated[float, BeforeValidator(parse_duration), Field(ge=0, le=86_400)] = 0.0


class SafetyConfig(Strict):
    allow: Allowlist = Allowlist()
    # e.g. [{metric: not_ready_nodes, above: 1}, {metric: inference_error_rate, above: 0.5, for_s: 30s}]
    stop_conditions: list[StopCondition] = []
    blast_radius: BlastRadius = BlastRadius()
    dry_run: bool = False
    lock_namespace: DnsLabel | None = None  # the run lock's Lease namespace; None: the training workload's
    lock_duration_s: int = Field(120, ge=10, le=3600)  # Lease duration (cluster seconds), renewed every third of it
    # after a revert, how long (cluster seconds) it must hold before it is read back (and again at the end of the
    # scenario): a node-health agent or a switch agent that undoes the revert within it fails the drill
    # (`revert_failed`). 0..3600; 60 s is one wall second on a 60x twin. `drills revert` waits as long.
    revert_settle_s: Annotated[float, BeforeValidator(parse_duration)] = Field(60.0, ge=0, le=3600)


class TargetProfile(Strict):
    name: Text = "twin"
    cluster: ClusterConfig = ClusterConfig()
    workloads: Workloads = Workloads()
    switches: Switches = Switches()
    fabric: FabricConfig = FabricConfig()  # LLDP available, or the explicit opt-out
    storage: StorageConfig = StorageConfig()
    slo: SloConfig = SloConfig()
    faults: FaultsConfig = FaultsConfig()
    safety: SafetyConfig = SafetyConfig()
    acceptance: AcceptanceConfig = AcceptanceConfig()  # `drills accept` (drills/profile/acceptance.py)
    nominal: NominalConfig = NominalConfig()  # the steady state each drill rehearses on (drills/profile/nominal.py)
    monitoring: MonitoringConfig | None = None  # who judges detection (drills/profile/monitoring.py); None: nobody

    @model_validator(mode="after")
    def _switch_sources(self) -> "TargetProfile":
        names = [s.name for s in self.switches.devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"switch names must be unique (repeated: {', '.join(dupes)})")
        return self


def load_target(path: str | os.PathLike | None) -> TargetProfile:
    """Read and validate a target profile; None → the built-in twin profile. Raises InvalidProfile."""
    if path is None:
        resource = importlib.resources.files("drills.profile") / "twin.yaml"
        return parse_profile(resource.read_text(encoding="utf-8"), source=BUILTIN_TWIN_PROFILE)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidProfile(f"profile {path}: file not found (pass --profile with an existing YAML file)") from None
    except OSError as err:
        raise InvalidProfile(f"profile {path}: cannot read it ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise InvalidProfile(_not_utf8(f"profile {path}", err)) from None
    return parse_profile(text, source=str(path), base_dir=file.resolve().parent)


def parse_profile(text: str, source: str = "<text>", base_dir: Path | None = None) -> TargetProfile:
    """Validate profile YAML text; `source` names it in errors, `base_dir` anchors relative paths."""
    data = _yaml(text, f"profile {source}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidProfile(f"profile {source}: must be a YAML mapping of sections (cluster, workloads, slo, …)")
    data = _resolve_paths(data, base_dir)
    switches = data.get("switches")
    if isinstance(switches, dict) and switches.get("inventory"):
        if switches.get("devices"):
            raise InvalidProfile(f"profile {source}: switches: set either inventory or devices, not both")
        data = {**data, "switches": {**switches, "devices": _inventory(switches["inventory"], base_dir)}}
    try:
        return TargetProfile.model_validate(data)
    except ValidationError as err:
        raise InvalidProfile(explain_validation_error(f"profile {source}", err, TargetProfile)) from None


def _yaml(text: str, what: str) -> Any:
    try:
        return datafiles.load_user_text(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid syntax"
        raise InvalidProfile(f"{what}: not valid YAML{where}: {problem}") from None


def _resolve_paths(data: dict, base_dir: Path | None) -> dict:
    """Anchor relative file paths at the profile's directory and expand `~`."""

    def fix(value: Any) -> Any:
        if not isinstance(value, str) or not value:
            return value
        expanded = Path(os.path.expanduser(value))
        return str(base_dir / expanded) if base_dir and not expanded.is_absolute() else str(expanded)

    out = dict(data)
    if isinstance(out.get("cluster"), dict) and out["cluster"].get("kubeconfig"):
        out["cluster"] = {**out["cluster"], "kubeconfig": fix(out["cluster"]["kubeconfig"])}
    if isinstance(out.get("switches"), dict):
        sw = dict(out["switches"])
        if sw.get("inventory"):
            sw["inventory"] = fix(sw["inventory"])
        if isinstance(sw.get("devices"), list):
            sw["devices"] = [_fix_switch(d, fix) for d in sw["devices"]]
        out["switches"] = sw
    return out


def _fix_switch(device: Any, fix) -> Any:
    if not isinstance(device, dict):
        return device
    return {**device, **{k: fix(device[k]) for k in ("key_file", "known_hosts") if device.get(k)}}


def _inventory(path: str, base_dir: Path | None) -> list:
    """A switch inventory file: a YAML list of switches (or a mapping with a `switches:` list)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidProfile(f"switch inventory {path}: file not found (switches.inventory)") from None
    except OSError as err:
        raise InvalidProfile(f"switch inventory {path}: cannot read it ({err.strerror}); fix switches.inventory") \
            from None
    except UnicodeDecodeError as err:
        raise InvalidProfile(_not_utf8(f"switch inventory {path}", err)) from None
    data = _yaml(text, f"switch inventory {path}")
    if isinstance(data, dict) and "switches" in data:
        data = data["switches"]
    if not isinstance(data, list):
        raise InvalidProfile(f"switch inventory {path}: must be a YAML list of switches (name, host, port, …)")
    inv_dir = Path(path).parent

    def fix(value: Any) -> Any:
        expanded = Path(os.path.expanduser(value))
        return str(expanded if expanded.is_absolute() else inv_dir / expanded)

    return [_fix_switch(d, fix) for d in data]


def _not_utf8(what: str, err: UnicodeDecodeError) -> str:
    line = err.object[:err.start].count(b"\n") + 1
    return f"{what}: not UTF-8 text (byte 0x{err.object[err.start]:02x} on line {line}); save it as UTF-8"
