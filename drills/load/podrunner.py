"""The inference load as Kubernetes pods: a locust master Job, a worker Job of N pods and the master's Service
(drills/load/pods.py renders them), driven like `LoadRunner` drives local processes — same constructor
options, same files in `out_dir`, same `LoadResult`.

`start()` creates the objects and waits (watch, cluster time) until the master and every worker pod run, then
follows each pod's log: a worker's bucket lines go to `buckets-w<i>.jsonl` (the rest of its log to
`locust-w<i>.log`), the master's summary lines become `locust.json`, `locust_stats.csv` and
`locust_failures.csv` (the rest to `locust-master.log`). `stop()` deletes the master Job — its pod gets SIGTERM,
the master tells the workers to quit and they flush their last buckets and report their last stats — waits until
the workers ended and the master's log ended (its report at quit), reads what the workers' logs hold beyond what
was followed, then deletes every object and waits until no pod is left. The summary is the master's last report (printed every second and at quit); a cluster
keeps a deleted pod's log until its process exits, the twin (whose clock runs faster than a real process
stops) may lose the one printed at quit, so there it can miss the last second. The buckets — what a drill
measures — are complete either way.
`delete_objects` is that last step alone: the journal's revert (drills/faults/load.py) after a crash.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable

from drills.core.errors import CheckFailed, InjectionFailed, RevertFailed
from drills.core.watch import EventMerger, obj_get
from drills.load.watermark import WATERMARK_KEY
from drills.load.pods import LoadPodsSpec, load_name, pod_selector, render_load_objects
from drills.load.runner import LoadResult, LoadRunner

__all__ = ["pods_of", "PodLoadRunner", "delete_objects", "SUMMARY_KEY"]

log = logging.getLogger(__name__)

SUMMARY_KEY = "drills_locust"  # drills/load/locustfile.py --report-stdout
DELETE_TIMEOUT_S = 300.0  # cluster seconds for the pods to go after the delete


class PodLoadRunner(LoadRunner):
    """One distributed locust run in `namespace`: `workers` worker pods and a master pod, from `image`."""

    def __init__(self, host: str, *, cluster, namespace: str, image: str, workers: int, pod_options: dict | None = None,
                 pod_start_timeout_s: float = 300.0, **kw: Any) -> None:
        super().__init__(host, workers=workers, **kw)
        self.cluster, self.namespace, self.image = cluster, namespace, image
        self.pod_options = dict(pod_options or {})  # node_selector, tolerations, priority_class_name, …
        self.pod_start_timeout_s = pod_start_timeout_s
        self.name = load_name(str(self.out_dir.resolve()))
        self._followers: dict[str, _Follower] = {}  # role → its pod's log
        self._summary: dict | None = None
        self._pods: dict[str, str] = {}  # role (master, w0, w1, …) → pod name
        self._launched = False

    def __repr__(self) -> str:
        return f"PodLoadRunner({self.host!r}, users={self.users}, workers={self.workers}, {self.namespace}/{self.name})"

    def spec(self) -> LoadPodsSpec:
        lo, hi = self.wait_s
        args = ("--model", self.model, "--max-tokens", str(self.max_tokens), "--prompt-words", str(self.prompt_words),
                "--chat-weight", str(self.chat_weight), "--wait-min-s", str(lo), "--wait-max-s", str(hi),
                "--bucket-s", str(self.bucket_s), "--timeout-s", f"{self.timeout_s:g}",
                "--replica-header", self.replica_header or "", "--latency-scale", f"{self.latency_scale:g}",
                *self.twin_timeout_args())
        return LoadPodsSpec(name=self.name, namespace=self.namespace, image=self.image, host=self.host,
                            workers=self.workers, users=self.users, spawn_rate=self.spawn_rate, locust_args=args,
                            run_time_s=self.run_time_limit_s, expect_workers_wait_s=self.start_timeout_s,
                            deadline_s=self.cluster.clock.cluster_seconds(self.run_time_limit_s) + 600,
                            **self.pod_options)

    def objects(self) -> dict[str, str]:
        """What the journal keeps before anything is created: enough for `delete_objects`."""
        return {"namespace": self.namespace, "name": self.name}

    def pods(self) -> dict[str, str]:
        return dict(self._pods)

    def summary(self) -> list[dict]:
        """locust's summary as the master last printed it (live: every second while it runs)."""
        return list((self._summary or {}).get("json") or [])

    def processes(self) -> list[tuple[str, int]]:
        return []  # nothing runs here

    @property
    def running(self) -> bool:
        return self._launched and self._result is None

    # ------------------------------------------------------------ lifecycle
    def _launch(self) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        self._launched = True
        spec = self.spec()
        batch = client.BatchV1Api(self.cluster.api)
        for obj in render_load_objects(spec):
            try:
                if obj["kind"] == "Service":
                    self.cluster.core.create_namespaced_service(spec.namespace, obj, _preload_content=False)
                else:
                    batch.create_namespaced_job(spec.namespace, obj, _preload_content=False)
            except ApiException as err:
                what = f"{obj['kind']} {spec.namespace}/{obj['metadata']['name']}"
                if err.status == 409:
                    raise InjectionFailed(f"{what} already exists (a leftover load? run `drills revert`)") from None
                raise InjectionFailed(f"could not create the load's {what}: {err.status} {err.reason}") from None
        self._pods = self._wait_running(spec)
        for role, pod in sorted(self._pods.items()):
            self._followers[role] = _Follower(self.cluster.core, self.namespace, pod, self._sink(role))
        self.started_at = time.time()
        log.info("load started: %s users against %s from %d worker pods (%s/%s)", self.users, self.host,
                 self.workers, self.namespace, self.name)

    def stop(self) -> LoadResult:
        """Stop the load (the master Job first, so the workers flush), read the rest, delete every object."""
        if self._result is not None:
            return self._result
        if not self._launched:
            self._result = self.result()
            return self._result
        import atexit

        atexit.unregister(self.stop)
        try:
            self._quit_master()
            self._wait_workers_ended()
            if "master" in self._followers:  # its last summary, printed as it quits (workers' final stats in)
                self._followers["master"].wait(self.stop_timeout_s)
        finally:
            for f in self._followers.values():
                f.close()
            for role, f in self._followers.items():
                if role != "master":
                    f.read_rest()
            self._write_summary()
            for fh in self._logs:
                fh.close()
            delete_objects(self.cluster, self.namespace, self.name)
        self._result = self.result()
        self._result.stopped_at = time.time()
        log.info("load stopped: %d requests, %d failed", self._result.requests, self._result.failures)
        return self._result

    def _wait_for_traffic(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if any(b.n for b in self.buckets()):
                return
            ended = [f.pod for f in self._followers.values() if f.done]
            if ended:
                raise CheckFailed(f"locust pod {ended[0]} ended before any request completed against {self.host}: "
                                  f"{self._log_tail('master')}")
            time.sleep(0.05)
        raise CheckFailed(f"no request completed against {self.host} within {self.start_timeout_s:.0f}s of starting "
                          f"the locust pods {self.namespace}/{self.name}: {self._log_tail('master')}")

    # ------------------------------------------------------------ helpers
    def _sink(self, role: str) -> Callable[[str], None]:
        log_file = open(self.out_dir / f"locust-{role}.log", "a", encoding="utf-8")  # noqa: SIM115 (closed at stop)
        self._logs.append(log_file)
        if role == "master":
            def master(line: str) -> None:
                found = _json(line)
                if found is not None and SUMMARY_KEY in found:
                    self._summary = found[SUMMARY_KEY]
                else:
                    log_file.write(line + "\n")
                    log_file.flush()
            return master
        buckets = open(self.bucket_files[int(role[1:])], "a", encoding="utf-8")  # noqa: SIM115
        self._logs.append(buckets)

        def worker(line: str) -> None:
            found = _json(line)
            out = buckets if found is not None and ("t" in found and "w" in found or WATERMARK_KEY in found) \
                else log_file
            out.write(line + "\n")
            out.flush()
        return worker

    def _wait_running(self, spec: LoadPodsSpec) -> dict[str, str]:
        deadline = self.cluster.clock.timestamp() + self.pod_start_timeout_s
        running: dict[str, str] = {}  # pod → role
        waiting: dict[str, str] = {}
        with EventMerger(self.cluster.clock) as merger:
            merger.watch("pods", self.cluster.core.list_namespaced_pod, spec.namespace,
                         label_selector=pod_selector(spec.name))
            for event in merger.events(deadline):
                if event is None or not isinstance(event.obj, dict):
                    continue
                pod, name = event.obj, obj_get(event.obj, "metadata", "name")
                phase = obj_get(pod, "status", "phase")
                if phase in ("Failed", "Succeeded") or event.type == "DELETED":
                    raise InjectionFailed(f"locust pod {spec.namespace}/{name} ended ({phase or 'deleted'}) before "
                                          "the load started")
                if phase == "Running":
                    running[name] = obj_get(pod, "metadata", "labels", "drills/load-role", default="worker")
                else:
                    conds = obj_get(pod, "status", "conditions", default=None) or []
                    waiting[name] = next((c.get("message") for c in conds if c.get("status") == "False"
                                          and c.get("message")), phase or "Pending")
                if len(running) >= spec.workers + 1:
                    break
        if len(running) < spec.workers + 1:
            why = next((w for n, w in sorted(waiting.items()) if n not in running), "no pod was created")
            raise InjectionFailed(f"only {len(running)} of {spec.workers + 1} locust pods of {spec.namespace}/"
                                  f"{spec.name} were Running within {self.pod_start_timeout_s:.0f} s: {why}")
        workers = sorted(n for n, role in running.items() if role == "worker")
        master = next(n for n, role in running.items() if role == "master")
        return {"master": master, **{f"w{i}": n for i, n in enumerate(workers)}}

    def _quit_master(self) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.BatchV1Api(self.cluster.api).delete_namespaced_job(
                f"{self.name}-master", self.namespace, propagation_policy="Foreground", grace_period_seconds=30)
        except ApiException as err:
            if err.status != 404:
                log.warning("could not delete the load's master Job: %s %s", err.status, err.reason)

    def _wait_workers_ended(self) -> None:
        """Until every worker pod ended (the master told them to quit) or the stop timeout (cluster time)."""
        clock = self.cluster.clock
        deadline = clock.timestamp() + clock.cluster_seconds(self.stop_timeout_s)
        left = {n for role, n in self._pods.items() if role != "master"}
        if not left:
            return
        with EventMerger(clock) as merger:
            merger.watch("pods", self.cluster.core.list_namespaced_pod, self.namespace,
                         label_selector=pod_selector(self.name, "worker"))
            for event in merger.events(deadline):
                if event is not None and isinstance(event.obj, dict) and (
                        event.type == "DELETED" or obj_get(event.obj, "status", "phase") in ("Succeeded", "Failed")):
                    left.discard(obj_get(event.obj, "metadata", "name"))
                if not left:
                    return
        log.warning("locust worker pod(s) %s did not end after the master quit", ", ".join(sorted(left)))

    def _write_summary(self) -> None:
        summary = self._summary
        if summary is None:
            return
        (self.out_dir / "locust.json").write_text(json.dumps(summary.get("json") or [], indent=4), encoding="utf-8")
        (self.out_dir / "locust_stats.csv").write_text(summary.get("stats_csv") or "", encoding="utf-8")
        (self.out_dir / "locust_failures.csv").write_text(summary.get("failures_csv") or "", encoding="utf-8")


def delete_objects(cluster, namespace: str, name: str, timeout_s: float = DELETE_TIMEOUT_S) -> list[str]:
    """Delete the load's Jobs, Service and any pod of it; wait until no pod is left. Idempotent. Returns what
    was deleted; RevertFailed if a pod remains."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    batch, core, deleted = client.BatchV1Api(cluster.api), cluster.core, []
    calls = [(f"Job {name}-{role}", batch.delete_namespaced_job, f"{name}-{role}") for role in ("master", "worker")]
    calls.append((f"Service {name}", core.delete_namespaced_service, name))
    calls += [(f"Pod {p}", core.delete_namespaced_pod, p) for p in pods_of(cluster, namespace, name)]
    for what, delete, obj in calls:
        try:
            delete(obj, namespace, propagation_policy="Foreground", grace_period_seconds=30)
            deleted.append(what)
        except ApiException as err:
            if err.status != 404:
                raise RevertFailed(f"could not delete the load's {what} in {namespace}: {err.status} {err.reason}; "
                                   "run `drills revert` again") from None
    deadline = cluster.clock.timestamp() + timeout_s
    if pods_of(cluster, namespace, name):
        with EventMerger(cluster.clock) as merger:
            merger.watch("pods", core.list_namespaced_pod, namespace, label_selector=pod_selector(name))
            for event in merger.events(deadline):
                if (event is None or event.type == "DELETED") and not pods_of(cluster, namespace, name):
                    break
    left = pods_of(cluster, namespace, name)
    if left:
        raise RevertFailed(f"locust pods {', '.join(left)} in {namespace} still exist {timeout_s:.0f} s after the "
                           "delete; run `drills revert` again")
    return deleted


class _Follower:
    """One pod's log, followed in a thread: every complete line to `sink`, counted (`read_rest` goes on from
    there once the follow is closed)."""

    def __init__(self, core, namespace: str, pod: str, sink: Callable[[str], None]) -> None:
        self.core, self.namespace, self.pod, self.sink = core, namespace, pod, sink
        self.lines = 0
        self.done = False
        self._resp = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"drills-load-log-{pod}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:  # noqa: BLE001 — already closed
                pass
        self._thread.join(timeout=10)

    def wait(self, timeout_s: float) -> None:
        """Until the log ends (the container exited and its pod went) or `timeout_s` wall seconds."""
        self._thread.join(timeout=timeout_s)

    def read_rest(self) -> None:
        """The lines the pod's log holds beyond those followed (the last flush before the container ended)."""
        from kubernetes.client.exceptions import ApiException

        try:
            text = self.core.read_namespaced_pod_log(self.pod, self.namespace, _preload_content=False).data
        except ApiException:
            return  # gone with its pod
        lines = text.decode("utf-8", "replace").split("\n")[:-1]  # complete lines only
        with self._lock:
            for line in lines[self.lines:]:
                self.sink(line)
            self.lines = max(self.lines, len(lines))

    def _run(self) -> None:
        try:
            self._resp = resp = self.core.read_namespaced_pod_log(self.pod, self.namespace, follow=True,
                                                                  _preload_content=False)
            if self._closed.is_set():
                return
            pending = b""
            for chunk in resp.stream(65536, decode_content=True):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                with self._lock:
                    for raw in complete:
                        if self._closed.is_set():
                            return
                        self.sink(raw.decode("utf-8", "replace"))
                        self.lines += 1
        except Exception as err:  # noqa: BLE001 — a closed or broken stream ends the follow
            if not self._closed.is_set():
                log.debug("following %s/%s ended: %s", self.namespace, self.pod, err)
        finally:
            self.done = True


def pods_of(cluster, namespace: str, name: str) -> list[str]:
    resp = cluster.core.list_namespaced_pod(namespace, label_selector=pod_selector(name), _preload_content=False)
    return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items", []))


def _json(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None

