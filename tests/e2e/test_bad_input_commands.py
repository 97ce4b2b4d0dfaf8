"""The bad-input corpus of every command (issue 32): `drills accept`, `schedule`, `revert` and `validate`, and the
classes issue 32 found in `drills run` (values that would reach a job file, a command line, a label or a path;
unknown tags; unbounded numbers; the twin profile against a real target). Each case gets the contract of
tests/e2e/test_bad_input.py — exit 2, exactly one `drills: …` line on stderr saying what, which object and what to
do, and nothing done: nothing on stdout that claims a check passed, no file outside the reports folder, no run
folder, no twin started, no process left. Every case is refused before any twin starts, in this process.

Every string a profile can carry that reaches a command line, a job file (fio's), an object's name or label, a path
or another program, and every numeric value, is refused at profile load — the whole table in
tests/unit/test_profile_strings.py (cheap: no CLI); a sample of each goes through the commands here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from drills.cli import main
from tests.e2e.test_bad_input import ALLOWED, BUILTIN, KUBECONFIG, _children, _files, _twin_dirs
from tests.unit.profile_strings import EVIL, INJECTIONS, NUMBERS, with_value

REPORTS = "{tmp}/reports"


@dataclass
class Case:
    id: str
    command: str
    args: list[str]  # after `drills <command>`; {tmp} is the case's folder
    says: str  # what the one line must contain
    files: dict[str, str] = field(default_factory=dict)  # written under {tmp} first


def _profile_cases() -> list[Case]:
    """A sample of the profile tables through `drills run`: each kind of string, and numbers (the rest: unit)."""
    fields = ["storage.checkpoint_store", "storage.saturation.mount_path", "workloads.inference.label_selector",
              "workloads.training.namespace", "cluster.context", "faults.uplink", "acceptance.store_dir",
              "workloads.inference.load_generator.image"]
    cases = [Case(f"profile-{path}-{tag}", "run", ["--profile", "{tmp}/p.yaml"], path,
                  files={"p.yaml": with_value(path, value)})
             for path in fields for tag, value in (("newline", EVIL), ("shape", INJECTIONS[path]))]
    numbers = {"slo.training_recovery_s", "storage.probe_size_mb", "safety.lock_duration_s", "cluster.twin.scale"}
    seen: set[str] = set()
    for path, tag, value in NUMBERS:
        if path in numbers and path not in seen:
            seen.add(path)
            cases.append(Case(f"number-{path}-{tag}", "run", ["--profile", "{tmp}/p.yaml"], path,
                              files={"p.yaml": with_value(path, value)}))
    return cases


FIO = [  # the fio allowlist: names exactly as in a job file, values in their grammar and range
    Case("fio-name-dashes", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {'--rate': 1k}}\n"}),
    Case("fio-name-newline", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {\"rate\\nexec_prerun=touch /tmp/x\": 1k}}\n"}),
    Case("fio-name-trailing-newline", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {\"rate\\n\": 1k}}\n"}),
    Case("fio-name-space", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {' rate': 1k}}\n"}),
    Case("fio-name-equals", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {'rate=1k\\nexec_prerun': x}}\n"}),
    Case("fio-name-upper", "run", ["--profile", "{tmp}/p.yaml"], "not an option name",
         files={"p.yaml": "storage: {fio_options: {RATE: 1k}}\n"}),
    Case("fio-value-inf", "run", ["--profile", "{tmp}/p.yaml"], "numjobs='inf' is not a valid numjobs value",
         files={"p.yaml": "storage: {fio_options: {numjobs: .inf}}\n"}),
    Case("fio-value-huge", "run", ["--profile", "{tmp}/p.yaml"], "above its range",
         files={"p.yaml": "storage: {fio_options: {iodepth: 1000000}}\n"}),
    Case("fio-value-trailing-newline", "run", ["--profile", "{tmp}/p.yaml"], "is not a valid bs value",
         files={"p.yaml": "storage: {fio_options: {bs: \"1M\\n\"}}\n"}),
    Case("fio-clients-newline", "run", ["--profile", "{tmp}/p.yaml"], "storage.saturation.clients",
         files={"p.yaml": "storage: {saturation: {mode: clients, clients: [\"node-3\\n\"]}}\n"}),
]

RUN = [  # `drills run`: the classes issue 32 found
    Case("run-markexpr-unknown-tag", "run", ["-m", "nosuchtag"], "-m 'nosuchtag': unknown tag nosuchtag"),
    Case("run-markexpr-one-unknown", "run", ["-m", "training and not sloo_15m"], "unknown tag sloo_15m"),
    Case("run-target-space", "run", ["--target", "prod east"], "--target 'prod east' must be a kubeconfig context"),
    Case("run-target-newline", "run", ["--target", "prod\nx"], "must be a kubeconfig context"),
    Case("run-real-target-no-allowlist", "run", ["--profile", "{tmp}/p.yaml"], "needs an explicit allowlist",
         files={"kubeconfig": KUBECONFIG, "p.yaml": "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n"}),
    Case("run-real-target-no-namespaces", "run", ["--profile", "{tmp}/p.yaml"], "safety.allow.namespaces is empty",
         files={"kubeconfig": KUBECONFIG, "p.yaml": "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n"
                                                     "safety: {allow: {nodes: [gpu-*]}}\n"}),
    Case("run-builtin-profile-real-target", "run", ["--target", "prod"], "the built-in twin profile drills the twin"),
]

ACCEPT = [  # `drills accept`: every option by its grammar, the target rule of every command
    *(Case(f"accept-nodes-{tag}", "accept", ["--nodes", nodes], says) for tag, nodes, says in (
        ("empty", "", "name the new nodes"), ("blank", " , ", "name the new nodes"),
        ("double-comma", "gpu-new-01,,gpu-new-02", "name the new nodes"),
        ("semicolon", "gpu-new-01;reboot", "--nodes 'gpu-new-01;reboot' must be a lowercase DNS name"),
        ("newline", "gpu-new-01\ngpu-new-02", "must be a lowercase DNS name"),
        ("upper", "GPU-NEW-01", "must be a lowercase DNS name"), ("path", "../gpu-new-01", "must be a lowercase DNS name"),
        ("too-long", "a" * 300, "must be a lowercase DNS name"),
        ("selector-injection", "role=new;reboot", "must be a label selector"),
        ("selector-newline", "role=new\nx=y", "must be a label selector"),
        ("selector-bare-not", "!", "must be a label selector"))),
    *(Case(f"accept-run-id-{tag}", "accept", ["--nodes", "gpu-new-01", "--run-id", run_id], "must be one folder name")
      for tag, run_id in (("escapes", "../../x"), ("slash", "a/b"), ("absolute", "/tmp/x"), ("latest", "latest"),
                          ("newline", "a\nb"), ("empty", ""))),
    *(Case(f"accept-scale-{tag}", "accept", ["--nodes", "gpu-new-01", "--scale", scale], says)
      for tag, scale, says in (("nan", "nan", "--scale nan"), ("inf", "inf", "--scale inf"), ("zero", "0", "--scale 0"),
                               ("negative", "-5", "--scale -5"), ("absurd", "1e9", "--scale 1e+09"))),
    Case("accept-twin-profile-path", "accept", ["--nodes", "gpu-new-01", "--twin-profile", "../minimal"],
         "--twin-profile '../minimal' must be a lowercase DNS label"),
    Case("accept-twin-profile-unknown", "accept", ["--nodes", "gpu-new-01", "--twin-profile", "nosuch"], "nosuch"),
    Case("accept-defect-unknown", "accept", ["--nodes", "gpu-new-01", "--defect", "nope"], 'unknown defect "nope"'),
    Case("accept-defect-with-twin-state", "accept", ["--nodes", "gpu-new-01", "--defect", "dcgm-fail", "--twin-state",
                                                     "{tmp}"], "with --twin-state they would be ignored"),
    Case("accept-twin-state-missing", "accept", ["--nodes", "gpu-new-01", "--twin-state", "{tmp}/none"],
         "no running twin there"),
    Case("accept-builtin-profile-real-target", "accept", ["--nodes", "gpu-new-01", "--target", "prod"],
         "the built-in twin profile drills the twin"),
    Case("accept-twin-profile-real-target", "accept", ["--nodes", "gpu-new-01", "--target", "prod", "--profile",
                                                       "{tmp}/p.yaml"], "drills the twin", files={"p.yaml": BUILTIN}),
    Case("accept-real-target-no-allowlist", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml"],
         "needs an explicit allowlist",
         files={"kubeconfig": KUBECONFIG, "p.yaml": "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n"}),
    Case("accept-real-target-defect", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml", "--defect",
                                                 "dcgm-fail"], "apply to the twin only",
         files={"kubeconfig": KUBECONFIG, "p.yaml": ALLOWED + "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n"}),
    Case("accept-target-space", "accept", ["--nodes", "gpu-new-01", "--target", "a b"], "must be a kubeconfig context"),
    Case("accept-profile-missing", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/nope.yaml"], "file not found"),
    Case("accept-profile-injection", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml"],
         "acceptance.store_dir", files={"p.yaml": with_value("acceptance.store_dir", "/mnt/store\nrm -rf /")}),
    Case("accept-profile-job-image", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml"],
         "acceptance.jobs.gpu.image", files={"p.yaml": with_value("acceptance.jobs", {"gpu": {"image": "x y",
                                                                                       "command": ["nvidia-smi"]}})}),
    Case("accept-profile-job-timeout-inf", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml"],
         "acceptance.jobs.gpu.timeout_s", files={"p.yaml": with_value("acceptance.jobs", {"gpu": {
             "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "command": ["nvidia-smi"], "timeout_s": ".inf"}})}),
    Case("accept-profile-unknown-check", "accept", ["--nodes", "gpu-new-01", "--profile", "{tmp}/p.yaml"],
         "acceptance.checks", files={"p.yaml": with_value("acceptance.checks", ["gpu", "rm -rf"])}),
    Case("accept-reports-is-a-file", "accept", ["--nodes", "gpu-new-01", "--reports", "{tmp}/file"], "is not a folder",
         files={"file": "x"}),
    Case("accept-unknown-option", "accept", ["--nodes", "gpu-new-01", "--frobnicate"], "No such option: --frobnicate"),
    Case("accept-nodes-missing", "accept", [], "Missing option '--nodes'"),
]

SCHEDULE_BASE = ["--profile", "{tmp}/p.yaml", "--image", "registry.example.com/gpu-drills:0.1.0", "-o", "{tmp}/out.yaml"]
IN_CLUSTER = BUILTIN.replace("  mode: twin ", "  mode: in-cluster ")
SCHEDULE = [  # `drills schedule`: what reaches the manifests, by its grammar
    *(Case(f"schedule-{tag}", "schedule", [*SCHEDULE_BASE, *extra], says, files={"p.yaml": IN_CLUSTER})
      for tag, extra, says in (
          ("name-upper", ["--name", "Drills"], "--name 'Drills': must be a lowercase DNS label"),
          ("name-dot", ["--name", "a.b"], "--name 'a.b'"), ("name-long", ["--name", "a" * 60], "at most 52"),
          ("namespace-slash", ["--namespace", "a/b"], "--namespace 'a/b'"),
          ("namespace-newline", ["--namespace", "ns\nx"], "--namespace"),
          ("image-space", ["--image", "registry.example.com/gpu-drills:0.1.0 --privileged"], "--image must be an image"),
          ("image-upper", ["--image", "Registry/Drills:1"], "--image must be an image"),
          ("image-newline", ["--image", "img\nx"], "--image must be an image"),
          ("cron-fields", ["--cron", "* * *"], "cron"), ("cron-range", ["--cron", "61 * * * *"], "minute"),
          ("markexpr-unknown", ["-m", "nosuchtag"], "unknown tag nosuchtag"),
          ("keyword-broken", ["-k", "uplink and ("], "-k 'uplink and (' is not a selection expression"),
          ("reports-pvc", ["--reports-pvc", "PVC_1"], "--reports-pvc 'PVC_1' must be a lowercase DNS name"),
          ("checkpoint-pvc", ["--checkpoint-pvc", "ckpt;x"], "--checkpoint-pvc"),
          ("switch-secret", ["--switch-secret", "creds\n"], "--switch-secret"),
          ("load-secret-name", ["--load-secret", "Key:api"], "--load-secret 'Key' must be a lowercase DNS name"),
          ("load-secret-key", ["--load-secret", "llm-key:a/b"], "--load-secret 'a/b' must be a ConfigMap or Secret key"),
          ("time-zone", ["--time-zone", "Europe/Berlin; id"], "--time-zone"),
          ("time-zone-path", ["--time-zone", "../../etc/localtime"], "--time-zone"),
          ("priority-class", ["--priority-class", "High"], "--priority-class 'High'"),
          ("node-selector", ["--node-selector", "pool"], "--node-selector 'pool': must be KEY=VALUE"),
          ("node-selector-newline", ["--node-selector", "pool=sys\ntem"], "--node-selector"),
          ("toleration", ["--toleration", "dedicated=drills:Sometimes"], "--toleration"),
          ("features-missing", ["--features", "{tmp}/nofeatures"], "nofeatures"),
      )),
    Case("schedule-profile-missing", "schedule", ["--profile", "{tmp}/nope.yaml", "--image", "img:1"], "file not found"),
    Case("schedule-profile-kubeconfig", "schedule", ["--profile", "{tmp}/p.yaml", "--image", "img:1"],
         "cluster.mode is kubeconfig", files={"p.yaml": ALLOWED + "cluster: {mode: kubeconfig}\n"}),
    Case("schedule-profile-injection", "schedule", ["--profile", "{tmp}/p.yaml", "--image", "img:1"],
         "storage.checkpoint_store", files={"p.yaml": IN_CLUSTER.replace("checkpoint_store: from-twin",
                                                                          'checkpoint_store: "/ckpt\\nrm -rf /"')}),
    Case("schedule-profile-no-allowlist", "schedule", ["--profile", "{tmp}/p.yaml", "--image", "img:1"],
         "needs an explicit allowlist", files={"p.yaml": "cluster: {mode: in-cluster}\n"}),
    Case("schedule-image-missing", "schedule", ["--profile", "{tmp}/p.yaml"], "Missing option '--image'",
         files={"p.yaml": IN_CLUSTER}),
]

REVERT = [  # `drills revert`: the run it names is one folder under --reports
    *(Case(f"revert-run-{tag}", "revert", ["--reports", REPORTS, "--run", run], says)
      for tag, run, says in (("escapes", "../../etc", "--run '../../etc': must be one folder name"),
                             ("slash", "a/b", "must be one folder name"), ("absolute", "/tmp", "must be one folder name"),
                             ("newline", "r1\nr2", "must be one folder name"), ("empty", "", "must be one folder name"),
                             ("dotdot", "..", "must be one folder name"), ("missing", "nosuch", "no run nosuch"))),
    Case("revert-run-symlink-out", "revert", ["--reports", REPORTS, "--run", "out"], "leads outside --reports",
         files={"reports/.keep": ""}),
    Case("revert-unknown-option", "revert", ["--reports", REPORTS, "--frobnicate"], "No such option: --frobnicate"),
]

VALIDATE = [  # `drills validate`: bad input is the one line, never "checks passed"
    Case("validate-markexpr-unknown", "validate", ["-m", "nosuchtag"], "-m 'nosuchtag': unknown tag nosuchtag"),
    Case("validate-markexpr-broken", "validate", ["-m", "training and"], "is not a selection expression"),
    Case("validate-target-builtin", "validate", ["--target", "prod"], "the built-in twin profile drills the twin"),
    Case("validate-target-space", "validate", ["--target", "a b"], "must be a kubeconfig context"),
    Case("validate-profile-missing", "validate", ["--profile", "{tmp}/nope.yaml"], "file not found"),
    Case("validate-profile-not-yaml", "validate", ["--profile", "{tmp}/p.yaml"], "not valid YAML",
         files={"p.yaml": "cluster: [\n"}),
    Case("validate-profile-injection", "validate", ["--profile", "{tmp}/p.yaml"], "workloads.training.namespace",
         files={"p.yaml": with_value("workloads.training.namespace", EVIL)}),
    Case("validate-profile-number", "validate", ["--profile", "{tmp}/p.yaml"], "slo.training_recovery_s",
         files={"p.yaml": with_value("slo.training_recovery_s", ".inf")}),
    Case("validate-real-no-allowlist", "validate", ["--profile", "{tmp}/p.yaml"], "needs an explicit allowlist",
         files={"kubeconfig": KUBECONFIG, "p.yaml": "cluster: {mode: kubeconfig, kubeconfig: kubeconfig}\n"}),
    Case("validate-twin-state-missing", "validate", ["--twin-state", "{tmp}/none"], "no running twin there"),
    Case("validate-unknown-option", "validate", ["--frobnicate"], "No such option: --frobnicate"),
]

CASES = _profile_cases() + FIO + RUN + ACCEPT + SCHEDULE + REVERT + VALIDATE


def test_the_corpus_covers_every_command():
    from tests.e2e.test_bad_input import CASES as RUN_CASES

    assert len({c.id for c in CASES}) == len(CASES)
    assert len(CASES) + len(RUN_CASES) >= 150
    assert {c.command for c in CASES} == {"run", "accept", "schedule", "revert", "validate"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_the_contract(case: Case, tmp_path, capsys, monkeypatch):
    tmp = tmp_path
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    if case.id == "revert-run-symlink-out":
        (tmp / "reports" / "out").symlink_to(tmp)
    scratch = tmp / "scratch"  # a twin this case started would show here
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    monkeypatch.chdir(tmp)
    reports = tmp / "reports"
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    if case.command in ("run", "accept") and "--reports" not in args:
        args += ["--reports", str(reports)]
    if case.command in ("run", "accept") and "--run-id" not in args:
        args += ["--run-id", "r1"]
    extra = ["--no-html"] if case.command in ("run", "accept") else []
    before = _files(tmp, reports)
    twins_before, children_before = _twin_dirs(scratch), _children()

    rc = main([case.command, *extra, *args])

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, f"exit {rc}; stdout {out!r}; stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("drills: "), err
    assert case.says in lines[0], lines[0]
    assert "Traceback" not in out + err and "checks passed" not in out and not out.strip(), out
    assert _files(tmp, reports) == before  # nothing written outside the reports folder (schedule's -o included)
    assert not (reports / "r1").exists(), "a run folder for a refused run"
    assert _twin_dirs(scratch) == twins_before and _children() <= children_before
    assert not os.path.exists("/tmp/pwned")
