"""One interrupt trial of `drills run` or `drills accept` (issues 11, 32; shared by tests/e2e/test_interrupts.py and
bench/signal_trials.py).

A trial starts a drill as its own process (its own session, SIGINT/SIGTERM at their defaults whatever this
process inherited), waits for a moment of the run read from its progress — the journal's ops, the console's
lines — plus a random delay, sends SIGINT or SIGTERM (and for `twice` a second SIGINT while it tears down),
and then checks the safety contract: exit 130; no journal entry of the run left open (`drills revert` finds
nothing); a record of the scenario if it had started; the console claims "every fault … was reverted" only
when that is true; and on a twin of our own (`--twin-state`) that no node, switch port, Lease or process
is left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.e2e.drill_helpers import REPO, schedulable

__all__ = ["KINDS", "DRILLS", "MOMENTS", "Trial", "run_trial", "start_twin_for_trials"]

# drill kind → (-m, -k): the shortest scenario of each drill
KINDS = {
    "training": ("training", "cordon"),
    "network": ("network", "carrying and not sonic and not nxos"),
    "inference": ("inference", "1 and 2"),
    "storage": ("storage", "saturate"),
    "accept": ("", ""),  # `drills accept --gate` of the expansion twin's two new nodes: the same contract as a drill
}
DRILLS = tuple(k for k in KINDS if k != "accept")  # the `drills run` kinds
ACCEPT_NODES = "gpu-new-01,gpu-new-02"
GATE_TAINT = "gpu-drills.io/unaccepted"
ACCEPT_RUN_LABEL = "gpu-drills.io/accept-run"
# when the (first) signal goes: once the run began (twin, collection, Given steps), once the fault is in,
# while the drill's own teardown reverts (its first journal close), and after the fault with a second
# SIGINT during the teardown that the first one started
MOMENTS = ("starting", "injected", "teardown", "twice")
CLAIM = "every fault injected so far was reverted"
_FAULT_KINDS_EXCLUDED = {"lock", "load"}  # the run lock and the baseline load are not the drill's fault


@dataclass
class Trial:
    kind: str
    signum: int
    moment: str
    run_dir: Path
    rc: int | None = None
    sent: list[str] = field(default_factory=list)  # "SIGINT@injected+0.42s"
    missed: bool = False  # the run ended before the moment came: nothing was tested
    late: bool = False  # ... or this process came late: the drill's teardown had begun before the signal could go
    hung: bool = False
    started: bool = False  # the console showed the scenario start (a record is then owed)
    open_entries: list[str] = field(default_factory=list)
    records: int = 0
    claimed_reverted: bool = False
    leftovers: list[str] = field(default_factory=list)  # on our own twin: what the run left behind
    revert_output: str = ""
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0

    @property
    def checks(self) -> dict[str, bool]:
        return {
            "exit 130": self.rc == 130,
            "journal closed": not self.open_entries and "nothing to revert" in self.revert_output,
            "lock released": not any(e.startswith("lock") for e in self.open_entries)
            and not any(x.startswith("lease") for x in self.leftovers),
            "record": self.records >= 1 or not self.started,
            # never "every fault … reverted" while one is open; and when one is, say how to revert it
            "console truthful": not self.open_entries or (not self.claimed_reverted and "drills revert" in self.stderr),
            "twin clean": not self.leftovers,
        }

    @property
    def ok(self) -> bool:
        return not self.missed and all(self.checks.values())

    def failures(self) -> list[str]:
        return [name for name, good in self.checks.items() if not good]

    def describe(self) -> str:
        why = ", ".join(self.failures()) or "ok"
        details = []
        if self.rc != 130:
            details.append(f"rc={self.rc}")
        if self.open_entries:
            details.append("open: " + " ".join(self.open_entries))
        if self.leftovers:
            details.append("left: " + "; ".join(self.leftovers))
        tail = [ln for ln in self.stderr.splitlines() if ln.strip()][-3:]
        return (f"{self.kind} {signal.Signals(self.signum).name} {self.moment} [{' '.join(self.sent)}]: {why}"
                + (f" ({'; '.join(details)})" if details else "") + (f"\n      stderr: {' | '.join(tail)}" if tail
                                                                        and why != "ok" else ""))


def run_trial(kind: str, signum: int, moment: str, reports: Path, run_id: str, *, twin=None,
              rng: random.Random | None = None, timeout: float = 180.0) -> Trial:
    """Run one drill, interrupt it at `moment`, check what it left. `twin`: a TwinHandle to drill (else its own)."""
    rng = rng or random.Random()
    markexpr, keyword = KINDS[kind]
    run_dir = Path(reports) / run_id
    trial = Trial(kind, signum, moment, run_dir)
    argv = ([sys.executable, "-m", "drills.cli", "accept", "--nodes", ACCEPT_NODES, "--gate"] if kind == "accept" else
            [sys.executable, "-m", "drills.cli", "run", "-m", markexpr, "-k", keyword])
    argv += ["--no-html", "--reports", str(reports), "--run-id", run_id]
    if twin is not None:
        argv += ["--twin-state", str(twin.state_dir)]
    Path(reports).mkdir(parents=True, exist_ok=True)
    out_path, err_path = Path(reports) / f"{run_id}.out", Path(reports) / f"{run_id}.err"
    began = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="160"),
                                preexec_fn=_default_signals, start_new_session=True)
        try:
            _interrupt(proc, trial, out_path, rng, began, timeout)
            try:
                trial.rc = proc.wait(timeout=max(5.0, timeout - (time.monotonic() - began)))
            except subprocess.TimeoutExpired:
                trial.hung = True
                proc.kill()
                trial.rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    trial.wall_s = time.monotonic() - began
    trial.stdout, trial.stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    trial.started = "▶ " in trial.stdout
    trial.claimed_reverted = CLAIM in trial.stderr
    trial.open_entries = [f"{e['kind']}:{e['target']}" for e in journal_entries(run_dir) if not e["closed"]]
    trial.records = _count_lines(run_dir / "records.jsonl")
    if twin is not None:
        trial.leftovers = twin_leftovers(twin, reports)
    if not run_dir.is_dir():  # stopped before the run made its folder: nothing can be open
        trial.revert_output = "nothing to revert: the run made no folder"
        return trial
    done = subprocess.run([sys.executable, "-m", "drills.cli", "revert", "--reports", str(reports), "--run", run_id],
                          cwd=REPO, capture_output=True, text=True, timeout=120, preexec_fn=_default_signals)
    trial.revert_output = done.stdout + done.stderr
    return trial


def journal_entries(run_dir: Path) -> list[dict]:
    """The run's journal, folded: one dict per entry with kind, target, injected, closed (the truth)."""
    path = Path(run_dir) / "journal.jsonl"
    entries: dict[str, dict] = {}
    if not path.exists():
        return []
    for line in path.read_text(errors="replace").splitlines():
        try:
            op = json.loads(line)
        except ValueError:
            continue  # a torn tail
        if op.get("op") == "open":
            entries[op["id"]] = {"id": op["id"], "kind": op["kind"], "target": op["target"], "injected": False,
                                 "closed": False}
        elif op.get("id") in entries:
            entries[op["id"]]["injected"] |= op["op"] == "injected"
            entries[op["id"]]["closed"] |= op["op"] == "close"
    return list(entries.values())


def twin_leftovers(twin, reports: Path) -> list[str]:
    """What a drill run left on this twin: cordoned/tainted nodes, ports down, a held Lease, fio/locust alive."""
    from drills.faults.switch import uplink
    from drills.profile.model import SwitchConfig

    left = []
    nodes = requests.get(f"{twin.url}/api/v1/nodes", timeout=10).json()["items"]
    left += [f"node {n['metadata']['name']}" for n in nodes if not schedulable(n)]
    left += [f"gate taint on {n['metadata']['name']}" for n in nodes
             if any(t.get("key") == GATE_TAINT for t in (n.get("spec") or {}).get("taints") or [])]
    jobs = requests.get(f"{twin.url}/apis/batch/v1/jobs", params={"labelSelector": ACCEPT_RUN_LABEL}, timeout=10)
    left += [f"job {j['metadata']['name']}" for j in (jobs.json().get("items", []) if jobs.ok else [])]
    for entry in twin.info.get("switches") or []:
        for interface in entry.get("uplinks") or []:
            if not uplink.show_state(SwitchConfig.model_validate(entry), interface).admin_up:
                left.append(f"port {entry['name']}:{interface} down")
    lease = requests.get(f"{twin.url}/apis/coordination.k8s.io/v1/namespaces/ai-platform/leases/gpu-drills-run",
                         timeout=10)
    if lease.status_code == 200 and (lease.json().get("spec") or {}).get("holderIdentity"):
        left.append(f"lease held by {lease.json()['spec']['holderIdentity']}")
    left += [f"process {p}" for p in processes(("fio", "locust"), (str(twin.state_dir), str(reports)))]
    return left


def processes(names: tuple[str, ...], markers: tuple[str, ...]) -> list[str]:
    """Live processes named like `names` whose command line mentions one of `markers`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        text = " ".join(argv)
        if state not in "ZX" and any(n in text for n in names) and any(m in text for m in markers):
            found.append(f"{entry.name} {os.path.basename(argv[0])}")
    return found


def start_twin_for_trials(state_dir: Path, kind: str = "training"):
    """A twin of our own (`drills twin up --state-dir`), at the profile's scale, as the drills' own would be (accept:
    the expansion profile, its two new nodes, as `drills accept` starts it)."""
    from drills.profile.model import load_target
    from drills.twin.launcher import start_twin

    profile = load_target(None)
    twin_profile = profile.acceptance.twin_profile if kind == "accept" else "minimal"
    return start_twin(state_dir, profile=twin_profile, scale=profile.cluster.twin.scale)


def _interrupt(proc: subprocess.Popen, trial: Trial, out_path: Path, rng: random.Random, began: float,
               timeout: float) -> None:
    """Wait for the trial's moment, then send its signal(s); `missed` if the run ended first."""
    deadline = began + timeout
    journal = trial.run_dir / "journal.jsonl"

    def reached() -> bool:
        if trial.moment == "starting":  # `drills run` has begun: its run folder exists
            return trial.run_dir.is_dir()
        entries = journal_entries(trial.run_dir) if journal.exists() else []
        faults = [e for e in entries if e["kind"] not in _FAULT_KINDS_EXCLUDED]
        if trial.moment in ("injected", "twice"):
            return any(e["injected"] for e in faults)
        return any(e["closed"] for e in faults)  # teardown: the drill's own revert has closed its entry

    while not reached():
        if proc.poll() is not None or time.monotonic() > deadline:
            trial.missed = True
            return
        time.sleep(0.02)
    delay = {"starting": rng.uniform(0.0, 2.5), "injected": rng.uniform(0.0, 1.5), "teardown": rng.uniform(0.0, 0.3),
             "twice": rng.uniform(0.0, 0.5)}[trial.moment]
    time.sleep(delay)
    if trial.moment in ("injected", "twice") and _tearing_down(trial, out_path):
        trial.missed = trial.late = True  # a signal now would land in the teardown: not the moment this trial tests
        return
    if not _send(proc, trial.signum):
        trial.missed = True
        return
    trial.sent.append(f"{signal.Signals(trial.signum).name}@{trial.moment}+{delay:.2f}s")
    if trial.moment == "twice":
        again = rng.uniform(0.05, 1.0)
        time.sleep(again)
        if _send(proc, signal.SIGINT):
            trial.sent.append(f"SIGINT+{again:.2f}s")


def _tearing_down(trial: Trial, out_path: Path) -> bool:
    """Whether the drill has reached its teardown: a revert or a scenario's result on the console, or a fault entry
    the drill closed. A starved test worker may wake up that late; the run would then rightly keep the verdict its
    checks reached (a signal during teardown waits for it), which is not what the `injected` moments test."""
    text = out_path.read_text(errors="replace") if out_path.exists() else ""
    if "\n  ↺ " in text or "\n■ " in text or text.startswith("■ "):  # "↺ reverting …" opens the teardown
        return True
    return any(e["closed"] for e in journal_entries(trial.run_dir) if e["kind"] not in _FAULT_KINDS_EXCLUDED)


def _send(proc: subprocess.Popen, signum: int) -> bool:
    if proc.poll() is not None:
        return False
    proc.send_signal(signum)
    return True


def _default_signals() -> None:
    """In the child, before exec: SIGINT/SIGTERM at their defaults even if this process inherited them ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _count_lines(path: Path) -> int:
    return sum(1 for ln in path.read_text().splitlines() if ln.strip()) if path.exists() else 0
