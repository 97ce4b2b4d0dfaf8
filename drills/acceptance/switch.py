"""The switch port facing a new node, read over the switch sessions (drills/faults/switch): up, its
speed and MTU from the OS's status table, and on RoCE fabrics PFC (lossless priorities) on the port.

Read-only: `show` commands only. The node's leaf comes from its leaf label (`faults.leaf_label`), the
port from a node annotation (`acceptance.leaf_port_annotation`); both are checked against the dialect's
grammar before a session opens. An OS whose PFC view the dialect does not know cannot pass on RoCE.
"""

from __future__ import annotations

import logging
import re

from drills.acceptance.judge import CheckResult, not_run
from drills.core.errors import CheckFailed, DrillError
from drills.faults.switch.dialect import load_switch_dialect
from drills.faults.switch.parse import _own  # the project's own SONiC status template
from drills.faults.switch.session import SwitchSession
from drills.profile.acceptance import Thresholds

__all__ = ["check_ports", "parse_pfc_priority"]

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


def check_ports(profile, inventory, ports: dict[str, tuple[str | None, str | None]], t: Thresholds) -> list[CheckResult]:
    """One result per node: `ports` maps node → (leaf switch, leaf interface) as the node's labels say."""
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
            out.append(_one(node, cfg, iface, t, sw_cfg))
        except DrillError as err:
            out.append(not_run(node, "switch-port", f"switch {leaf} port {iface} for {node}: {err}"))
    return out


def _one(node: str, cfg, iface: str, t: Thresholds, sw_cfg) -> CheckResult:
    dialect = load_switch_dialect(cfg.dialect)
    dialect.check_interface(iface)
    where = f"{cfg.name} {iface} (facing {node})"
    limits = {"speed": t.port_speed, "mtu": t.port_mtu, "pfc": t.roce}
    with SwitchSession(cfg, accept_unknown_host_keys=sw_cfg.accept_unknown_host_keys, error=CheckFailed,
                       connect_timeout=sw_cfg.connect_timeout_s, command_timeout=sw_cfg.command_timeout_s,
                       dialect=dialect) as s:
        status = s.run(dialect.command("show", iface)[0])
        if dialect.name != "sonic":
            return not_run(node, "switch-port", f"{where}: reading speed, MTU and PFC is implemented for SONiC only "
                           f"({cfg.dialect})")
        rows = [r for r in _own("sonic_show_interfaces_status", status.output) if r["INTERFACE"] == iface]
        pfc_text = s.run(dialect.command("pfc", iface)[0]).output if t.roce else ""
    if not rows:
        return not_run(node, "switch-port", f"{where}: no status row ({status.words})")
    row = rows[0]
    measured = {"oper": row["OPER"], "admin": row["ADMIN"], "speed": row["SPEED"], "mtu": row["MTU"]}
    if row["OPER"] != "up" or row["ADMIN"] != "up":
        return CheckResult(node, "switch-port", False, f"{where} is {row['ADMIN']}/{row['OPER']} (admin/oper)",
                           measured, limits, "port_down")
    wrong = [f"{what} {got} (expected {want})" for what, got, want in (("speed", row["SPEED"], t.port_speed),
                                                                       ("MTU", row["MTU"], t.port_mtu))
             if want is not None and str(got) != str(want)]
    if t.roce:
        prios = parse_pfc_priority(pfc_text).get(iface)
        measured["pfc_priorities"] = list(prios) if prios is not None else None
        if not prios:
            wrong.append("PFC off (no lossless priority; RoCE needs PFC and ECN)")
    if wrong:
        return CheckResult(node, "switch-port", False, f"{where}: {'; '.join(wrong)}", measured, limits, "port_config")
    return CheckResult(node, "switch-port", True, f"{where}: up, {row['SPEED']}, MTU {row['MTU']}"
                       + (f", PFC on priorities {','.join(map(str, measured['pfc_priorities']))}" if t.roce else ""),
                       measured, limits)
