"""`drills validate`, what is not Kubernetes: switches over SSH (strict host keys, `show` only), the
checkpoint store and fio, and the tools a run needs (Allure, locust in a child process). Reads only."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from drills.profile.model import SwitchConfig, TargetProfile
from drills.core.errors import DrillError
from drills.validate.preflight import Check

__all__ = ["switch_checks", "storage_checks", "tool_checks"]

log = logging.getLogger(__name__)


def switch_checks(profile: TargetProfile, twin_info: dict | None) -> list[Check]:
    """One line per inventory switch: key file readable, password variable set, SSH login with strict
    host keys, every listed uplink exists and is up (admin and oper), and LLDP shows its far end (what the uplink
    drill confirms before the fault)."""
    from drills.faults.switch.target import switch_inventory

    try:
        inventory = switch_inventory(profile, twin_info)
    except DrillError as err:
        return [Check("switch inventory", False, str(err))]
    unverified = profile.fabric.opt_out()  # fabric.lldp: unavailable — not asked, and the line says so
    return [_switch(sw, unverified) for sw in inventory]


def storage_checks(cluster, profile: TargetProfile, twin_info: dict | None) -> list[Check]:
    """fio is installed; the checkpoint store is a writable directory (job mode: its namespace and PVC exist)."""
    from drills.faults.storage.fio import fio_binary

    out = []
    try:
        out.append(Check("fio", True, fio_binary()))
    except DrillError as err:
        out.append(Check("fio", False, str(err)))
    sat = profile.storage.saturation
    if sat.mode == "job":
        out.append(_pvc(cluster, sat.namespace, sat.claim))
        return out
    store = profile.storage.checkpoint_store
    if store == "from-twin":
        store = (twin_info or {}).get("checkpoint_store")
        if not store:
            return out + [Check("checkpoint store", False, 'storage.checkpoint_store is "from-twin" but the target '
                                "is no twin: set the store's mount path")]
    if not os.path.isdir(store):
        out.append(Check("checkpoint store", False, f"{store} is not a directory here: mount the store (or fix "
                         "storage.checkpoint_store)"))
    elif not os.access(store, os.W_OK | os.X_OK):
        out.append(Check("checkpoint store", False, f"{store} is not writable by uid {os.getuid()}: grant write "
                         "access (the drill writes and reads back a probe checkpoint there)"))
    else:
        out.append(Check("checkpoint store", True, f"{store} is a writable directory"))
    return out


def tool_checks(drills: set[str]) -> list[Check]:
    """Allure CLI and Java (warning: only the HTML report needs them); locust importable when the
    inference drill is selected (in a child process: its gevent patching must stay out of ours)."""
    from drills.report.allure_build import allure_bin

    try:
        out = [Check("Allure CLI", True, f"{allure_bin()} (Java found)")]
    except DrillError as err:
        out = [Check("Allure CLI", False, f"{err} (only the HTML report needs it; --no-html skips it)", warn=True)]
    if {"inference-pod-kill", "inference-rolling-restart", "inference-noisy-neighbour"} & set(drills):
        proc = subprocess.run([sys.executable, "-c", "import locust; print(locust.__version__)"], capture_output=True,
                              text=True, timeout=120)
        if proc.returncode == 0:
            out.append(Check("locust", True, f"locust {proc.stdout.strip()} imports (in a child process)"))
        else:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            out.append(Check("locust", False, f"`import locust` fails ({last}): pip install locust in this "
                             "environment (the inference drill's load generator)"))
    return out


# -- helpers -----------------------------------------------------------------------------------
def _switch(sw: SwitchConfig, unverified: str | None = None) -> Check:
    from drills.core.errors import CheckFailed
    from drills.faults.switch.lldp import read_lldp
    from drills.faults.switch.uplink import show_state
    from drills.faults.switch.session import SwitchSession

    name = f"switch {sw.name}"
    where = f"({sw.dialect}, {sw.host}:{sw.port})"
    if sw.key_file and not os.access(sw.key_file, os.R_OK):
        return Check(name, False, f"key_file {sw.key_file} is not readable by uid {os.getuid()}: fix its path or mode")
    if sw.password_env and not os.environ.get(sw.password_env):
        return Check(name, False, f"password_env names ${sw.password_env}, which is not set here: export it "
                     "(or mount the Secret) before the run")
    try:
        if not sw.uplinks:
            with SwitchSession(sw, error=CheckFailed, accept_unknown_host_keys=False):
                pass
            return Check(name, True, f"{where} answers over SSH (strict host keys); no uplinks listed")
        down = []
        for interface in sw.uplinks:
            state = show_state(sw, interface, accept_unknown_host_keys=False)
            if not (state.admin_up and state.oper_up):
                down.append(f"{interface} admin {state.admin}/oper {state.oper}")
        lldp = None
        if unverified is None:
            with SwitchSession(sw, error=CheckFailed, accept_unknown_host_keys=False) as session:
                lldp = read_lldp(session)  # the uplink drill confirms both ends of its cable by LLDP before the fault
    except DrillError as err:
        return Check(name, False, str(err))
    if down:
        return Check(name, False, f"{where} uplinks not up: {', '.join(down)}; bring them up (a drill refuses a "
                     "port that is already down)")
    if lldp is None:
        peers = ", ".join(f"{i} → {sw.peers[i]}" for i in sw.uplinks if i in (sw.peers or {})) or "none named"
        return Check(name, True, f"{where} answers over SSH (strict host keys); uplinks {', '.join(sw.uplinks)} up; "
                     f"far ends from the inventory ({peers}): {unverified}")
    unseen = [i for i in sw.uplinks if not lldp.on(i)]
    if unseen:
        return Check(name, False, f"{where} LLDP shows no neighbour on uplink {', '.join(unseen)} ({lldp.source}): "
                     "the uplink drill cannot confirm its far end and will refuse it")
    return Check(name, True, f"{where} answers over SSH (strict host keys); uplinks {', '.join(sw.uplinks)} up, "
                 f"their far ends seen by LLDP ({', '.join(f'{n.system} {n.port_id}' for i in sw.uplinks for n in lldp.on(i))})")


def _pvc(cluster, namespace: str, claim: str | None) -> Check:
    from kubernetes.client.exceptions import ApiException

    if not claim:
        return Check("checkpoint store", False, "storage.saturation.mode is job but storage.saturation.claim is "
                     "not set: name the store's PVC")
    try:
        cluster.core.read_namespace(namespace)
    except ApiException as err:
        return Check("checkpoint store", False, f"namespace {namespace} "
                     f"{'does not exist' if err.status == 404 else f'cannot be read ({err.status})'}: "
                     "set storage.saturation.namespace")
    try:
        pvc = cluster.core.read_namespaced_persistent_volume_claim(claim, namespace)
    except ApiException as err:
        return Check("checkpoint store", False, f"PVC {namespace}/{claim} "
                     f"{'does not exist' if err.status == 404 else f'cannot be read ({err.status})'}: "
                     "set storage.saturation.claim to the store's claim")
    phase = pvc.status.phase if pvc.status else None
    return Check("checkpoint store", phase == "Bound", f"PVC {namespace}/{claim} is {phase or 'unknown'}"
                 + ("" if phase == "Bound" else ": it must be Bound for the fio Job's pods to mount it"))
