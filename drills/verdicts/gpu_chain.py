"""Judging the links of a GPU fault's chain (drills/measure/gpu_chain.py): exported, marked, remediated.

Each link is a check of the GPU-node-loss drill with its own report category (drills/core/catalog.yaml):
`xid exported` (not_exported), `gpu marked unhealthy` (gpu_not_isolated), `node remediated` (not_remediated).
A broken link fails the drill even if the job later recovers some other way: a platform whose monitoring never
saw the fault, or that kept a broken GPU in service, did not recover from it — it got lucky. A link that never
came is that link's failure (its category), not an SLO breach: no `never_reached` here.
"""

from __future__ import annotations

import logging

from drills.measure.gpu_chain import ExporterView, Marked, NodeMarks
from drills.verdicts.timeline import Verdict, format_duration, within

__all__ = ["judge_exported", "judge_gpu_in_use", "judge_marked", "judge_remediated", "GPU_IN_USE"]

GPU_IN_USE = "faulted gpu in use"  # the chain's evidence of effect (catalog: no_effect when it is not the job's)

log = logging.getLogger(__name__)


def judge_exported(view: ExporterView, gpu: int, value: int) -> Verdict:
    """Pass iff an exporter pod runs and is Ready on the faulted node and, where its metric was read, the metric
    shows the injected value for that GPU. No exporter there fails: DCGM's record reaches no metric, no alert."""
    where = f"node {view.node} GPU {gpu}"
    if view.pod is None:
        return Verdict("xid exported", False, None, None, "",
                       f"no exporter reports the fault on {where}: {view.problem} ({view.source}), so the XID DCGM "
                       "recorded reaches no metric and no alert")
    if not view.ready:
        return Verdict("xid exported", False, None, None, "",
                       f"the exporter on {view.node} ({view.source}) is not Ready: the fault on {where} is not scraped")
    if view.value is not None and view.value != value:
        return Verdict("xid exported", False, view.value, float(value), "",
                       f"the exporter on {view.node} reports {view.value:g} for {where}, not the injected {value} "
                       f"({view.source})")
    shown = (f"reports {view.value:g} for GPU {gpu}" if view.value is not None
             else f"is Ready on the node (metric not read: {view.problem})")
    return Verdict("xid exported", True, view.value, float(value), "", f"the exporter {view.pod} {shown}")


def judge_gpu_in_use(view: ExporterView, gpu: int, namespace: str, workers: tuple[str, ...]) -> Verdict:
    """Pass iff the exporter's series of the faulted GPU names a worker of the job as the pod using it (its
    pod-resources labels): a fault on a GPU no worker uses never reached the job, so whatever the job does next
    tests nothing (inconclusive, no_effect). Not read, or an exporter that maps no GPU to a pod: inconclusive,
    naming what was not observed — the platform's word (the node runs a worker) is not that GPU's."""
    where = f"GPU {gpu} of node {view.node}"
    mine = {f"{namespace}/{w}" for w in workers}
    if view.value is None or not view.mapped:
        why = view.problem if view.value is None else "its series name no pod (the exporter's pod mapping is off)"
        return Verdict(GPU_IN_USE, False, None, None, "",
                       f"inconclusive: which pod uses {where} was not observed ({why}; {view.source}), so the fault "
                       "cannot be shown to reach the job's workers", inconclusive=True, unobserved=True)
    if view.owner in mine:
        return Verdict(GPU_IN_USE, True, None, None, "",
                       f"{where} is used by the job's worker {view.owner} (dcgm-exporter {view.source})")
    used = f"is used by {view.owner}, not a worker of the job" if view.owner else "is used by no pod"
    return Verdict(GPU_IN_USE, False, None, None, "",
                   f"inconclusive: {where} {used} (dcgm-exporter {view.source}; the job's workers there: "
                   f"{', '.join(sorted(mine)) or 'none'}): the fault never reached the job, so its recovery was not "
                   "tested", inconclusive=True)


def judge_marked(marked: Marked | None, injected_ts: float, limit_s: float, node: str, gpu: int,
                 before: NodeMarks | None = None) -> Verdict:
    """Pass iff the node showed the GPU unhealthy within `limit_s` cluster seconds of the injection — a mark new
    against `before` (what it showed before the fault). None new while the node was already marked before: whether
    this GPU was marked cannot be told (inconclusive, naming the old mark) — never the fault's mark."""
    already = before.sentence() if before is not None else ""
    if marked is None and already:
        return Verdict("gpu marked unhealthy", False, None, limit_s, "s",
                       f"node {node} already showed {already} before the XID ({before.source}) and nothing new "
                       f"within {format_duration(limit_s)}: whether GPU {gpu} was marked unhealthy cannot be told",
                       inconclusive=True, unobserved=True)
    if marked is None:
        return Verdict("gpu marked unhealthy", False, None, limit_s, "s",
                       f"GPU {gpu} of node {node} was never marked unhealthy within {format_duration(limit_s)} of the "
                       "XID DCGM reported: allocatable nvidia.com/gpu did not drop and no health taint or condition "
                       "appeared")
    took = max(0.0, marked.at.timestamp() - injected_ts)  # the node's own stamp may precede the exec's midpoint
    ok = within(took, limit_s)
    return Verdict("gpu marked unhealthy", ok, round(took, 3), limit_s, "s",
                   f"GPU {gpu} of node {node} marked unhealthy ({marked.how}) {format_duration(took)} after the XID "
                   f"({marked.source}){'' if ok else ', over the limit of ' + format_duration(limit_s)}")


def judge_remediated(cordoned: Marked | None, marked_ts: float, limit_s: float, node: str,
                     before: NodeMarks | None = None) -> Verdict:
    """Pass iff the site's remediation cordoned the node within `limit_s` cluster seconds of the GPU's mark. A node
    already out of scheduling before the fault (`before.cordoned`) says nothing of the site's remediation:
    inconclusive, naming how it was."""
    if before is not None and before.cordoned:
        return Verdict("node remediated", False, None, limit_s, "s",
                       f"node {node} was already out of scheduling before the XID ({before.cordoned}; {before.source}): "
                       "whether the site's remediation cordons a node with an unhealthy GPU cannot be told",
                       inconclusive=True, unobserved=True)
    if cordoned is None:
        return Verdict("node remediated", False, None, limit_s, "s",
                       f"node {node} with an unhealthy GPU was not cordoned by the site's remediation within "
                       f"{format_duration(limit_s)} (the profile says the site remediates: "
                       "faults.gpu_fault.remediation: site)")
    took = cordoned.at.timestamp() - marked_ts
    ok = within(took, limit_s)
    return Verdict("node remediated", ok, round(took, 3), limit_s, "s",
                   f"the site's remediation cordoned node {node} ({cordoned.how}) {format_duration(took)} after its GPU "
                   f"was marked unhealthy ({cordoned.source})")
