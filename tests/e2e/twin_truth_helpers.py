"""Helpers for the twin workload e2e tests: ground truth, logs, and the switches over real SSH."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import paramiko
import requests
from kubernetes import client

from drills.measure.logread import LogReader

__all__ = ["wait_for", "truth", "records", "first", "twin_now", "job_pods", "logs", "events_of", "ssh_run",
           "leaf_of", "uplink_command", "NS", "JOB", "DEPLOY"]

T = TypeVar("T")
NS, JOB, DEPLOY = "ai-platform", "llm-finetune-8b", "llama-7b-infer"


def wait_for(probe: Callable[[], T], what: str, deadline_s: float = 60.0, every_s: float = 0.05) -> T:
    """Poll `probe` until truthy; AssertionError naming `what` at the (generous, wall) deadline."""
    end = time.monotonic() + deadline_s
    last = probe()
    while not last:
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}; last value {last!r}")
        time.sleep(every_s)
        last = probe()
    return last


def truth(handle) -> dict:
    return requests.get(handle.info["truth"], timeout=10).json()


def records(handle, kind: str | None = None, subject: str | None = None, since: float | None = None) -> list[dict]:
    params = {k: v for k, v in {"kind": kind, "subject": subject, "since": since}.items() if v is not None}
    return requests.get(handle.info["truth"], params=params, timeout=10).json()["records"]


def first(handle, kind: str, subject: str, since: float | None = None) -> dict | None:
    found = records(handle, kind, subject, since)
    return found[0] if found else None


def twin_now(handle) -> float:
    return requests.get(f"{handle.url}/twin/v1/clock", timeout=10).json()["now"]


def job_pods(core: client.CoreV1Api, job: str = JOB, ns: str = NS, running: bool = True) -> list:
    pods = core.list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items
    if running:
        pods = [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    return sorted(pods, key=lambda p: p.metadata.name)


def logs(core: client.CoreV1Api, pod: str, ns: str = NS, fmt: str = "auto"):
    """(raw text with timestamps, parsed events) of a pod's current log; empty when the pod is gone."""
    try:
        text = core.read_namespaced_pod_log(pod, ns, timestamps=True)
    except client.ApiException:
        return "", []
    reader = LogReader(fmt)  # the drills' reader: what the twin prints is read as a real cluster's log
    return text, [e for line in text.splitlines() for e in reader.feed(line)] + reader.close()


def events_of(core: client.CoreV1Api, ns: str, name: str) -> list:
    return [e for e in core.list_namespaced_event(ns).items if e.involved_object.name == name]


def leaf_of(core: client.CoreV1Api, node: str) -> str:
    return core.read_node(node).metadata.labels["network.gpu-drills.io/leaf"]


def uplink_command(dialect: str, iface: str, up: bool) -> str:
    if dialect == "sonic":
        return f"sudo config interface {'startup' if up else 'shutdown'} {iface}"
    return f"configure terminal ; interface {iface} ; {'no shutdown' if up else 'shutdown'} ; end"


def ssh_run(handle, switch: str, command: str) -> tuple[int, str]:
    """Run one command on a twin switch as the drill does: strict host keys, the client key from twin.json."""
    entry = next(s for s in handle.info["switches"] if s["name"] == switch)
    ssh = paramiko.SSHClient()
    ssh.load_host_keys(handle.info["known_hosts"])
    ssh.set_missing_host_key_policy(paramiko.RejectPolicy())
    ssh.connect(entry["host"], entry["port"], username=entry["username"], key_filename=handle.info["switch_key"],
                look_for_keys=False, allow_agent=False, timeout=10)
    try:
        _, out, err = ssh.exec_command(command, timeout=10)
        text = out.read().decode() + err.read().decode()
        return out.channel.recv_exit_status(), text
    finally:
        ssh.close()
