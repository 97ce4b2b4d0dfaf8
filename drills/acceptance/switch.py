"""The switch port facing a new node, read over the switch sessions (drills/faults/switch) on every
dialect the drills speak (SONiC, NX-OS, EOS, Cumulus NVUE, Onyx): admin/oper state from the dialect's
own state parser, then speed, MTU and error counters, and on RoCE fabrics PFC **and** ECN, from the
dialect's `port:` views (data, parsed by drills/acceptance/port_facts.py).

Read-only: `show` commands only. The node's leaf comes from its leaf label (`faults.leaf_label`), the
port from a node annotation (`acceptance.leaf_port_annotation`); both are checked against the dialect's
grammar before a session opens. The leaf's LLDP table must show the node on that port before the port is
judged (drills/acceptance/port_lldp.py: `wrong_port` or `not_run` otherwise). A fact the switch did not show is unknown, never healthy: the check is
`not_run`, naming what was not read.
"""

from __future__ import annotations

import logging
import re

from dataclasses import replace

from drills.acceptance import port_lldp
from drills.acceptance.judge import CheckResult, not_run
from drills.acceptance.port_facts import PortFacts, read_facts, speed_gbps
from drills.core.errors import CheckFailed, DrillError
from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.lldp import LldpUnavailable, read_lldp
from drills.faults.switch.parse import StateUnreadable, read_state
from drills.faults.switch.session import SwitchSession
from drills.profile.acceptance import Thresholds

__all__ = ["check_ports", "judge_port", "parse_pfc_priority", "read_port"]

log = logging.getLogger(__name__)

_PFC_ROW = re.compile(r"^(?P<iface>\S+)\s+(?P<prios>N/A|[\d,]+)\s*$")


def parse_pfc_priority(text: str) -> dict[str, tuple[int, ...]]:
    """SONiC `show pfc priority`: port → its lossless priorities (empty for N/A)."""
    out = {}
    for line in text.splitlines():
        m = _PFC_ROW.match(line.strip())
        if m and m["iface"] != "Interface":
            out[m["iface"]] = () if m["prios"] == "N/A" else tuple(int(p) for p in m["prios"].split(","))
    return out


def check_ports(profile, inventory, ports: dict[str, tuple[str | None, str | None]], t: Thresholds,
                raw: dict | None = None) -> list[CheckResult]:
    """One result per node: `ports` maps node → (leaf switch, leaf interface) as the node's labels say; `raw`
    (if given) receives each node's switch outputs, keyed (node, "switch-port", None). One session per leaf;
    a switch-wide view (no port in its command) is read once per session."""
    by_name = {s.name: s for s in inventory}
    out: list[CheckResult] = []
    per_leaf: dict[str, list[tuple[str, str]]] = {}
    for node, (leaf, iface) in sorted(ports.items()):
        if not leaf or not iface:
            out.append(not_run(node, "switch-port", f"{node} names no leaf switch port (label {profile.faults.leaf_label}"
                               f" and annotation {profile.acceptance.leaf_port_annotation})"))
        elif leaf not in by_name:
            out.append(not_run(node, "switch-port", f"{node}'s leaf {leaf} is not in the switch inventory"))
        else:
            per_leaf.setdefault(leaf, []).append((node, iface))
    for leaf, facing in sorted(per_leaf.items()):
        try:
            done = _leaf(by_name[leaf], facing, t, profile.switches, profile.fabric.opt_out())
        except DrillError as err:
            out += [not_run(node, "switch-port", f"switch {leaf} port {iface} for {node}: {err}") for node, iface in facing]
            continue
        for result, text in done:
            out.append(result)
            if raw is not None and text:
                raw[(result.node, "switch-port", None)] = text
    return sorted(out, key=lambda r: r.node)


def judge_port(node: str, where: str, admin: str, oper: str, facts: PortFacts, t: Thresholds,
               dialect: str) -> CheckResult:
    """The port against the thresholds: up, its speed, an MTU that carries the hosts' frames, no errors, and
    on RoCE PFC and ECN both on. Unknown facts the thresholds ask for make it `not_run`."""
    measured = {"admin": admin, "oper": oper, **facts.to_dict()}
    want_speed = speed_gbps(t.port_speed) if t.port_speed else None
    limits = {"speed_gbps": want_speed, "mtu_min": t.port_mtu, "errors_max": t.port_errors_max,
              "pfc": t.roce or None, "ecn": t.roce or None}
    if admin != "up" or oper != "up":
        return CheckResult(node, "switch-port", False, f"{where} is {admin}/{oper} (admin/oper)", measured, limits,
                           "port_down")
    unread = [what for what, missing in (("speed", want_speed is not None and facts.speed_gbps is None),
                                         ("MTU", t.port_mtu is not None and facts.mtu is None),
                                         ("PFC", t.roce and facts.pfc is None),
                                         ("ECN", t.roce and facts.ecn is None),
                                         ("error counters", not facts.errors)) if missing]
    if unread:
        return CheckResult(node, "switch-port", False, f"{where}: {', '.join(unread)} not shown by the switch "
                           f"({dialect}); unknown is not healthy", measured, limits, "not_run")
    wrong = []
    if want_speed is not None and facts.speed_gbps != want_speed:
        wrong.append(f"speed {facts.speed_gbps:g}G (expected {want_speed:g}G)")
    if t.port_mtu is not None and facts.mtu < t.port_mtu:
        wrong.append(f"MTU {facts.mtu} (expected ≥ {t.port_mtu})")
    errors = sum(facts.errors.values())
    if errors > t.port_errors_max:
        wrong.append("error counters " + ", ".join(f"{k} {v}" for k, v in facts.errors.items() if v)
                     + f" (at most {t.port_errors_max} on a new link)")
    if t.roce and not (facts.pfc and facts.ecn):
        off = " and ".join(w for w, on in (("PFC", facts.pfc), ("ECN", facts.ecn)) if not on)
        wrong.append(f"{off} off (RoCE needs PFC and ECN)")
    if wrong:
        return CheckResult(node, "switch-port", False, f"{where}: {'; '.join(wrong)}", measured, limits, "port_config")
    lossless = ""
    if t.roce:
        prios = f" on priorities {','.join(map(str, facts.pfc_priorities))}" if facts.pfc_priorities else ""
        lossless = f", PFC{prios} and ECN on"
    return CheckResult(node, "switch-port", True, f"{where}: up, {facts.speed_gbps:g}G, MTU {facts.mtu}, "
                       f"{errors} errors{lossless}", measured, limits)


def _leaf(cfg, facing: list[tuple[str, str]], t: Thresholds, sw_cfg, unverified: str | None = None
          ) -> list[tuple[CheckResult, str]]:
    """The leaf's ports facing `facing`'s nodes, each confirmed by LLDP first — unless the profile opted out
    (`unverified`: fabric.lldp unavailable), when the annotated port is judged and its result says so."""
    dialect = load_switch_dialect(cfg.dialect)
    views = [v for v in dialect.port if t.roce or not v.roce]
    values = {iface: dialect.check_interface(iface) for _, iface in facing}  # every name checked before connecting
    if not views:
        return [(not_run(node, "switch-port", f"{cfg.name} {iface} (facing {node}): the {dialect.name} dialect names "
                         "no port views (speed, MTU, PFC, ECN) to read"), "") for node, iface in facing]
    out = []
    with SwitchSession(cfg, accept_unknown_host_keys=sw_cfg.accept_unknown_host_keys, error=CheckFailed,
                       connect_timeout=sw_cfg.connect_timeout_s, command_timeout=sw_cfg.command_timeout_s,
                       dialect=dialect) as s:
        cache: dict[str, object] = {}  # switch-wide views (`show ecn`, `show roce`) once per session
        if unverified is not None:
            for node, iface in facing:
                result, text = read_port(s, node, iface, views, t, cache)
                out.append((replace(result, evidence={**result.evidence, "port_identity": unverified}), text))
            return out
        try:
            table, why = read_lldp(s), ""
        except LldpUnavailable as err:
            table, why = None, str(err)
        lldp_text = f"{dialect.name}# {table.command}\n{table.output.rstrip()}\n" if table is not None else ""
        for node, iface in facing:
            wrong = port_lldp.claim(node, cfg.name, iface, table, why)
            if wrong is not None:
                out.append((wrong, lldp_text))
                continue
            result, text = read_port(s, node, iface, views, t, cache)
            out.append((replace(result, evidence={**result.evidence, **port_lldp.evidence(table, iface)}),
                        lldp_text + text))
    return out


def read_port(s, node: str, iface: str, views, t: Thresholds, cache: dict) -> tuple[CheckResult, str]:
    """One port's state and views over an open session, judged (`cache`: the session's answers so far)."""
    dialect = s.dialect
    values = dialect.check_interface(iface)
    status = s.run(dialect.command("show", iface)[0])
    cache[status.command] = status  # SONiC's first view is its status command
    answers = []
    for v in views:
        line = dialect.line(v.command, values)
        if line not in cache:
            cache[line] = s.run(line)
        answers.append(cache[line])
    return _judge_answers(node, s.cfg.name, iface, dialect, views, status, answers, t)


def _judge_answers(node: str, switch: str, iface: str, dialect, views, status, answers, t: Thresholds
                   ) -> tuple[CheckResult, str]:
    where = f"{switch} {iface} (facing {node})"
    text = "\n".join(f"{dialect.name}# {a.command}\n{a.output.rstrip()}" for a in [status, *answers])
    failed = [a for a in answers if not a.ok]
    if failed:
        return not_run(node, "switch-port", f"{where}: `{failed[0].command}` failed: {failed[0].words}"), text
    try:
        state = read_state(dialect, status.output, iface)
    except StateUnreadable as err:
        return not_run(node, "switch-port", f"{where}: state unreadable ({err})"), text
    facts = read_facts(views, [a.output for a in answers], iface)
    return judge_port(node, where, state.admin, state.oper, facts, t, dialect.name), text
