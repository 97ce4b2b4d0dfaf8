"""What the acceptance runbook's steps call (features/acceptance/, fixtures/acceptance.py): one acceptance
run's checks, each one step of the runbook, over the planned nodes.

`AcceptChecks` holds a run's cluster, profile, plan and result, and does each step once whatever number of
Examples rows ask for it (every node's row of a check's Scenario Outline reads the one phase that ran the
check's Jobs on every new node at once: each check wants the nodes' GPUs to itself, and the nodes run it
side by side). The batch-wide steps come in a fixed order — the identity cross-check, then the policy's
required checks, then the shared store's aggregate, then each passing node read again (freshness: it must
still be the node its checks judged; a node not Ready or under pressure when planned ran no Job at all and is a
`node_unhealthy` no-go) — and `finish()` runs whichever of them the runbook did not, so a
runbook that lost a scenario loses no guarantee: a required check without a result is still a `not_run`
no-go, the same UUID on two nodes still `wrong_node`. The gate reads each node once more before it lifts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from drills.acceptance import coverage, dcgm_gpus, exits, freshness, identity, plausible, policy, unread
from drills.acceptance.judge import CheckResult, judge, not_run
from drills.acceptance.jobs import CHECK_LABEL, NODE_LABEL, PEER_LABEL, render_job
from drills.acceptance.plan import AcceptPlan, reference_now
from drills.core.errors import DrillError
from drills.core.kube import EventMerger, obj_get
from drills.faults.accept_jobs import selector

__all__ = ["AcceptChecks", "JOB_PHASES", "BATCH_STEPS", "AGGREGATE"]

log = logging.getLogger(__name__)

JOB_PHASES = ("gpu", "dcgm", "burn", "nccl-node", "rdma", "nccl-pair", "storage")
BATCH_STEPS = ("identity", "required", "aggregate", "fresh")  # after every check, in this order
AGGREGATE = "store-aggregate"  # the result's check for the batch's shared-store aggregate, on each of its nodes


@dataclass
class AcceptChecks:
    cluster: Any
    profile: Any
    plan: AcceptPlan
    run_id: str
    twin_info: dict | None
    result: Any  # drills.acceptance.run.AcceptResult: results, pairs, raw outputs, aggregate
    progress: Callable[[str], None] = lambda line: None
    done: list[str] = field(default_factory=list)  # the checks and batch steps that ran, in order

    def planned(self, check: str) -> bool:
        """Whether the profile's acceptance.checks asks for `check` (a required one left out is `not_run`)."""
        return check in self.plan.checks

    def run(self, check: str) -> None:
        """The check on every new node (once); a batch step once the checks are judged."""
        if check in self.done:
            return
        if check in BATCH_STEPS:
            for step in BATCH_STEPS[:BATCH_STEPS.index(check)]:  # the order the verdicts depend on
                self.run(step)
        elif any(step in self.done for step in BATCH_STEPS):
            raise DrillError(f"the runbook asks for the {check} check after the batch's verdicts were settled "
                             f"({', '.join(s for s in BATCH_STEPS if s in self.done)}): list every check first")
        self.done.append(check)
        {"switch-port": self._ports, "identity": self._identity, "required": self._required,
         "aggregate": self._aggregate, "fresh": self._fresh}.get(check, lambda: self._phase(check))()

    def finish(self) -> None:
        """The batch steps the runbook did not run (a scenario deselected or removed): never skipped."""
        for step in BATCH_STEPS:
            self.run(step)

    def outcome(self, node: str, check: str) -> CheckResult | None:
        """The result that decides `node`'s `check` (pairs of the new ↔ new ring only draw the heat map)."""
        return next((r for r in self.result.results if r.node == node and r.check == check), None)

    def blocking(self, node: str) -> list[CheckResult]:
        """`node`'s failed checks that no waiver covers (empty: GO)."""
        return self.result.node_verdicts().get(node) or []

    def _phase(self, check: str) -> None:
        if check not in JOB_PHASES:
            raise DrillError(f"the runbook asks for an unknown acceptance check {check!r} (known: "
                             f"{', '.join(JOB_PHASES)}, switch-port)")
        if not self.planned(check):
            return
        plan, cfg = self.plan, self.profile.acceptance
        sick = freshness.ailing_when_planned(plan, self.profile)  # not Ready / under pressure when planned: no Jobs
        self.result.results += [not_run(n, check, f"not run: {n} was not healthy when the run planned it "
                                        f"({'; '.join(why)})", plan.reference if check == "nccl-pair" else None)
                                for n, why in sick.items()]
        nodes = [n for n in plan.nodes if n not in sick]
        rounds = [[(n, plan.reference) for n in nodes]] if check == "nccl-pair" else [[(n, None) for n in nodes]]
        if check == "nccl-pair" and len(nodes) > 1:  # the heat map's new ↔ new cells: a ring over the batch
            ring = [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]
            rounds.append(ring if len(nodes) > 2 else ring[:1])
        for k, pairs in enumerate(rounds):
            if not pairs:
                continue
            # fit when planned is not fit now
            problem = (reference_now(self.cluster, plan, self.profile.faults.leaf_label, cfg.pair_across_leaves,
                                     cfg.healthy_conditions) if check == "nccl-pair" and k == 0 else None)
            if check == "nccl-pair" and k == 0 and (plan.reference is None or problem):
                why = (f"the reference node cannot prove the path: {problem}" if plan.reference
                       else "no known-good node to pair with (acceptance.reference_node)")
                self.result.results += [not_run(n, check, why, plan.reference) for n, _ in pairs]
                continue
            self.progress(f"{check}: {len(pairs)} Job(s)" + (" (new ↔ new ring)" if k == 1 else ""))
            for (node, peer), (text, why, pod) in self._jobs(check, pairs).items():
                if text is None:
                    r = not_run(node, check, why, peer)
                else:
                    self.result.raw[(node, check, peer)] = text
                    r = judge(check, node, text, cfg.thresholds, capacity=plan.capacity.get(node, 0),
                              expect=plan.expect.get(node), peer=peer, need=cfg.required.get(check))
                    r = dcgm_gpus.record(r, text)  # dcgmi discovery's UUIDs: the GPUs the diag ran on
                    r = unread.check(r, text)  # an error line the judge's reader does not know: no GO
                    r = plausible.check(identity.bind(r, pod), plan.expect.get(node), plan.expect.get(peer or ""))
                    r = identity.store_mount(coverage.check(r, plan.expect.get(node)), text, cfg.thresholds)
                    r = exits.check(r, pod)
                    if check == "nccl-pair" and k == 0 and not cfg.pair_across_leaves and r.go:
                        # the site's opt-out: said wherever the GO is read, never hidden (red team, wave 8)
                        r = replace(r, reason=f"{r.reason} (acceptance.pair_across_leaves is false: the pair need not "
                                              f"cross the spine, and the spine's path was not tested)")
                (self.result.pairs if k == 1 else self.result.results).append(r)

    def _ports(self) -> None:
        if not self.planned("switch-port"):
            return
        from drills.acceptance.switch import check_ports
        from drills.faults.switch.target import switch_inventory

        self.progress("switch-port: the leaf ports facing the nodes")
        try:
            inventory = switch_inventory(self.profile, self.twin_info)
        except DrillError as err:
            self.result.results += [not_run(n, "switch-port", str(err)) for n in self.plan.nodes]
        else:
            t = self.profile.acceptance.thresholds
            # on a rail-optimised fabric (the inventory names each leaf's rails), a node whose rdma check read its
            # NICs (ibstat's RoCE port GUIDs) has each NIC's port judged, found by LLDP (drills/acceptance/rail_ports.py);
            # the others, the port their annotation names
            railed = any(getattr(c, "rails", None) for c in inventory) and self.profile.fabric.opt_out() is None
            nics = {n: (self.plan.ports.get(n, (None, None))[0], macs) for n in self.plan.nodes
                    if railed and (macs := next((r.measured.get("nic_macs") for r in self.result.results
                                                 if r.node == n and r.check == "rdma" and r.peer is None), None))}
            if nics:
                from drills.acceptance.rail_ports import check_nic_ports

                self.result.results += check_nic_ports(self.profile, inventory, nics, t, self.result.raw,
                                                       annotated=self.plan.ports)
            rest = {n: p for n, p in self.plan.ports.items() if n not in nics}
            self.result.results += [identity.port_claims(r, self.plan.port_shared.get(r.node, ())) for r in check_ports(
                self.profile, inventory, rest, t, self.result.raw)] if rest else []

    def _identity(self) -> None:
        self.result.results = identity.cross_check(self.result.results, self.plan.known)
        self.result.results += identity.machine_clashes(self.plan.machine_shared)

    def _required(self) -> None:
        cfg = self.profile.acceptance
        self.result.results += policy.missing_required(cfg, self.plan.nodes, self.result.results)
        self.result.results += policy.no_evidence(cfg, self.plan.nodes, self.result.results)

    def _fresh(self) -> None:
        """A node not healthy when planned is a `node_unhealthy` no-go (its checks did not run); every node that
        would pass, read again: one that changed since the plan is a `changed` no-go."""
        sick = freshness.ailing_when_planned(self.plan, self.profile)
        self.result.results += [freshness.planned_unhealthy(n, self.plan.state[n], why) for n, why in sick.items()]
        self.result.results += [r for n in self.plan.nodes if not self.blocking(n)
                                and (r := freshness.recheck(self.cluster, self.profile, self.plan, n)) is not None]

    def _aggregate(self) -> None:
        t = self.profile.acceptance.thresholds
        if "storage" in self.plan.checks and t.store_aggregate_read_mb_s_min is not None:
            # only readings of the store count: a node that measured its own disk (wrong_target), someone else's
            # (wrong_node), or a figure above physics does not add to what the store served the batch
            total = sum(r.measured.get("read_mb_s", 0.0) for r in self.result.results
                        if r.check == "storage" and (r.go or r.failure == "slow"))
            self.result.aggregate = {"read_mb_s": round(total, 1), "min_mb_s": t.store_aggregate_read_mb_s_min,
                                     "go": total >= t.store_aggregate_read_mb_s_min}
            if not self.result.aggregate["go"]:  # the batch's no-go is each of its nodes' (else the gate lets them in)
                self.result.results += [CheckResult(
                    n, AGGREGATE, False, f"the {len(self.plan.nodes)} new nodes together read {total:.0f} MB/s from "
                    f"the shared store, below {t.store_aggregate_read_mb_s_min:.0f} "
                    "(acceptance.thresholds.store_aggregate_read_mb_s_min): the store cannot serve the batch it would "
                    "admit", {"read_mb_s": round(total, 1)}, {"read_mb_s_min": t.store_aggregate_read_mb_s_min}, "slow")
                    for n in self.plan.nodes]

    def _jobs(self, check: str, pairs: list[tuple[str, str | None]]
              ) -> dict[tuple[str, str | None], tuple[str | None, str, dict | None]]:
        """Create the phase's Jobs, wait until each pod ended (or the deadline), return each one's log and pod."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        cluster, cfg, plan = self.cluster, self.profile.acceptance, self.plan
        batch = client.BatchV1Api(cluster.api)
        ns = cfg.namespace
        t = cfg.thresholds
        for node, peer in pairs:
            env = {"ACCEPT_LEVEL": str(t.dcgm_level), "ACCEPT_SECONDS": str(t.burn_seconds),
                   "ACCEPT_GPUS": str(plan.capacity.get(node, 0)), "ACCEPT_RAILS": " ".join(plan.rails.get(node, ())),
                   "ACCEPT_DIR": "/store"}
            if peer:
                env.update(ACCEPT_PEER=peer, ACCEPT_HOSTS=f"{plan.ips.get(node, node)},{plan.ips.get(peer, peer)}",
                           ACCEPT_RANKS="2")
            elif check == "rdma" and plan.reference:
                env["ACCEPT_PEER"] = plan.ips.get(plan.reference, plan.reference)
            body = render_job(cfg, self.run_id, check, node, gpus=plan.capacity.get(node, 0), env=env, peer=peer)
            try:
                batch.create_namespaced_job(ns, body)
            except ApiException as err:
                raise DrillError(f"could not create the {check} Job for {node}: {err.status} {err.reason}") from None
        sel = f"{selector(self.run_id)},{CHECK_LABEL}={check}"
        deadline = cluster.clock.timestamp() + cfg.job(check).timeout_s
        want = {(n, p) for n, p in pairs}
        ended: dict[tuple[str, str | None], dict] = {}
        with EventMerger(cluster.clock) as merger:
            merger.watch("pods", cluster.core.list_namespaced_pod, ns, label_selector=sel)
            for event in merger.events(deadline):
                if event is None or event.obj is None or not isinstance(event.obj, dict):
                    continue
                pod = event.obj
                labels = obj_get(pod, "metadata", "labels", default=None) or {}
                key = (labels.get(NODE_LABEL), labels.get(PEER_LABEL))
                if key in want and obj_get(pod, "status", "phase") in ("Succeeded", "Failed"):
                    ended[key] = pod
                if len(ended) == len(want):
                    break
        out: dict[tuple[str, str | None], tuple[str | None, str, dict | None]] = {}
        for key in sorted(want, key=lambda k: (k[0], k[1] or "")):
            pod = ended.get(key)
            if pod is None:
                out[key] = (None, f"the {check} Job on {key[0]} did not finish within {cfg.job(check).timeout_s:.0f} s",
                            None)
                continue
            try:
                text = cluster.core.read_namespaced_pod_log(pod["metadata"]["name"], ns)
            except ApiException as err:
                out[key] = (None, f"the {check} Job's log on {key[0]} is unreadable: {err.status} {err.reason}", pod)
                continue
            out[key] = (text, "", pod)
        return out
