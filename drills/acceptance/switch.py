"""The switch port facing a new node, read over the switch sessions (drills/faults/switch) on every
dialect the drills speak (SONiC, NX-OS, EOS, Cumulus NVUE, Onyx): admin/oper state from the dialect's
own state parser, then speed, MTU and error counters, and on RoCE fabrics PFC **and** ECN, from the
dialect's `port:` views (data, parsed by drills/acceptance/port_facts.py).

Read-only: `show` commands only. The node's leaf comes from its leaf label (`faults.leaf_label`), the
port from a node annotation (`acceptance.leaf_port_annotation`); both are checked against the dialect's
grammar before a session opens. A fact the switch did not show is unknown, never healthy: the check is
`not_run`, naming what was not read.
"""

from __future__ import annotations

import logging
import re

from drills.acceptance.judge import CheckResult, not_run
from drills.acceptance.port_facts import PortFacts, read_facts, speed_gbps
from drills.core.errors import CheckFailed, DrillError
from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.parse import StateUnreadable, read_state
from drills.faults.switch.session import SwitchSession
from drills.profile.acceptance import Thresholds

__all__ = ["check_ports", "judge_port", "parse_pfc_priority"]

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
    (if given) receives each node's switch outputs, keyed (node, "switch-port", None)."""
    by_name = {s.name: s for s in inventory}
    sw_cfg = profile.switches
    out = []
    for node, (leaf, iface) in sorted(ports.items()):
        if not leaf or not iface:
            out.append(not_run(node, "switch-port", f"{node} names no leaf switch port (label {profile.faults.leaf_label}"
                               f" and annotation {profile.acceptance.leaf_port_annotation})"))
            continue
        cfg = by_name.get(leaf)
        if cfg is None:
            out.append(not_run(node, "switch-port", f"{node}'s leaf {leaf} is not in the switch inventory"))
            continue
        try:
            result, text = _one(node, cfg, iface, t, sw_cfg)
        except DrillError as err:
            out.append(not_run(node, "switch-port", f"switch {leaf} port {iface} for {node}: {err}"))
            continue
        out.append(result)
        if raw is not None and text:
            raw[(node, "switch-port", None)] = text
    return out


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
                                         ("ECN", t.roce and facts.ecn is None)) if missing]
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


def _one(node: str, cfg, iface: str, t: Thresholds, sw_cfg) -> tuple[CheckResult, str]:
    dialect = load_switch_dialect(cfg.dialect)
    values = dialect.check_interface(iface)
    where = f"{cfg.name} {iface} (facing {node})"
    views = [v for v in dialect.port if t.roce or not v.roce]
    if not views:
        return not_run(node, "switch-port", f"{where}: the {dialect.name} dialect names no port views "
                       "(speed, MTU, PFC, ECN) to read"), ""
    with SwitchSession(cfg, accept_unknown_host_keys=sw_cfg.accept_unknown_host_keys, error=CheckFailed,
                       connect_timeout=sw_cfg.connect_timeout_s, command_timeout=sw_cfg.command_timeout_s,
                       dialect=dialect) as s:
        status = s.run(dialect.command("show", iface)[0])
        answers = [s.run(dialect.line(v.command, values)) for v in views]
    text = "\n".join(f"{dialect.name}# {a.command}\n{a.output.rstrip()}" for a in [status, *answers])
    failed = [a for a in answers if not a.ok]
    if failed:
        return not_run(node, "switch-port", f"{where}: `{failed[0].command}` failed: {failed[0].words}"), text
    try:
        state = read_state(dialect, status.output, iface)
    except StateUnreadable as err:
        return not_run(node, "switch-port", f"{where}: state unreadable ({err})"), text
    facts = read_facts(views, [a.output for a in answers], iface)
    r = judge_port(node, where, state.admin, state.oper, facts, t, dialect.name)
    return r, text
