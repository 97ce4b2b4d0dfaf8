"""Every option and profile value of `drills run`, checked before the run starts (issue 13's contract).

A refused input is one `DrillError` line — what, which object, what to do — raised before the run
folder exists, before any twin starts and before anything touches a cluster: the CLI prints it and
exits 2. `check_run(opts, profile)` is the whole list; `feature_selection(paths)` turns feature paths
into what pytest collects plus the features they name (a folder of `.feature` files has no test
module of its own: its binder is the nearest `test_*.py` above it, filtered to the named features).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path
from typing import Iterable

from drills.core.errors import DrillError, InvalidProfile
from drills.core.grammar import check_flag, valid
from drills.core.selection import ACCEPTANCE_FOLDER
from drills.profile.safety import check_target

__all__ = ["check_run", "check_target", "check_run_id", "random_plan", "check_replay_allowed", "feature_selection", "check_reports_writable", "check_utf8",
           "check_scale", "check_twin", "check_twin_state", "MAX_SCALE",
           "MAX_LOAD_WORKERS", "MIN_FREE_MB"]

log = logging.getLogger(__name__)

MAX_SCALE = 10_000.0  # twin seconds per wall second: beyond this the twin's controllers cannot keep up
MAX_LOAD_WORKERS = 64  # locust worker processes; more than the cores of any load host is a typo
MIN_FREE_MB = 20  # a run writes records, journal, Allure results: refuse a nearly full disk up front
_RESERVED_RUN_IDS = frozenset({"latest", "twin", "."})


def check_run(opts, profile) -> None:
    """Refuse (one DrillError line) any option or profile value the run would misuse or silently ignore."""
    from drills.report.text import LANGS

    if opts.lang not in LANGS:
        raise DrillError(f"--lang {opts.lang!r} is not a report language; use one of {', '.join(LANGS)}")
    _check_load_workers(opts.load_workers)
    check_run_id(opts.run_id, Path(opts.reports_root))
    check_flag("--target", "context", opts.target)
    on_twin = check_target(opts.target, profile, opts.twin_state, source=opts.profile)
    if opts.scale is not None:
        check_scale(opts.scale, "--scale")
    if opts.twin_state:
        for flag, given in (("--defect", opts.defects), ("--scale", opts.scale is not None)):
            if given:
                raise DrillError(f"{flag} with --twin-state would be ignored (the running twin keeps its own); "
                                 f"drop {flag}, or drop --twin-state so that the run starts twins with it")
        check_twin_state(opts.twin_state)
    elif on_twin:
        check_twin(profile, opts.defects)
    elif opts.defects or opts.scale is not None:
        flag = "--defect" if opts.defects else "--scale"
        raise DrillError(f"{flag} applies to the twin only, but the target is {opts.target} (cluster.mode "
                         f"{profile.cluster.mode}); drop {flag} or drill the twin")
    check_reports_writable(Path(opts.reports_root))
    random_plan(opts, profile)


def random_plan(opts, profile):
    """How the run picks its targets (drills.core.picks): `--random SEED|auto`, `--replay RUN`, or neither (None).
    A replayed run that is unknown, chose nothing, or chose a target the profile no longer allows is one line."""
    from drills.core.picks import load_replay, parse_seed

    given, replay = getattr(opts, "random", None), getattr(opts, "replay", None)
    if given is not None and replay is not None:
        raise DrillError("--random and --replay both given: --replay repeats a run's recorded choices (and seed); "
                         "drop one of them")
    if replay is not None:
        check_run_id(replay, Path(opts.reports_root), "--replay")
        plan = load_replay(Path(opts.reports_root), replay)
        check_replay_allowed(plan, profile)
        return plan
    seed = parse_seed(given)
    if seed is None:
        return None
    from drills.core.picks import RandomPlan

    return RandomPlan(seed)


def check_replay_allowed(plan, profile) -> None:
    """Every target a replayed run chose is still in the profile's allowlist (node names, switches and their
    interfaces, the serving namespace); UnsafeTarget, one line, names the first that is not."""
    from drills.profile.safety import check_namespace_allowed, check_node_allowed, check_switch_allowed
    from drills.core.errors import UnsafeTarget

    for scenario, choices in plan.replay.items():
        try:
            for node in choices.get("node", ()):
                check_node_allowed(profile, node)
            for uplink in choices.get("uplink", ()):
                switch, _, interface = uplink.partition(":")
                check_switch_allowed(profile, switch, interface or None)
            if choices.get("replica"):
                check_namespace_allowed(profile, profile.workloads.inference.namespace)
        except UnsafeTarget as err:
            raise UnsafeTarget(f"--replay {plan.replayed_from}: scenario {scenario!r}: {err}") from None


def feature_selection(paths: Iterable[str], default: Path, lang: str = "en") -> tuple[list[str], list[str]]:
    """(what pytest collects, the feature files or folders named): a path that does not exist, is not
    UTF-8, or has no test module binding it is one DrillError line. In another language than English, a path
    of the English tree names its counterpart in that language's (`--lang zh features/network` runs
    features/zh/network)."""
    collect: list[str] = []
    named: list[str] = []
    for raw in paths:
        path = _in_language(Path(raw).expanduser(), default, lang)
        if not path.exists():
            raise DrillError(f"feature path {raw}: no such file or folder; pass a .feature file or a folder of "
                             f"them (e.g. features/network)")
        path = path.resolve()
        runbook = (default / ACCEPTANCE_FOLDER).resolve()
        if path == runbook or runbook in path.parents:
            raise DrillError(f"feature path {raw}: the acceptance runbook is no drill; `drills accept --nodes NODES` "
                             f"runs it")
        if path.is_file() and path.suffix not in (".feature", ".py"):
            raise DrillError(f"feature path {raw}: not a .feature file (nor a test module); pass a .feature file "
                             f"or a folder of them")
        features = [path] if path.is_file() else sorted(path.rglob("*.feature"))
        for feature in features:
            if feature.suffix == ".feature":
                check_utf8(feature, "feature")
        if path.is_file() and path.suffix == ".py" or path.is_dir() and _binders(path, recursive=True):
            collect.append(str(path))
            continue
        if path.is_dir() and not features:
            raise DrillError(f"feature path {raw}: no .feature file in it; pass a folder of drills such as "
                             f"{default}/network")
        binder = next((d for d in [path if path.is_dir() else path.parent, *path.parents] if _binders(d)), None)
        if binder is None:
            raise DrillError(f"feature path {raw}: no test module binds it (a test_*.py calling pytest-bdd's "
                             f"scenarios() in its folder or above); put it under {default}")
        collect.append(str(binder))
        named.append(str(path))
    return list(dict.fromkeys(collect)), named


def _in_language(path: Path, default: Path, lang: str) -> Path:
    """`path`, or its counterpart in `lang`'s tree when it is a path of the English tree under `default`."""
    from drills.core.languages import DEFAULT_LANG, feature_root, other_trees

    root, english = feature_root(default, lang).resolve(), Path(default).resolve()
    try:
        rel = path.resolve().relative_to(english)
    except ValueError:
        return path  # a site's own features: read as given
    if lang == DEFAULT_LANG:
        if rel.parts and rel.parts[0] in {p.name for p in other_trees(english, lang)}:
            raise DrillError(f"feature path {path}: the {rel.parts[0]} features; run them with --lang {rel.parts[0]}")
        return path
    if path.resolve() == root or root in path.resolve().parents:
        return path
    twin = root / rel
    if not twin.exists():
        raise DrillError(f"feature path {path}: no {lang} counterpart {twin}; write it (the trees mirror each "
                         f"other) or run it with --lang en")
    return twin


def check_reports_writable(root: Path) -> None:
    """The reports folder can be created and written, with room for a run (checked on its nearest existing
    ancestor: nothing is created here)."""
    existing = root.expanduser().absolute()
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise DrillError(f"--reports {root}: {existing} is not a folder; pass a folder the run may write into")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DrillError(f"--reports {root}: {existing} is not writable; pass a folder you may write into")
    try:
        free_mb = shutil.disk_usage(existing).free / 1e6
    except OSError as err:
        raise DrillError(f"--reports {root}: cannot read the free space of {existing} ({err.strerror}); "
                         f"pass another folder") from None
    if free_mb < MIN_FREE_MB:
        raise DrillError(f"--reports {root}: only {free_mb:.1f} MB free on {existing} (a run needs {MIN_FREE_MB} MB); "
                         f"free some space or pass another folder")


def check_utf8(path: Path, what: str) -> str:
    """The file's text; one InvalidProfile line when it is not UTF-8 (and says where)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise InvalidProfile(f"{what} {path}: not UTF-8 text (byte 0x{data[err.start]:02x} on line {line}); save "
                             f"it as UTF-8") from None


def _check_load_workers(workers: int | None) -> None:
    if workers is not None and not 0 <= workers <= MAX_LOAD_WORKERS:
        raise DrillError(f"--load-workers {workers}: must be 0 (one locust process) to {MAX_LOAD_WORKERS} worker "
                         f"processes")
    env = os.environ.get("DRILLS_LOAD_WORKERS")
    if workers is None and env is not None and env.strip():
        try:
            value = int(env)
        except ValueError:
            value = -1
        if not 0 <= value <= MAX_LOAD_WORKERS:
            raise DrillError(f"environment DRILLS_LOAD_WORKERS={env!r}: must be a whole number from 0 to "
                             f"{MAX_LOAD_WORKERS}; fix it or unset it")


def check_run_id(run_id: str | None, reports: Path, flag: str = "--run-id") -> None:
    """A run id is one folder name under --reports (drills.core.grammar `run_id`), never a path out of it."""
    if run_id is None:
        return
    if not valid("run_id", run_id) or run_id in _RESERVED_RUN_IDS or ".." in run_id:
        raise DrillError(f"{flag} {run_id!r}: must be one folder name under --reports (letters, digits, '.', '_', "
                         f"'-'; no '/', no '..', not 'latest'), e.g. {flag} nightly-42")
    if (reports / run_id).resolve().parent != reports.resolve():  # a symlink cannot lead it out either
        raise DrillError(f"{flag} {run_id!r} leads outside --reports {reports}; pick another run id")


def check_scale(scale: float, what: str) -> None:
    if not math.isfinite(scale) or scale <= 0 or scale > MAX_SCALE:
        raise DrillError(f"{what} {scale:g}: twin seconds per wall second must be a number above 0 and at most "
                         f"{MAX_SCALE:g} (e.g. --scale 60)")


def check_twin_state(state: str) -> None:
    from drills.core.kube import _pid_alive
    from drills.twin.launcher import read_twin_info

    info = read_twin_info(state)
    if info is None:
        raise DrillError(f"--twin-state {state}: no running twin there (no twin.json); start one with "
                         f"`drills twin up --state-dir {state}` or drop --twin-state")
    if not _pid_alive(info.get("pid")):
        raise DrillError(f"--twin-state {state}: the twin there (pid {info.get('pid')}) is no longer running; start "
                         f"it again with `drills twin up --state-dir {state}` or drop --twin-state")
    import requests

    try:
        requests.get(f"{info['url'].rstrip('/')}/version", timeout=3).raise_for_status()
    except (requests.RequestException, KeyError, AttributeError) as err:
        raise DrillError(f"--twin-state {state}: the twin does not answer at {info.get('url')} "
                         f"({type(err).__name__}); restart it with `drills twin up --state-dir {state}`") from None


def check_twin(profile, defects: list[str], twin_profile: str | None = None) -> None:
    """The twin profile and every defect load (unknown names, bad overlays) before a twin starts."""
    from drills.twin.profile import load_profile

    twin = profile.cluster.twin
    check_scale(twin.scale, "cluster.twin.scale")
    try:
        load_profile(twin_profile or twin.profile, [*twin.defects, *defects])
    except InvalidProfile as err:
        raise InvalidProfile(f"--defect/cluster.twin: {err}") from None


def _binders(folder: Path, recursive: bool = False) -> list[Path]:
    """Test modules pytest would collect in `folder` (its default python_files patterns)."""
    if not folder.is_dir():
        return []
    pattern = "**/test_*.py" if recursive else "test_*.py"
    return [p for p in folder.glob(pattern) if ".venv" not in p.parts]
