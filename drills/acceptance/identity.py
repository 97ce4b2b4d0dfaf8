"""Evidence is bound to the node it judges: a check's output counts for node N only if it came from N.

What binds it: the pod's `spec.nodeName` (the scheduler's word), the host names the tool prints itself
(nccl-tests' `Rank … on HOST`), and the hardware's own identities recorded per node in this run — the GPU
UUIDs nvidia-smi -L and gpu-burn list, the Node GUIDs ibstat prints. A pod on another node, a tool that
names another host, GPUs that are not the ones the gpu check listed, or one GPU UUID / NIC GUID seen on
two nodes make the check `wrong_node`, naming both nodes: the evidence cannot tell which node it is about.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.acceptance.judge import CheckResult

__all__ = ["bind", "cross_check", "of_node", "store_mount", "port_claims", "machine_clashes", "CHECK"]

CHECK = "identity"  # the result's check for a node whose machine identity another Node object reports too

log = logging.getLogger(__name__)


def bind(r: CheckResult, pod: dict | None) -> CheckResult:
    """Attach the pod's identity to one result; `wrong_node` when the pod ran elsewhere or the tool names
    other hosts than the node (and its peer)."""
    if pod is None:
        return r
    ran_on = (pod.get("spec") or {}).get("nodeName")
    evidence = {"pod": (pod.get("metadata") or {}).get("name"), "spec.nodeName": ran_on, **r.evidence}
    r = replace(r, evidence=evidence)
    if ran_on != r.node:
        return _wrong(r, f"the {r.check} pod for {r.node} ran on {ran_on or 'no node'} (spec.nodeName)", ran_on)
    hosts = r.measured.get("hosts")
    if hosts and r.check == "nccl-node" and set(hosts) != {r.node}:
        other = sorted(set(hosts) - {r.node})
        return _wrong(r, f"all_reduce_perf for {r.node} ran its ranks on {', '.join(sorted(hosts))}", other[0] if other else None)
    return r


def machine_clashes(shared: dict[str, dict[str, tuple[str, ...]]]) -> list[CheckResult]:
    """A `wrong_node` result per planned node whose systemUUID / machineID another Node object reports."""
    out = []
    for node, fields in sorted(shared.items()):
        words = "; ".join(f"its {key} is also {', '.join(others)}'s" for key, others in fields.items())
        other = next(iter(fields.values()))[0]
        r = CheckResult(node, CHECK, False, "", {"shared": {k: list(v) for k, v in fields.items()}}, {}, "wrong_node")
        out.append(_wrong(r, f"{words} (status.nodeInfo, as the kubelet reads the machine): two Node objects "
                             "on one machine", other))
    return out


def port_claims(r: CheckResult, others: tuple[str, ...]) -> CheckResult:
    """The switch-port result of a node whose leaf port other nodes name too: `wrong_node`, naming them."""
    if r.check != "switch-port" or not others:
        return r
    return _wrong(r, f"its leaf port is named by {', '.join(others)} too (label and annotation): the switch's "
                     "answer cannot tell which node the port faces", others[0])


def store_mount(r: CheckResult, text: str, t) -> CheckResult:
    """The storage check measured the shared store only if `df -PT` shows the store's filesystem at the
    path fio wrote to: none shown is `not_run`; the node's own disk (or a type the profile does not list)
    is `wrong_target` — fio then measured a local disk, not the store."""
    from drills.acceptance.judge import tool_sections
    from drills.measure.accept.df import LOCAL_TYPES, parse_df

    if r.check != "storage" or not r.go:
        return r
    mounts = parse_df(tool_sections(text).get("df", ""))
    if not mounts:
        return replace(r, go=False, failure="not_run", reason=f"storage on {r.node}: the store's mount is not shown "
                       "(`df -PT` of the directory fio wrote to): the figures may be any disk's")
    m = mounts[-1]
    r = replace(r, evidence={**r.evidence, "store": f"{m.source} ({m.fstype}) at {m.mountpoint}"})
    wrong = (t.store_fs_types is not None and m.fstype not in t.store_fs_types) or (
        t.store_fs_types is None and m.fstype in LOCAL_TYPES)
    if wrong:
        return replace(r, go=False, failure="wrong_target",
                       reason=f"storage on {r.node}: fio wrote to {m.source}, a {m.fstype} filesystem at {m.mountpoint}"
                              + (f" (the store is {', '.join(t.store_fs_types)})" if t.store_fs_types else
                                 " on the node itself") + ": it measured the node's disk, not the shared store")
    return r


def of_node(results: list[CheckResult], node: str) -> dict[str, list[str]]:
    """The hardware identities `node`'s checks reported (what an accepted node's annotation records)."""
    gpus = sorted({u for r in results if r.node == node and r.check == "gpu" for u in r.measured.get("gpu_uuids") or ()})
    nics = sorted({g for r in results if r.node == node and r.check == "rdma"
                   for g in (r.measured.get("nic_guids") or {}).values()})
    return {"gpus": gpus, "nics": nics}


def cross_check(results: list[CheckResult], known: dict[str, dict] | None = None) -> list[CheckResult]:
    """The run's results with every identity conflict made a `wrong_node` no-go: a GPU UUID or NIC GUID
    reported by two nodes of this run (both named on both) or recorded by an accepted node (`known`: node →
    its accepted identity), or gpu-burn's GPUs not the gpu check's GPUs of that node."""
    seen: dict[tuple[str, str], set[str]] = {}  # (kind, id) → nodes that reported it
    for other, ident in (known or {}).items():
        for uuid in ident.get("gpus") or ():
            seen.setdefault(("GPU", uuid), set()).add(other)
        for guid in ident.get("nics") or ():
            seen.setdefault(("NIC", guid), set()).add(other)
    listed: dict[str, set[str]] = {}  # node → the gpu check's UUIDs
    for r in results:
        if r.peer is not None:
            continue
        for uuid in r.measured.get("gpu_uuids") or ():
            seen.setdefault(("GPU", uuid), set()).add(r.node)
        for guid in (r.measured.get("nic_guids") or {}).values():
            seen.setdefault(("NIC", guid), set()).add(r.node)
        if r.check == "gpu":
            listed[r.node] = set(r.measured.get("gpu_uuids") or ())
    shared = {key: nodes for key, nodes in seen.items() if len(nodes) > 1}
    out = []
    for r in results:
        mine = [(kind, ident, sorted(nodes - {r.node})) for (kind, ident), nodes in shared.items() if r.node in nodes
                and (ident in (r.measured.get("gpu_uuids") or ()) or ident in (r.measured.get("nic_guids") or {}).values())]
        if mine and r.peer is None:
            kind, ident, others = mine[0]
            r = _wrong(r, f"{kind} {ident} reported by {r.node} is also reported by {', '.join(others)} "
                          f"({len(mine)} shared identit{'y' if len(mine) == 1 else 'ies'})", others[0])
        elif r.check == "burn" and r.node in listed and r.go:
            foreign = sorted(set(r.measured.get("gpu_uuids") or ()) - listed[r.node])
            if foreign:
                r = _wrong(r, f"gpu-burn on {r.node} burned GPU {foreign[0]}, which nvidia-smi -L on {r.node} did "
                              "not list", None)
        elif r.check == "dcgm" and r.node in listed and r.go:
            r = _dcgm_gpus(r, listed)
        out.append(r)
    return out


def _dcgm_gpus(r: CheckResult, listed: dict[str, set[str]]) -> CheckResult:
    """DCGM's results are this node's only if its host engine listed the GPUs nvidia-smi -L listed on the node
    (`dcgmi discovery -l` in the diagnostic's Job, drills/acceptance/dcgm_gpus.py); else `wrong_node`, naming
    the node of this run whose GPUs they are, when one is."""
    got, mine = set(r.measured.get("dcgm_gpu_uuids") or ()), listed[r.node]
    if got == mine:
        return replace(r, evidence={**r.evidence, "dcgm_gpus": f"the {len(got)} GPUs nvidia-smi -L listed on {r.node}"})
    foreign = sorted(got - mine)
    owner = next((n for n, uuids in sorted(listed.items()) if n != r.node and foreign and foreign[0] in uuids), None)
    whose = f" ({owner}'s, by nvidia-smi -L on {owner})" if owner else ""
    if not foreign:  # the node's own GPUs, fewer of them: the diagnostic left some out
        missing = sorted(mine - got)
        return replace(r, go=False, failure="partial", reason=f"DCGM on {r.node}: its host engine lists {len(got)} of "
                       f"the {len(mine)} GPUs nvidia-smi -L listed (not {', '.join(missing)}): the diagnostic did not "
                       "cover them")
    return _wrong(r, f"the DCGM diagnostic for {r.node} ran on other GPUs than the node's (`dcgmi discovery -l`): its "
                     f"host engine lists GPU {foreign[0]}{whose}, which nvidia-smi -L on {r.node} did not list", owner)


def _wrong(r: CheckResult, why: str, other: str | None) -> CheckResult:
    reason = f"evidence not from {r.node}: {why}" + (f" — {r.node} and {other} cannot be told apart" if other else "")
    evidence = {**r.evidence, "other_node": other}
    return replace(r, go=False, failure="wrong_node", reason=reason, evidence=evidence)
