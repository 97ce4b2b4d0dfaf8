"""The bad-input corpus (issue 13): every input `drills run` must refuse gets the contract — exit 2, exactly
one clear line on stderr (`drills: …`, no traceback), and nothing done: no run folder (where the run is
refused before it starts), no file outside --reports, no twin started, no process left, and the live
twin's audit log without a mutating request by the drills.

Most cases are refused before any twin or pytest session starts, so they run in-process through
`drills.cli.main([...])`; the few that need pytest's collection (unknown steps, Gherkin errors) too.
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from drills.cli import main
from tests.e2e.drill_helpers import audit_of, drill_mutations

REPO = Path(__file__).resolve().parents[2]
BUILTIN = (REPO / "drills" / "profile" / "twin.yaml").read_text()
BINDER = "from pytest_bdd import scenarios\n\nscenarios('.')\n"
RUN = "r1"


@dataclass
class Case:
    id: str
    args: list[str]  # after `drills run`; {tmp} is the case's folder, {twin} the live twin's state dir
    says: str  # what the one line must contain
    files: dict[str, str | bytes] = field(default_factory=dict)  # written under {tmp} first
    env: dict[str, str | None] = field(default_factory=dict)
    run_folder: bool = False  # the refusal comes once the run folder exists (collection)
    patch: Callable | None = None  # (monkeypatch) → None, for what cannot be made for real (a full disk)


def profile(extra: str) -> str:
    return BUILTIN + "\n" + textwrap.dedent(extra)


ALLOWED = "safety: {allow: {nodes: ['gpu-*'], namespaces: [ai-platform]}}\n"  # a real target's explicit allowlist


def real_profile(extra: str = "") -> str:
    """A kubeconfig profile whose API is dead (connection refused) and whose current context is `dead`."""
    return textwrap.dedent("""\
        cluster: {mode: kubeconfig, kubeconfig: kubeconfig}
        safety: {allow: {nodes: ['*'], namespaces: [ai-platform]}}
        """) + textwrap.dedent(extra)


KUBECONFIG = json.dumps({
    "apiVersion": "v1", "kind": "Config", "current-context": "dead",
    "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}},
                 {"name": "other", "context": {"cluster": "dead", "user": "u"}}]})
STEP_FEATURE = textwrap.dedent("""\
    @training @gpu_node_loss
    Feature: A drill with a step nobody wrote
      Scenario: Unknown step
        Given the training job is running on at least 2 nodes
        When the moon falls on the data centre
    """)


RANDOM_RECORD = json.dumps({"scenario": "test_drain[cordon-drain]", "details": {"random": {
    "seed": 7, "replayed_from": None, "choices": {"node": ["gpu-train-03"]}}}}) + "\n"  # a --random run's record


def _full_disk(monkeypatch) -> None:
    import shutil

    monkeypatch.setattr("drills.core.preflight.shutil.disk_usage", lambda path: shutil._ntuple_diskusage(1, 1, 1000))


CLI = [
    Case("defect-unknown", ["--defect", "nope"], 'unknown defect "nope"'),
    Case("defect-typo", ["--defect", "no-pbd"], 'did you mean "no-pdb"'),
    Case("defect-empty", ["--defect", ""], "unknown defect"),
    Case("defect-with-twin-state", ["--defect", "no-pdb", "--twin-state", "{twin}"], "--defect with --twin-state"),
    Case("scale-with-twin-state", ["--scale", "60", "--twin-state", "{twin}"], "--scale with --twin-state"),
    Case("scale-nan", ["--scale", "nan"], "--scale nan"),
    Case("scale-inf", ["--scale", "inf"], "--scale inf"),
    Case("scale-neg-inf", ["--scale", "-inf"], "--scale -inf"),
    Case("scale-zero", ["--scale", "0"], "--scale 0"),
    Case("scale-negative", ["--scale", "-1"], "--scale -1"),
    Case("scale-absurd", ["--scale", "1e12"], "--scale 1e+12"),
    Case("scale-not-a-number", ["--scale", "fast"], "Invalid value for '--scale'"),
    Case("random-negative", ["--random=-3"], "--random '-3' must be a non-negative whole number"),
    Case("random-float", ["--random", "4.2"], "--random '4.2' must be a non-negative whole number"),
    Case("random-huge", ["--random", "99999999999999999999"], "must be a non-negative whole number below"),
    Case("random-word", ["--random", "tomorrow"], "fix --random"),
    Case("random-and-replay", ["--random", "1", "--replay", "old"], "--random and --replay both given",
         files={"reports/old/records.jsonl": RANDOM_RECORD}),
    Case("replay-unknown", ["--replay", "nope"], "--replay nope: no such run"),
    Case("replay-escapes", ["--replay", "../x"], "--replay '../x': must be one folder name"),
    Case("replay-not-random", ["--replay", "old"], "recorded no target choice",
         files={"reports/old/records.jsonl": '{"scenario": "s", "details": {}}\n'}),
    Case("replay-target-not-allowed", ["--replay", "old", "--profile", "{tmp}/p.yaml"],
         "node gpu-train-03 is not in the profile's allowlist",
         files={"reports/old/records.jsonl": RANDOM_RECORD,
                "p.yaml": "safety: {allow: {nodes: ['gpu-train-0[12]'], namespaces: [ai-platform]}}\n"}),
    Case("twin-state-missing", ["--twin-state", "{tmp}/nothing"], "no running twin there"),
    Case("twin-state-dead-pid", ["--twin-state", "{tmp}/dead"], "is no longer running",
         files={"dead/twin.json": json.dumps({"pid": 999_999_999, "url": "http://127.0.0.1:9"})}),
    Case("twin-state-dead-url", ["--twin-state", "{tmp}/mute"], "does not answer",
         files={"mute/twin.json": json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:9"})}),
    Case("twin-state-garbage", ["--twin-state", "{tmp}/junk"], "no running twin there",
         files={"junk/twin.json": "{not json"}),
    Case("lang-unknown", ["--lang", "xx"], "--lang 'xx' is not a report language"),
    Case("lang-empty", ["--lang", ""], "is not a report language"),
    Case("lang-case", ["--lang", "EN"], "is not a report language"),
    Case("load-workers-negative", ["--load-workers", "-3"], "--load-workers -3"),
    Case("load-workers-absurd", ["--load-workers", "100000"], "--load-workers 100000"),
    Case("load-workers-text", ["--load-workers", "many"], "Invalid value for '--load-workers'"),
    Case("run-id-escapes", ["--run-id", "../../x"], "must be one folder name under --reports"),
    Case("run-id-slash", ["--run-id", "a/b"], "must be one folder name"),
    Case("run-id-absolute", ["--run-id", "/tmp/x"], "must be one folder name"),
    Case("run-id-dotdot", ["--run-id", ".."], "must be one folder name"),
    Case("run-id-latest", ["--run-id", "latest"], "must be one folder name"),
    Case("run-id-empty", ["--run-id", ""], "must be one folder name"),
    Case("run-id-space", ["--run-id", "a b"], "must be one folder name"),
    Case("run-id-newline", ["--run-id", "a\nb"], "must be one folder name"),
    Case("run-id-symlink-out", ["--run-id", "out"], "leads outside --reports",
         files={"reports/.keep": ""}, patch=lambda mp, tmp: (tmp / "reports" / "out").symlink_to(tmp)),
    Case("run-id-exists", ["--run-id", "old"], "run old already exists", files={"reports/old/records.jsonl": ""}),
    Case("markexpr-broken", ["-m", "training and"], "-m 'training and' is not a selection expression"),
    Case("keyword-broken", ["-k", "("], "-k '(' is not a selection expression"),
    Case("unknown-option", ["--frobnicate"], "No such option: --frobnicate"),
    Case("target-context-on-twin-profile", ["--target", "prod"], "--target prod is a kubeconfig context"),
]

PROFILE = [
    Case("profile-missing", ["--profile", "{tmp}/nope.yaml"], "file not found"),
    Case("profile-is-folder", ["--profile", "{tmp}"], "cannot read it"),
    Case("profile-not-yaml", ["--profile", "{tmp}/p.yaml"], "not valid YAML", files={"p.yaml": "cluster: [\n"}),
    Case("profile-a-list", ["--profile", "{tmp}/p.yaml"], "must be a YAML mapping", files={"p.yaml": "- a\n- b\n"}),
    Case("profile-not-utf8", ["--profile", "{tmp}/p.yaml"], "not UTF-8 text",
         files={"p.yaml": b"name: tw\xffin\n"}),
    Case("profile-utf16", ["--profile", "{tmp}/p.yaml"], "not UTF-8 text",
         files={"p.yaml": "name: twin\n".encode("utf-16")}),
    Case("profile-unknown-section", ["--profile", "{tmp}/p.yaml"], "clustr", files={"p.yaml": "clustr: {}\n"}),
    Case("profile-unknown-key", ["--profile", "{tmp}/p.yaml"], "contxt", files={"p.yaml": "cluster: {contxt: a}\n"}),
    Case("profile-bad-mode", ["--profile", "{tmp}/p.yaml"], "cluster.mode", files={"p.yaml": "cluster: {mode: ssh}\n"}),
    Case("profile-twin-scale-nan", ["--profile", "{tmp}/p.yaml"], "cluster.twin.scale",
         files={"p.yaml": "cluster: {twin: {scale: .nan}}\n"}),
    Case("profile-twin-scale-zero", ["--profile", "{tmp}/p.yaml"], "cluster.twin.scale",
         files={"p.yaml": "cluster: {twin: {scale: 0}}\n"}),
    Case("profile-twin-scale-absurd", ["--profile", "{tmp}/p.yaml"], "cluster.twin.scale",
         files={"p.yaml": "cluster: {twin: {scale: 1e12}}\n"}),
    Case("profile-twin-profile-unknown", ["--profile", "{tmp}/p.yaml"], "nosuch",
         files={"p.yaml": "cluster: {twin: {profile: nosuch}}\n"}),
    Case("profile-twin-defect-unknown", ["--profile", "{tmp}/p.yaml"], 'unknown defect "nope"',
         files={"p.yaml": "cluster: {twin: {defects: [nope]}}\n"}),
    Case("fio-exec-prerun", ["--profile", "{tmp}/p.yaml"], "'exec_prerun' runs a command",
         files={"p.yaml": "storage: {fio_options: {exec_prerun: 'touch /tmp/pwned'}}\n"}),
    Case("fio-exec-postrun", ["--profile", "{tmp}/p.yaml"], "'exec_postrun' runs a command",
         files={"p.yaml": "storage: {fio_options: {exec_postrun: 'reboot'}}\n"}),
    Case("fio-filename", ["--profile", "{tmp}/p.yaml"], "'filename' writes outside",
         files={"p.yaml": "storage: {fio_options: {filename: /dev/sda}}\n"}),
    Case("fio-directory", ["--profile", "{tmp}/p.yaml"], "'directory' writes outside",
         files={"p.yaml": "storage: {fio_options: {directory: /etc}}\n"}),
    Case("fio-write-log", ["--profile", "{tmp}/p.yaml"], "'write_lat_log' writes log files",
         files={"p.yaml": "storage: {fio_options: {write_lat_log: /etc/cron.d/x}}\n"}),
    Case("fio-ioscheduler", ["--profile", "{tmp}/p.yaml"], "'ioscheduler' changes",
         files={"p.yaml": "storage: {fio_options: {ioscheduler: none}}\n"}),
    Case("fio-value-newline", ["--profile", "{tmp}/p.yaml"], "is not a valid rate value",
         files={"p.yaml": "storage: {fio_options: {rate: \"1k\\nexec_prerun=touch /tmp/x\"}}\n"}),
    Case("fio-unknown-option", ["--profile", "{tmp}/p.yaml"], "'verify_pattern' is not allowed",
         files={"p.yaml": "storage: {fio_options: {verify_pattern: 1}}\n"}),
    Case("slo-duration-garbage", ["--profile", "{tmp}/p.yaml"], "slo.training_recovery_s",
         files={"p.yaml": "slo: {training_recovery_s: 15 parsecs}\n"}),
    Case("slo-negative", ["--profile", "{tmp}/p.yaml"], "slo.inference_recovery_s",
         files={"p.yaml": "slo: {inference_recovery_s: -5}\n"}),
    Case("blast-radius-negative", ["--profile", "{tmp}/p.yaml"], "max_nodes",
         files={"p.yaml": "safety: {blast_radius: {max_nodes: -1}}\n"}),
    Case("stop-condition-metric", ["--profile", "{tmp}/p.yaml"], "stop_conditions",
         files={"p.yaml": "safety: {stop_conditions: [{metric: cpu, above: 1}]}\n"}),
    Case("stop-condition-negative", ["--profile", "{tmp}/p.yaml"], "stop_conditions",
         files={"p.yaml": "safety: {stop_conditions: [{metric: not_ready_nodes, above: -1}]}\n"}),
    Case("endpoint-not-url", ["--profile", "{tmp}/p.yaml"], "endpoint",
         files={"p.yaml": "workloads: {inference: {endpoint: 'ftp://x; rm -rf /'}}\n"}),
    Case("log-pattern-bad-regex", ["--profile", "{tmp}/p.yaml"], "log_patterns",
         files={"p.yaml": "workloads: {training: {log_patterns: {step: '(unclosed'}}}\n"}),
    Case("block-size-garbage", ["--profile", "{tmp}/p.yaml"], "block_size",
         files={"p.yaml": "storage: {saturation: {block_size: huge}}\n"}),
    Case("switch-uplink-injection", ["--profile", "{tmp}/p.yaml"], "Ethernet240 && sudo",
         files={"p.yaml": "switches: {devices: [{name: leaf-1, host: 127.0.0.1, "
                          "uplinks: ['Ethernet240 && sudo config interface shutdown Ethernet248']}]}\n"}),
    Case("switch-name-injection", ["--profile", "{tmp}/p.yaml"], "leaf;reboot",
         files={"p.yaml": "switches: {devices: [{name: 'leaf;reboot', host: 127.0.0.1}]}\n"}),
    Case("switch-password-in-env-field", ["--profile", "{tmp}/p.yaml"], "must name an environment variable",
         files={"p.yaml": "switches: {devices: [{name: leaf-1, host: h, password_env: 'hunter2!'}]}\n"}),
    Case("switch-dialect-unknown", ["--profile", "{tmp}/p.yaml"], "junos9",
         files={"p.yaml": "switches: {devices: [{name: leaf-1, host: h, dialect: junos9}]}\n"}),
    Case("switch-port-out-of-range", ["--profile", "{tmp}/p.yaml"], "port",
         files={"p.yaml": "switches: {devices: [{name: leaf-1, host: h, port: 70000}]}\n"}),
    Case("switch-names-repeated", ["--profile", "{tmp}/p.yaml"], "repeated: leaf-1",
         files={"p.yaml": "switches: {devices: [{name: leaf-1, host: a}, {name: leaf-1, host: b}]}\n"}),
    Case("context-not-allowed-current", ["--profile", "{tmp}/p.yaml"], "context 'dead' is not in the profile's "
         "cluster.allowed_contexts", files={"kubeconfig": KUBECONFIG,
                                            "p.yaml": real_profile("cluster: {mode: kubeconfig, kubeconfig: kubeconfig, "
                                                                   "allowed_contexts: [prod]}\n").replace(
                                                "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n", "")}),
    Case("context-not-allowed-target", ["--profile", "{tmp}/p.yaml", "--target", "other"],
         "context 'other' is not in the profile's cluster.allowed_contexts",
         files={"kubeconfig": KUBECONFIG, "p.yaml": ALLOWED + "cluster: {mode: kubeconfig, kubeconfig: kubeconfig, "
                                                              "allowed_contexts: [dead]}\n"}),
    Case("context-unknown", ["--profile", "{tmp}/p.yaml", "--target", "ghost"], "context ghost",
         files={"kubeconfig": KUBECONFIG, "p.yaml": real_profile()}),
    Case("api-unreachable", ["--profile", "{tmp}/p.yaml"], "cannot reach the Kubernetes API at http://127.0.0.1:9",
         files={"kubeconfig": KUBECONFIG, "p.yaml": real_profile()}),
    Case("defect-on-real-cluster", ["--profile", "{tmp}/p.yaml", "--defect", "no-pdb"], "applies to the twin only",
         files={"kubeconfig": KUBECONFIG, "p.yaml": real_profile()}),
    Case("scale-on-real-cluster", ["--profile", "{tmp}/p.yaml", "--scale", "60"], "applies to the twin only",
         files={"kubeconfig": KUBECONFIG, "p.yaml": real_profile()}),
]

INVENTORY = [
    Case("inventory-missing", ["--profile", "{tmp}/p.yaml"], "switch inventory", files={
        "p.yaml": "switches: {inventory: nope.yaml}\n"}),
    Case("inventory-not-utf8", ["--profile", "{tmp}/p.yaml"], "not UTF-8 text", files={
        "p.yaml": "switches: {inventory: inv.yaml}\n", "inv.yaml": b"- name: le\xe9f-1\n  host: h\n"}),
    Case("inventory-not-yaml", ["--profile", "{tmp}/p.yaml"], "not valid YAML", files={
        "p.yaml": "switches: {inventory: inv.yaml}\n", "inv.yaml": "- {name: [\n"}),
    Case("inventory-not-a-list", ["--profile", "{tmp}/p.yaml"], "must be a YAML list", files={
        "p.yaml": "switches: {inventory: inv.yaml}\n", "inv.yaml": "leaf-1: {host: h}\n"}),
    Case("inventory-bad-interface", ["--profile", "{tmp}/p.yaml"], "Ethernet0;reboot", files={
        "p.yaml": "switches: {inventory: inv.yaml}\n",
        "inv.yaml": "- {name: leaf-1, host: h, uplinks: ['Ethernet0;reboot']}\n"}),
    Case("inventory-and-devices", ["--profile", "{tmp}/p.yaml"], "set either inventory or devices", files={
        "p.yaml": "switches: {inventory: inv.yaml, devices: [{name: a, host: h}]}\n", "inv.yaml": "[]\n"}),
    Case("inventory-is-folder", ["--profile", "{tmp}/p.yaml"], "switch inventory", files={
        "p.yaml": "switches: {inventory: inv}\n", "inv/.keep": ""}),
    Case("inventory-unknown-key", ["--profile", "{tmp}/p.yaml"], "switches.devices.0.host: required", files={
        "p.yaml": "switches: {inventory: inv.yaml}\n", "inv.yaml": "- {name: leaf-1, hostname: h}\n"}),
]

FEATURE = [
    Case("feature-missing", ["{tmp}/nope.feature"], "no such file or folder"),
    Case("feature-folder-missing", ["features/netwrok"], "feature path features/netwrok: no such file"),
    Case("feature-not-a-feature", ["{tmp}/notes.txt"], "not a .feature file", files={"notes.txt": "hi\n"}),
    Case("feature-empty-folder", ["{tmp}/empty"], "no .feature file in it", files={"empty/.keep": ""}),
    Case("feature-not-utf8", ["{tmp}/suite"], "not UTF-8 text", files={
        "suite/x.feature": b"Feature: caf\xe9\n", "suite/test_binder1.py": BINDER}),
    Case("feature-unbound", ["{tmp}/loose.feature"], "no test module binds it", files={
        "loose.feature": STEP_FEATURE}),
    Case("feature-unknown-step", ["{tmp}/suite"], 'unknown step "When the moon falls on the data centre"', files={
        "suite/x.feature": STEP_FEATURE, "suite/test_binder2.py": BINDER}, run_folder=True),
    Case("feature-gherkin-error", ["{tmp}/suite"], "FeatureError", files={
        "suite/x.feature": "Given a step before any feature\nFeature: broken\n", "suite/test_binder3.py": BINDER},
         run_folder=True),
    Case("feature-unknown-tag", ["{tmp}/suite"], "not-a-marker", files={
        "suite/x.feature": "@not-a-marker\nFeature: tagged\n  Scenario: s\n    Given the training job is running "
                           "on at least 2 nodes\n", "suite/test_binder4.py": BINDER}, run_folder=True),
    Case("feature-binder-import-error", ["{tmp}/suite"], "ModuleNotFoundError", files={
        "suite/x.feature": STEP_FEATURE, "suite/test_binder5.py": "import no_such_module_here\n"}, run_folder=True),
]

ENVIRONMENT = [
    Case("env-load-workers-text", [], "DRILLS_LOAD_WORKERS='many'", env={"DRILLS_LOAD_WORKERS": "many"}),
    Case("env-load-workers-negative", [], "DRILLS_LOAD_WORKERS='-1'", env={"DRILLS_LOAD_WORKERS": "-1"}),
    Case("env-kubeconfig-missing", ["--profile", "{tmp}/p.yaml"], "cannot load kubeconfig",
         env={"KUBECONFIG": "/nonexistent/kubeconfig"}, files={"p.yaml": ALLOWED + "cluster: {mode: kubeconfig}\n"}),
    Case("env-kubeconfig-garbage", ["--profile", "{tmp}/p.yaml"], "cannot load kubeconfig",
         env={"KUBECONFIG": "{tmp}/kc"}, files={"p.yaml": ALLOWED + "cluster: {mode: kubeconfig}\n", "kc": "::: not yaml"}),
    Case("env-no-home-kubeconfig", ["--profile", "{tmp}/p.yaml"], "cannot load kubeconfig",
         env={"KUBECONFIG": None, "HOME": "{tmp}/home"}, files={"p.yaml": ALLOWED + "cluster: {mode: kubeconfig}\n",
                                                                "home/.keep": ""}),
]

FILESYSTEM = [
    Case("reports-is-a-file", ["--reports", "{tmp}/file"], "is not a folder", files={"file": "x"}),
    Case("reports-under-a-file", ["--reports", "{tmp}/file/sub"], "is not a folder", files={"file": "x"}),
    Case("reports-read-only", ["--reports", "/proc/self/drills"], "--reports /proc/self/drills"),
    Case("disk-full", [], "MB free", patch=lambda mp, tmp: _full_disk(mp)),
]

def _twin_fails_to_start(monkeypatch) -> None:
    """A twin child that really exits while starting (an argument its CLI refuses)."""
    from drills.twin import launcher

    real = launcher.start_twin
    monkeypatch.setattr(launcher, "start_twin", lambda *a, **kw: real(*a, **{**kw, "extra_args": ["--no-such-flag"]}))


SETUP = [
    Case("twin-fails-to-start", ["features/training/gpu_node_loss.feature", "-k", "cordon"],
         "the twin (profile minimal) exited with code 2 while starting", run_folder=True,
         patch=lambda mp, tmp: _twin_fails_to_start(mp)),
]

CASES = SETUP + CLI + PROFILE + INVENTORY + FEATURE + ENVIRONMENT + FILESYSTEM


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 72 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_the_contract(case: Case, tmp_path, capsys, monkeypatch, request):
    tmp = tmp_path
    needs_twin = any("{twin}" in a for a in case.args)
    twin = request.getfixturevalue("twin") if needs_twin else None
    fill = {"tmp": str(tmp), "twin": str(twin.state_dir) if twin else ""}
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value.format(**fill))
    if case.patch is not None:
        case.patch(monkeypatch, tmp)
    scratch = tmp / "scratch"  # this case's temp dir: a twin it started would show here, not another test's
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    reports = tmp / "reports"
    args = [a.format(**fill) if "{" in a else a for a in case.args]
    if "--reports" not in args:
        args += ["--reports", str(reports)]
    if "--run-id" not in args:
        args += ["--run-id", RUN]
    before = _files(tmp, reports)
    twins_before, children_before = _twin_dirs(scratch), _children()
    audit_before = len(audit_of(twin)) if twin else 0

    rc = main(["run", "--no-html", *args])

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, f"exit {rc}; stdout {out!r}; stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("drills: "), err
    assert case.says in lines[0], lines[0]
    assert "Traceback" not in out + err
    assert _files(tmp, reports) == before  # nothing written outside --reports
    run_dirs = [p for p in reports.iterdir() if p.name == RUN] if reports.is_dir() else []
    assert case.run_folder or run_dirs == [], "a run folder for a refused run"
    assert _twin_dirs(scratch) == twins_before and _children() <= children_before  # no twin, no process left
    if twin:
        assert drill_mutations(audit_of(twin)[audit_before:]) == []


def _files(tmp: Path, reports: Path) -> set[str]:
    return {str(p.relative_to(tmp)) for p in tmp.rglob("*")
            if reports not in p.parents and p != reports and not p.is_relative_to(tmp / "scratch")}


def _twin_dirs(scratch: Path) -> set[str]:
    return {p.name for p in scratch.iterdir()}  # a refused run leaves no temp file (twin state dir) behind


def _children() -> set[int]:
    """Live child processes of this test process."""
    mine, found = os.getpid(), set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[1]) == mine and fields[0] != "Z":
            found.add(int(pid))
    return found
