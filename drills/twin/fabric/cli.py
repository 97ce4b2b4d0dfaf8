"""The switch CLI engine: runs one line of a dialect against the fabric, pure of any socket.

`SwitchCli` is one switch (its dialect, its fabric, pending changes shared by its sessions);
`CliSession` is one login with its mode (exec / config / interface) and prompt. The SSH server
feeds it lines; unit tests feed it strings.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from drills.twin.fabric.dialects import CommandRule, Dialect, load_dialect, render_table
from drills.twin.fabric.lldp import rows as lldp_rows
from drills.twin.fabric.topology import Fabric

__all__ = ["CliResult", "SwitchCli", "CliSession"]

log = logging.getLogger(__name__)

_CHANGING = frozenset({"shutdown", "startup", "set_link", "commit"})  # the actions that change a port


@dataclass(frozen=True)
class CliResult:
    """What one command printed (no trailing newline), its exit status, and whether it logged out."""

    output: str = ""
    exit_status: int = 0
    logout: bool = False


class SwitchCli:
    """One switch's CLI; thread-safe (each SSH session runs in its own thread)."""

    def __init__(self, fabric: Fabric, switch: str, dialect: Dialect | str,
                 hostname: str | None = None, username: str | None = None, rejects_shutdown: bool = False,
                 traffic: Any | None = None, lossy: set[str] | frozenset = frozenset(), answer_after_s: float = 0.0,
                 apply_after_s: float = 0.0,
                 neighbours: dict | None = None, lldp_off: bool = False) -> None:
        self.fabric = fabric
        self.lossy = frozenset(lossy)  # ports without PFC/ECN (RoCE lossless config missing)
        self.switch = switch
        self.dialect = load_dialect(dialect) if isinstance(dialect, str) else dialect
        self.hostname = hostname or switch
        self.username = username or self.dialect.username
        self._lock = threading.Lock()
        self._pending: dict[str, bool] = {}
        self._rev = 1
        self.rejects_shutdown = rejects_shutdown  # defect cli-rejects-shutdown: the OS's own refusal
        # defect slow-cli-answer: a line that changed a port is answered this many cluster seconds after the change
        # (a busy supervisor, a config daemon that writes its database first): the change comes early in the exchange
        self.answer_after_s = answer_after_s
        # defect slow-cli-apply: a line that changes a port is acted on this many cluster seconds after it arrives,
        # then answered (a switch busy before it acts): the change comes late in the exchange
        self.apply_after_s = apply_after_s
        self.traffic = traffic  # drills.twin.fabric.traffic.Traffic: the ports' counters (None: all zero)
        self._log: list[str] = []
        self.neighbours = neighbours or {}  # port → drills.twin.fabric.lldp.Peer: the cabling's truth, for LLDP
        self.lldp_off = lldp_off  # defect lldp-disabled: the switch runs no LLDP

    def record(self, line: str) -> None:
        """Every command line a client sent (exec requests and shell lines): tests read it back."""
        with self._lock:
            self._log.append(line)

    def command_log(self) -> list[str]:
        with self._lock:
            return list(self._log)

    def session(self) -> "CliSession":
        return CliSession(self)

    def run(self, command: str) -> CliResult:
        """An SSH exec request: the command line (several joined by the dialect's separators)
        runs in a fresh session; it stops at the first error, whose status is the exit status."""
        session = self.session()
        session.mode = self.dialect.exec_request_mode
        outputs: list[str] = []
        status = 0
        for part in session.cli.dialect.separator_re.split(command.strip()):
            if not part or not part.strip():
                continue
            res = session.execute(part)
            if res.output:
                outputs.append(res.output)
            status = res.exit_status
            if status != 0 or res.logout:
                break
        return CliResult("\n".join(outputs), status)

    # -- staged changes (dialects with `staging: true`, e.g. NVUE) ---------------------------
    def stage(self, iface: str, up: bool) -> None:
        with self._lock:
            self._pending[iface] = up

    def pending(self) -> dict[str, bool]:
        with self._lock:
            return dict(self._pending)

    def commit(self) -> int | None:
        """Apply pending changes to the fabric; the new revision id, or None when nothing was pending."""
        with self._lock:
            changes, self._pending = self._pending, {}
            if not changes:
                return None
            self._rev += 1
            rev = self._rev
        for iface, up in changes.items():
            self.fabric.set_admin(self.switch, iface, up, source=f"ssh:{self.dialect.name}")
        return rev

    def discard(self) -> None:
        with self._lock:
            self._pending.clear()

    def switch_context(self) -> dict[str, Any]:
        """Template values of switch-wide views (Onyx `show roce`): lossless unless a port runs lossy."""
        return {**self.dialect.constants, "hostname": self.hostname, **self._lossless(bool(self.lossy))}

    @staticmethod
    def _lossless(lossy: bool) -> dict[str, str]:
        """The RoCE words each dialect prints for a port with (or without) PFC and ECN."""
        eos = ("" if lossy else "\n   priority-flow-control on\n   priority-flow-control priority 3 no-drop\n   !\n"
               "   tx-queue 3\n      random-detect ecn minimum-threshold 500 kbytes maximum-threshold 1500 kbytes "
               "max-mark-probability 20")
        return {"nxos_pfc_oper": "Off" if lossy else "On  (8)", "eos_roce_lines": eos,
                "nvue_pfc_prio": "-" if lossy else "3", "nvue_ecn_mode": "-" if lossy else "ecn, absolute",
                "nvue_pfc_en": "no" if lossy else "yes", "roce_mode": "lossy" if lossy else "lossless",
                "onyx_roce": "RoCE mode: N/A" if lossy else _ONYX_ROCE}

    def context(self, iface: str) -> dict[str, Any]:
        """Template values for one interface (status tables, detail views)."""
        d = self.dialect
        st = self.fabric.iface_state(self.switch, iface)
        index = self.fabric.interfaces(self.switch).index(iface)
        words = d.status_words
        status = words["disabled"] if not st.admin else (words["connected"] if st.oper else words["notconnect"])
        pending = self.pending().get(iface, st.admin)
        ctx: dict[str, Any] = dict(d.constants)
        ctx.update(
            iface=iface,
            short=d.short_iface(iface),
            i=index,
            n=index + 1,
            lanes=",".join(str(index * d.lanes_per_port + k) for k in range(d.lanes_per_port)),
            admin=_updown(st.admin),
            oper=_updown(st.oper),
            oper_word=_updown(st.oper),
            admin_reason=" (Administratively down)" if not st.admin else "",
            status=status,
            pending=_updown(pending),
            peer_switch=st.peer[0] if st.peer else "",
            peer_iface=st.peer[1] if st.peer else "",
            description=f"{st.peer[0]} {st.peer[1]}" if st.peer else "--",
            hostname=self.hostname,
            eos_link="administratively down" if not st.admin else ("up" if st.oper else "down"),
            onyx_admin="Enabled" if st.admin else "Disabled",
            onyx_oper="Up" if st.oper else "Down",
            portstat_state="X" if not st.admin else ("U" if st.oper else "D"),
            pfc_priorities="N/A" if iface in self.lossy else "3,4",
            **self._lossless(iface in self.lossy),
        )
        ctx.update(_counter_values(self.traffic.counters(self.switch, iface) if self.traffic is not None else None))
        return ctx


# Onyx `show roce` with RoCE lossless (the Onyx 3.10 manual's example, up to the TC table)
_ONYX_ROCE = """RoCE mode : lossless
LLDP : disabled
Port trust mode: L3

Application TLV:
Selector: udp
Protocol: 4791
Priority: 3

Port congestion-control:
Mode: ecn, absolute
Min : 150
Max : 1500

PFC : enabled
switch-priority 3: enabled"""


class CliSession:
    """One login: mode, current interface, prompt."""

    def __init__(self, cli: SwitchCli) -> None:
        self.cli = cli
        self.mode = "exec"
        self.iface: str | None = None

    @property
    def prompt(self) -> str:
        return self.cli.dialect.prompt(self.mode, self.cli.hostname, self.cli.username, self.iface or "")

    def execute(self, line: str, interactive: bool = False) -> CliResult:
        """Run one command line; `interactive` aligns error carets under the echoed prompt."""
        d = self.cli.dialect
        line = line.strip()
        if not line:
            return CliResult()
        offset = len(self.prompt) if interactive else 0
        for pattern, rule in d.compiled:
            modes = rule.modes()
            if modes is not None and self.mode not in modes:
                continue
            m = pattern.fullmatch(line)
            if m:
                changes = self.cli.fabric.changes
                if self.cli.apply_after_s and rule.action in _CHANGING:
                    self.cli.fabric.pause(self.cli.apply_after_s)
                res = self._dispatch(rule, m, line, offset)
                if self.cli.answer_after_s and self.cli.fabric.changes != changes:
                    self.cli.fabric.pause(self.cli.answer_after_s)
                return res
        return self._unknown(line, offset)

    # -- helpers -----------------------------------------------------------------------------
    def _dispatch(self, rule: CommandRule, m: re.Match, line: str, offset: int) -> CliResult:
        d, cli = self.cli.dialect, self.cli
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        iface = None
        if "iface" in groups:
            raw = groups["iface"]
            iface = d.canonical_iface(raw)
            pos = m.start("iface")
            if iface is None or not cli.fabric.has_iface(cli.switch, iface):
                key = rule.iface_error or "unknown_interface"
                if iface is None and d.malformed_iface_error != "unknown_interface":
                    key = d.malformed_iface_error
                verb = rule.action if rule.action in ("shutdown", "startup") else "shutdown"
                return self._error(key, line, offset, caret_at=pos, **{"verb": verb, **groups})
        act = rule.action
        if act == "show_status":
            names = [iface] if iface else cli.fabric.interfaces(cli.switch)
            return CliResult(render_table(d.status_table, [cli.context(n) for n in names]))
        if act == "show_detail":
            ctx = cli.context(iface) if iface is not None else cli.switch_context()
            return CliResult(d.details[rule.detail].format(**ctx).rstrip())
        if act == "show_rows":  # a header (`output:`), then the `detail:` row of each interface
            names = [iface] if iface else cli.fabric.interfaces(cli.switch)
            rows = [d.details[rule.detail].format(**cli.context(n)).rstrip() for n in names]
            return CliResult("\n".join([rule.output.rstrip("\n"), *rows]))
        if act == "show_lldp":  # the neighbour table from the cabling's truth (drills/twin/fabric/lldp.py)
            if cli.lldp_off and "lldp_disabled" in d.errors:
                return self._error("lldp_disabled", line, offset, caret_at=0, **groups)
            found = [] if cli.lldp_off else lldp_rows(cli, rule.detail)
            end = d.details.get(f"{rule.detail}_end")
            return CliResult("\n".join([*([rule.output.rstrip("\n")] if rule.output else []), *found,
                                        *([end.format(count=len(found))] if end else [])]))
        if act in ("shutdown", "startup", "set_link"):
            target = iface or self.iface
            if target is None:
                return self._error("unknown_command", line, offset, caret_at=0, **groups)
            up = act == "startup" or (act == "set_link" and groups.get("state") == "up")
            if not up and cli.rejects_shutdown and not d.staging:
                return self._error("shutdown_rejected", line, offset, caret_at=0, **groups)
            if d.staging:
                cli.stage(target, up)
            else:
                cli.fabric.set_admin(cli.switch, target, up, source=f"ssh:{d.name}")
            return CliResult()
        if act == "enter_mode":
            if rule.to == "interface":
                if iface is None:
                    return self._error("incomplete_command", line, offset, caret_at=len(line))
                self.iface = iface
            self.mode = rule.to
            return CliResult()
        top = "enable" if "enable" in d.prompts else "exec"
        if act == "exit":
            if self.mode in ("exec", "enable"):
                return CliResult(logout=True)
            self.mode, self.iface = ("config", None) if self.mode == "interface" else (top, None)
            return CliResult()
        if act == "end":
            self.mode, self.iface = top, None
            return CliResult()
        if act == "logout":
            return CliResult(logout=True)
        if act == "commit":
            if cli.rejects_shutdown and False in cli.pending().values():
                cli.discard()
                return self._error("shutdown_rejected", line, offset, caret_at=0, **groups)
            rev = cli.commit()
            if rev is None:
                return CliResult(d.outputs.get("commit_nothing", ""))
            return CliResult(d.outputs.get("commit", "").format(rev=rev))
        if act == "discard":
            cli.discard()
            return CliResult()
        if act == "show_pending":
            return CliResult(_pending_yaml(cli.pending()))
        if act == "text":
            return CliResult(rule.output)
        if act == "noop":
            return CliResult()
        return self._error(rule.error or "unknown_command", line, offset, caret_at=0, **groups)

    def _unknown(self, line: str, offset: int) -> CliResult:
        """No rule matched: find how far the grammar of this mode accepts the words, point there."""
        tokens = _tokens(line, self.cli.dialect)
        best = 0
        for words, rule in self.cli.dialect.word_rules:
            modes = rule.modes()
            if modes is not None and self.mode not in modes:
                continue
            k = 0
            while k < min(len(words), len(tokens)) and words[k].fullmatch(tokens[k][1]):
                k += 1
            best = max(best, k)
        if best >= len(tokens) and "incomplete_command" in self.cli.dialect.errors:
            return self._error("incomplete_command", line, offset, caret_at=len(line))
        pos = tokens[min(best, len(tokens) - 1)][0]
        return self._error("unknown_command", line, offset, caret_at=pos)

    def _error(self, key: str, line: str, offset: int, caret_at: int, **values: Any) -> CliResult:
        err = self.cli.dialect.errors.get(key) or self.cli.dialect.errors["unknown_command"]
        ctx = {"word": line.split()[0], "iface": "", "verb": "shutdown", "line": line,
               "hostname": self.cli.hostname, "user": self.cli.username}
        ctx.update(values)
        ctx["caret"] = " " * (offset + caret_at) + "^"
        return CliResult(err.text.format(**ctx), err.exit)


def _tokens(line: str, dialect: Dialect) -> list[tuple[int, str]]:
    """Words with their offsets; `ethernet 1/1` stays one word when it names an interface."""
    raw = [(m.start(), m.group()) for m in re.finditer(r"\S+", line)]
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(raw):
        if i + 1 < len(raw) and raw[i + 1][1][:1].isdigit() and dialect.canonical_iface(f"{raw[i][1]} {raw[i + 1][1]}"):
            out.append((raw[i][0], f"{raw[i][1]} {raw[i + 1][1]}"))
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return out


def _counter_values(c: Any | None) -> dict[str, Any]:
    """Counter fields as the dialects print them: totals, rates, and SONiC's comma-grouped / unit forms."""
    zero = c is None
    vals = {k: 0 if zero else getattr(c, k) for k in ("in_packets", "out_packets", "in_bytes", "out_bytes")}
    rates = {k: 0.0 if zero else getattr(c, k) for k in ("in_bps", "out_bps", "in_pps", "out_pps")}
    out: dict[str, Any] = {**vals, **{k: int(round(v)) for k, v in rates.items()}}
    for k in vals:
        out[f"{k}_grouped"] = f"{vals[k]:,}"
    for side in ("in", "out"):
        bps = rates[f"{side}_bps"]
        out[f"{side}_rate_bytes"] = int(round(bps / 8))
        out[f"{side}_sonic_bps"] = _sonic_rate(bps / 8)
        out[f"{side}_eos_rate"] = _eos_rate(bps)
        out[f"{side}_util"] = f"{min(100.0, bps / 4e11 * 100):.2f}%"  # of a 400G port
    return out


def _sonic_rate(bytes_per_s: float) -> str:
    """sonic-utilities' format_brate: MB/s above 10 MB/s, KB/s above 10 KB/s, else B/s; two decimals
    (so 5 MB/s prints as `5000.00 KB/s`, as in the Command Reference's `8758.25 B/s`)."""
    for unit, div in (("MB/s", 1e6), ("KB/s", 1e3)):
        if bytes_per_s > 10 * div:
            return f"{bytes_per_s / div:.2f} {unit}"
    return f"{bytes_per_s:.2f} B/s"


def _eos_rate(bps: float) -> str:
    for unit, div in (("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3)):
        if bps >= div:
            return f"{bps / div:.1f} {unit}"
    return f"{bps:.0f} bps"


def _updown(flag: bool) -> str:
    return "up" if flag else "down"


def _pending_yaml(pending: dict[str, bool]) -> str:
    if not pending:
        return ""
    lines = ["- set:", "    interface:"]
    for iface, up in sorted(pending.items()):
        lines += [f"      {iface}:", "        link:", f"          state: {_updown(up)}"]
    return "\n".join(lines)
