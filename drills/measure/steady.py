"""The steady-state readers: the platform as it is now, each figure with where it was read.

`read_hypothesis(when, drill, ctx)` reads every facet the profile's `nominal:` declares for the drill
(drills/profile/nominal.py) and has drills/verdicts/steady.py judge each reading. Read-only against the
cluster and the switches; the store facet writes and reads back a small checkpoint-shaped probe (the
drill's own baseline probe), never more. A facet that cannot be read is a reading "not observed", never
skipped and never filled in from the profile (DESIGN §5b).
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from drills.core.clock import parse_iso
from drills.verdicts.steady import (Hypothesis, Reading, answers_reading, gpu_use_reading, replicas_reading,
                                    restart_reading, store_reading, throughput_reading, unobserved)

__all__ = ["SteadyContext", "read_hypothesis", "read_throughput", "read_last_restart", "history_nominal",
           "last_restored", "cluster_key", "history_facet", "job_pods"]

log = logging.getLogger(__name__)

JOB_LABEL = "volcano.sh/job-name"
VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")
MIN_STEP_LINES = 3  # a throughput reading needs at least this many step lines in its window
STORE_PROBES = 5  # write probes of the store; its reading is the best of them
PROBE_ANSWERS = 4  # completions the serving facet sends (a nominal endpoint answers every one)


@dataclass
class SteadyContext:
    """What the readers reach: the cluster, the profile, the twin's info (switch inventory), the reports
    folder (history) and, lazily, the checkpoint store's directory."""

    cluster: Any
    profile: Any
    twin_info: dict | None = None
    reports_dir: Path | None = None  # this run's directory; its parent holds the earlier runs
    store_dir: Callable[[], str] | None = None
    write_probe: bool = True  # False (`drills validate`: writes nothing): the store is not probed, and says so


def read_hypothesis(when: str, drill: str, ctx: SteadyContext, since: datetime | None = None) -> Hypothesis | None:
    """Every facet of `drill`'s nominal state, read now and judged; None when the profile declares none.
    `since` (after the revert): restarts before it are the drill's own."""
    nominal = ctx.profile.nominal.of(drill)
    if nominal is None or not nominal.facets:
        return None
    now = ctx.cluster.clock.now()
    readings: list[Reading] = []
    training = ctx.profile.workloads.training
    if nominal.training_throughput is not None:
        readings.append(_throughput(ctx, nominal.training_throughput))
    if nominal.no_worker_restart_s is not None:
        at, what, source = read_last_restart(ctx.cluster, training)
        readings.append(restart_reading(at, what, source, now, nominal.no_worker_restart_s, since,
                                        verified=last_restored(ctx.reports_dir, ctx.twin_info)))
    if nominal.gpus_in_use:
        readings.extend(_gpus_in_use(ctx))
    if nominal.inference_replicas is not None:
        readings.append(_replicas(ctx, nominal.inference_replicas))
    if nominal.inference_answers or nominal.inference_latency is not None:
        from drills.measure.steady_serving import latency, probe_endpoint

        probe = probe_endpoint(ctx)  # one set of probe completions for both facets
        if nominal.inference_answers:
            readings.append(answers_reading(probe.sent, probe.failures, probe.source) if probe.url else
                            unobserved("inference answers", "probe completions valid", probe.source))
        if nominal.inference_latency is not None:
            readings.append(latency(ctx, drill, nominal.inference_latency, probe))
    if nominal.uplinks_up:
        from drills.measure.steady_fabric import uplinks

        readings.extend(uplinks(ctx))
    if nominal.store_bandwidth_mb_s is not None:
        readings.append(_store(ctx, nominal.store_bandwidth_mb_s, nominal.store_min_ratio))
    return Hypothesis(when, drill, tuple(readings), now)  # type: ignore[arg-type]


def read_throughput(cluster, workload, window_s: float) -> tuple[float | None, str, str]:
    """The job's throughput now: the median of the step lines its running workers logged in the last
    `window_s` cluster seconds. Returns (value | None, unit, source). A job that runs but has not yet logged
    enough step lines (it started moments ago) is read again as it logs, on the cluster's clock, for up to one
    window: too few lines yet is "not observed yet", not "not observed"."""
    deadline = cluster.clock.timestamp() + window_s
    while True:
        measured, unit, source, lines = _read_throughput(cluster, workload, window_s)
        if measured is not None or lines is None or cluster.clock.timestamp() >= deadline:
            return measured, unit, source
        time.sleep(min(0.5, max(0.02, cluster.clock.wall_seconds(window_s / 20))))  # a few more lines' time


def _read_throughput(cluster, workload, window_s: float) -> tuple[float | None, str, str, int | None]:
    """One reading: (value | None, unit, source, step lines found — None when no worker runs)."""
    from drills.measure.logread import LogReader

    pods = job_pods(cluster, workload)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    subject = f"{workload.namespace}/{workload.job}"
    if not running:
        return None, "samples/s", f"pods of training job {subject}: none Running", None
    values: dict[str, list[float]] = {"samples/s": [], "steps/s": []}
    last_at, names, steps = None, [], []
    for pod in running:
        name = pod["metadata"]["name"]
        try:
            text = _log(cluster, workload, name, window_s)
        except Exception as err:  # noqa: BLE001 — an unreadable log is a missing reading, named
            log.warning("log of %s not read: %s", name, err)
            continue
        names.append(name)
        reader = LogReader(workload.log_parser())
        steps += [event for line in text.splitlines() for event in reader.feed(line)
                  if event.kind == "step" and event.at is not None]
    # the log server already kept the last `window_s` by the target's own clock (sinceSeconds); the window is cut
    # again from the newest line, not from this host's copy of the clock: a copy ahead of the target (a twin that
    # held its clock while busy) would otherwise drop fresh lines and call a training job unobserved
    newest = max((event.at for event in steps), default=None)
    for event in steps:
        if (newest - event.at).total_seconds() > window_s:
            continue
        if event.samples_per_s is not None:
            values["samples/s"].append(event.samples_per_s)
        elif event.step_time_s:
            values["steps/s"].append(1.0 / event.step_time_s)
        last_at = event.at if last_at is None or event.at > last_at else last_at
    unit = "samples/s" if values["samples/s"] else "steps/s"
    found = values[unit]
    where = f"pods/log {', '.join(f'{workload.namespace}/{n}' for n in names) or '(none readable)'}"
    if len(found) < MIN_STEP_LINES:
        return None, unit, f"{where}: {len(found)} step line(s) with a throughput in the last {window_s:.0f} s", len(found)
    stamp = last_at.isoformat() if last_at else "?"
    return statistics.median(found), unit, f"{where}: median of {len(found)} step lines, last at {stamp}", len(found)


def read_last_restart(cluster, workload) -> tuple[datetime | None, str, str]:
    """The job's latest worker restart: Volcano's last `Restarting` condition, or a worker container's
    last termination (restartCount > 0). Returns (when | None, what, source)."""
    from kubernetes.client.exceptions import ApiException

    subject = f"{workload.namespace}/{workload.job}"
    found: list[tuple[datetime, str, str]] = []
    try:
        job = cluster.custom.get_namespaced_custom_object(*VOLCANO[:2], workload.namespace, VOLCANO[2], workload.job)
    except ApiException as err:
        return None, "", f"jobs.batch.volcano.sh {subject}: not readable ({err.status})"
    status = job.get("status") or {}
    conditions = sorted((parse_iso(c["lastTransitionTime"]), c.get("status")) for c in status.get("conditions") or ()
                        if c.get("lastTransitionTime"))
    restarts = [i for i, (_, phase) in enumerate(conditions) if phase == "Restarting"]
    if restarts:  # a restart ends when the job runs again: "steady for M minutes" counts from then
        last = restarts[-1]
        back = next((at for at, phase in conditions[last:] if phase == "Running"), None)
        at = back or conditions[last][0]
        what = (f"the job restarted (retryCount {status.get('retryCount', '?')}) and has run again since "
                f"{at.isoformat()}," if back else f"the job restarted (retryCount {status.get('retryCount', '?')}) and "
                "is not Running again yet; it began restarting")
        found.append((at, what, f"jobs.batch.volcano.sh {subject} status.conditions"))
    for pod in job_pods(cluster, workload):
        for cs in (pod.get("status") or {}).get("containerStatuses") or ():
            ended = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
            if int(cs.get("restartCount") or 0) > 0 and ended:
                name = pod["metadata"]["name"]
                found.append((parse_iso(ended), f"container {cs.get('name')} of {name} restarted "
                              f"({cs.get('restartCount')}×)", f"pods {workload.namespace}/{name} containerStatuses"))
    if not found:
        return None, "", (f"jobs.batch.volcano.sh {subject} (retryCount {status.get('retryCount', 0)}, no Restarting "
                          "condition) and its pods' containerStatuses (no restart)")
    at, what, source = max(found, key=lambda f: f[0])
    return at, what, source


def last_restored(run_dir: Path | None, twin_info: dict | None = None) -> datetime | None:
    """When an earlier drill of this run, on this very cluster, last found the platform back to nominal after its
    revert (cluster time, from this run's records.jsonl); None when none did. A fresh twin per scenario is another
    cluster with its own clock: its records never excuse this one's restarts."""
    cluster = cluster_key(twin_info)
    path = Path(run_dir) / "records.jsonl" if run_dir else None
    if path is None or not path.exists():
        return None
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            details = json.loads(line).get("details") or {}
        except ValueError:
            continue
        after = (details.get("steady_state") or {}).get("after") or {}
        if details.get("twin_state") == cluster and after.get("nominal") is True and after.get("at"):
            found.append(parse_iso(after["at"]))
    return max(found) if found else None


def cluster_key(twin_info: dict | None) -> str | None:
    """Which twin a record drilled, as the recorder notes it (`details.twin_state`); None on a real cluster."""
    if not twin_info:
        return None
    return twin_info.get("report_dir") or str(twin_info.get("kubeconfig", "")).rsplit("/", 1)[0]


def history_nominal(reports_dir: Path | None, job: str, last: int) -> tuple[float | None, str]:
    """The median of the baseline throughput the last `last` passed runs recorded for `job` ("ns/name"),
    from the reports folder's records; (None, why) when fewer than `last` runs recorded one."""
    if reports_dir is None or not Path(reports_dir).parent.is_dir():
        return None, "no reports folder to read the history from"
    figures: list[tuple[str, float]] = []
    for run in _earlier_runs(reports_dir):
        for rec in run.records:
            base = rec.details.get("baseline_throughput")
            if rec.passed and rec.details.get("job") == job and isinstance(base, (int, float)) and base > 0:
                figures.append((run.run_id, float(base)))
    figures = figures[-last:]
    if len(figures) < last:
        return None, (f"history: only {len(figures)} passed run(s) in {Path(reports_dir).parent} recorded a baseline "
                      f"for {job}, the profile asks for the median of {last}")
    runs = ", ".join(dict.fromkeys(r for r, _ in figures))
    return statistics.median(v for _, v in figures), f"median of the last {last} passed runs' baselines ({runs})"


def _earlier_runs(reports_dir: Path | None) -> list:
    """The runs in the reports folder before this one (`reports_dir`), oldest first; none without a folder."""
    from drills.report.records import load_run

    if reports_dir is None or not Path(reports_dir).parent.is_dir():
        return []
    this = Path(reports_dir).resolve()
    runs = []
    for child in sorted(this.parent.iterdir()):  # the earlier runs (this one may have no record yet)
        if child.is_symlink() or not child.is_dir() or child.resolve() == this or not (child / "records.jsonl").exists():
            continue
        try:
            run = load_run(child)
        except Exception as err:  # noqa: BLE001 — an unreadable run is no history, named in the log
            log.warning("history: %s not read: %s", child, err)
            continue
        if not run.dry_run and run.started is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: (r.started, r.run_id))


# -- facets -------------------------------------------------------------------------------------------------
def _throughput(ctx: SteadyContext, spec) -> Reading:
    workload = ctx.profile.workloads.training
    if spec.value is not None:
        nominal, nominal_source = spec.value, "the profile's nominal"
    else:
        nominal, nominal_source = history_nominal(ctx.reports_dir, f"{workload.namespace}/{workload.job}", spec.history)
    measured, unit, source = read_throughput(ctx.cluster, workload, spec.window_s)
    if measured is not None and unit != spec.unit:
        return unobserved("training throughput", f"a throughput in {spec.unit}",
                          f"{source}: the job logs {unit}, the profile's nominal is in {spec.unit}")
    return throughput_reading(measured, spec.unit, source, nominal, nominal_source, spec.min_ratio)


def _gpus_in_use(ctx: SteadyContext) -> list[Reading]:
    from drills.measure.gpu_use import read_gpu_use

    workload = ctx.profile.workloads.training
    expected = "every Running worker's GPUs held by compute processes and busy"
    try:
        workers, listed = read_gpu_use(ctx.cluster, workload)
    except Exception as err:  # noqa: BLE001 — named as the reading's source
        return [unobserved("GPUs in use", expected, f"pods of {workload.namespace}/{workload.job}: "
                                                    f"{str(err).splitlines()[0] if str(err) else err}")]
    if not workers:
        return [unobserved("GPUs in use", expected, listed)]
    return [gpu_use_reading(w.pod, w.gpus, w.utilization, w.apps, w.cuda_line, w.source,
                            "; ".join(e for e in (w.smi_error, w.log_error) if e)) for w in workers]


def _replicas(ctx: SteadyContext, expected: int) -> Reading:
    from drills.measure.serving import ServingMonitor

    w = ctx.profile.workloads.inference
    try:
        desired, ready, serving = ServingMonitor(ctx.cluster, w).readiness()
    except Exception as err:  # noqa: BLE001 — named as the reading's source
        return unobserved("inference replicas", f"{expected} replica(s) Ready and in the endpoints",
                          f"deployment {w.namespace}/{w.deployment}: {str(err).splitlines()[0] if str(err) else err}")
    source = (f"deployments {w.namespace}/{w.deployment}, pods -l {w.label_selector} (Ready condition), "
              f"endpoints {w.namespace}/{w.service}")
    return replicas_reading(serving, ready, desired, expected, source)


def history_facet(reports_dir: Path | None, drill: str, facet: str, last: int) -> tuple[float | None, str]:
    """The median of what the last `last` passed runs of `drill` read for `facet` before their fault (their records'
    `details.steady_state.before`); (None, why) when fewer than `last` recorded one."""
    figures: list[tuple[str, float]] = []
    for run in _earlier_runs(reports_dir):
        for rec in run.records:
            before = ((rec.details.get("steady_state") or {}).get("before") or {}).get("readings") or []
            values = [r.get("value") for r in before if r.get("facet") == facet and r.get("ok")]
            if rec.passed and rec.drill == drill and values and isinstance(values[0], (int, float)):
                figures.append((run.run_id, float(values[0])))
    figures = figures[-last:]
    if len(figures) < last:
        return None, (f"history: only {len(figures)} passed run(s) of {drill} recorded a nominal {facet} in "
                      f"{Path(reports_dir).parent if reports_dir else 'no reports folder'}, the profile asks for "
                      f"the median of {last}")
    runs = ", ".join(dict.fromkeys(r for r, _ in figures))
    return statistics.median(v for _, v in figures), f"median of the last {last} passed runs' readings ({runs})"


def _store(ctx: SteadyContext, nominal_mb_s: float, ratio: float) -> Reading:
    from drills.measure.checkpoint_io import probe_write_s
    from drills.measure.storage_io import MB

    st = ctx.profile.storage
    if not ctx.write_probe:
        return store_reading(None, "not probed: `drills validate` writes nothing (the drill probes the store before "
                             "its fault)", nominal_mb_s, ratio, withheld=True)
    try:
        directory = ctx.store_dir() if ctx.store_dir else None
    except Exception as err:  # noqa: BLE001
        return store_reading(None, f"the checkpoint store: {str(err).splitlines()[0]}", nominal_mb_s, ratio)
    if not directory:
        return store_reading(None, "the checkpoint store: not known", nominal_mb_s, ratio)
    try:  # write-only: the drill's own probe must be the first to read back (a store may corrupt its first read)
        runs = [probe_write_s(directory, st.probe_size_mb * MB, st.probe_shards) for _ in range(STORE_PROBES)]
    except Exception as err:  # noqa: BLE001
        return store_reading(None, f"write probe of {directory}: {str(err).splitlines()[0]}", nominal_mb_s, ratio)
    # the best of the runs: what the store can deliver (a busy client machine only ever makes a run slower)
    mb_s = st.probe_size_mb / min(runs) if min(runs) > 0 else None
    source = (f"write probe of {directory} ({st.probe_size_mb} MB in {st.probe_shards} shards, fsync, best of "
              f"{len(runs)})")
    return store_reading(mb_s, source, nominal_mb_s, ratio)


def job_pods(cluster, workload) -> list[dict]:
    resp = cluster.core.list_namespaced_pod(workload.namespace, label_selector=f"{JOB_LABEL}={workload.job}",
                                            _preload_content=False)
    return [p for p in json.loads(resp.data).get("items", []) if not (p.get("metadata") or {}).get("deletionTimestamp")]


def _log(cluster, workload, pod: str, window_s: float) -> str:
    kwargs = {"timestamps": True, "since_seconds": int(window_s) + 5, "_preload_content": False}
    if workload.container:
        kwargs["container"] = workload.container
    resp = cluster.core.read_namespaced_pod_log(pod, workload.namespace, **kwargs)
    return resp.data.decode("utf-8", errors="replace")

