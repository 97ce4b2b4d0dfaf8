"""Client-side switch dialects as data: the OS's interface-name grammar, what to type to show / shut /
unshut one port (as argument lists, never text with input pasted in), how to tell an error, and which
parser reads the state back (drills/faults/switch/parse.py).

Names are checked against the dialect's grammar (`check_interface`) before anything reaches a session;
`command()` checks again and builds each line from its arguments (shell-quoted for Linux CLIs), so an
inventory entry such as `Ethernet240 && sudo config ...` can never become two commands.
"""

from __future__ import annotations

import functools
import logging
import re
import shlex
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drills.core import datafiles
from drills.core.errors import InvalidProfile

__all__ = ["SwitchDialect", "InvalidName", "load_switch_dialect", "switch_dialect_names", "clean_output",
           "check_interface", "check_switch_name", "SWITCH_NAME"]

log = logging.getLogger(__name__)

DIALECT_DIR = Path(__file__).parent / "dialects"
SWITCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")  # a hostname label, dots allowed
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]")
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:,=+-]+$")  # what a literal or a validated name may contain


class InvalidName(InvalidProfile):
    """An interface or switch name that is not in its grammar (refused before any session opens)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Shell(_Strict):
    prompt: str  # regex for the last line of output when the switch waits for input
    setup: list[str] = []  # sent once after login (pager off, width)
    logout: list[str] = ["exit"]  # typed before closing, so the switch ends the session itself

    @field_validator("prompt")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value


class Preflight(_Strict):
    command: list[str]
    expect_empty: bool = True
    reason: str


class Commands(_Strict):
    show: list[str]
    shutdown: list[list[str]]
    startup: list[list[str]]
    abort: list[list[str]] = []  # sent after a failed change so no half-made change lingers
    abort_while: str | None = None  # shell: repeat `abort` while the prompt matches (Onyx has no `end`)
    preflight: list[Preflight] = []
    pfc: list[str] | None = None  # one port's PFC (lossless priorities) view; None: not readable on this OS
    # The line of `shutdown` / `startup` (1-based) on which the switch applies the change: the fault is stamped
    # when that line was sent (None: the last line; a modal CLI applies `shutdown` before its `end`).
    takes_effect: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _takes_effect_is_a_line(self) -> "Commands":
        n = min(len(self.shutdown), len(self.startup))
        if self.takes_effect is not None and self.takes_effect > n:
            raise ValueError(f"takes_effect {self.takes_effect} is past the end of shutdown/startup ({n} lines)")
        return self

    def applying_line(self, which: str) -> int:
        """The 0-based index of the line of `which` (shutdown / startup) that applies the change."""
        lines = getattr(self, which)
        return (self.takes_effect or len(lines)) - 1


class CounterRead(_Strict):
    """How to read a port's traffic counters (drills/faults/switch/counters.py names the parsers), or the switch's
    LLDP neighbours (`lldp:`; the parser is a TextFSM template: `ntc:<name>` or ours in templates/)."""

    command: list[str]
    parser: str


class PortView(_Strict):
    """One read-only view of a port for the acceptance port check (drills/acceptance/port_facts.py): the
    command, whether only RoCE fabrics read it, and per fact a regex whose group `v` is the value (`u`: a
    unit); `{iface}` in a regex stands for the port's name. Facts: speed, mtu, errors.<name>, pfc, ecn."""

    command: list[str]
    roce: bool = False
    fields: dict[str, str]
    # a configuration view prints only what differs from the default: a fact it does not show takes this value
    defaults: dict[str, str] = {}

    @field_validator("fields")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if not (name in ("speed", "mtu", "pfc", "ecn") or name.startswith("errors.")):
                raise ValueError(f"unknown port fact {name!r} (speed, mtu, errors.<name>, pfc, ecn)")
            if "(?P<v>" not in re.compile(pattern.replace("{iface}", "x")).pattern:
                raise ValueError(f"port fact {name}: the regex needs a group (?P<v>...)")
        return value


class Errors(_Strict):
    unknown_interface: list[str]
    any: list[str]


class SwitchDialect(_Strict):
    name: str
    description: str = ""
    aliases: list[str] = []
    netmiko: str  # netmiko device_type for the shell transport
    quoting: Literal["shell", "none"]  # shell: a bash login (shlex-quoted); none: a vendor CLI
    exec_join: str | None = None  # None: each line its own exec request; else one request, lines joined
    interface_names: list[str]  # full-match regexes; an optional `port` group is what `{port}` renders
    shell: Shell
    commands: Commands
    errors: Errors
    state: str  # parser name (parse.py): "ntc:<template>" or one of ours
    counters: CounterRead | None = None  # None: the drill cannot see the port's traffic on this OS
    port: list[PortView] = []  # the acceptance port check's views (speed, MTU, errors, PFC, ECN); []: not readable
    lldp: CounterRead | None = None  # the LLDP neighbour table (drills/faults/switch/lldp.py); None: not readable

    @field_validator("interface_names")
    @classmethod
    def _anchored(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not (pattern.startswith("^") and pattern.endswith("$")):
                raise ValueError(f"interface name pattern {pattern!r} must be anchored (^...$)")
            re.compile(pattern)
        return value

    def check_interface(self, iface: str) -> dict[str, str]:
        """The name's template values ({iface}, {port}); InvalidName when it is not in the grammar."""
        if isinstance(iface, str) and "\n" not in iface:
            for pattern in self.interface_names:
                m = re.fullmatch(pattern, iface)
                if m:
                    return {"iface": iface, "port": m.groupdict().get("port") or iface}
        raise InvalidName(f"interface name {iface!r} is not a {self.name} interface name (expected e.g. "
                          f"{_example(self.name)}): refused before connecting; fix the uplink in the switch inventory "
                          "or the profile")

    def command(self, which: str, iface: str) -> list[str]:
        """The command lines of `which` (show / shutdown / startup / abort) for `iface`, each built from
        its arguments: a placeholder is one whole argument, filled with a validated name."""
        values = self.check_interface(iface)
        if which == "counters":
            if self.counters is None:
                raise ValueError(f"dialect {self.name} has no counters command")
            return [self.line(self.counters.command, values)]
        spec = getattr(self.commands, which)
        if spec is None:
            raise ValueError(f"dialect {self.name} has no {which} command")
        lines = [spec] if which in ("show", "pfc") else spec
        return [self.line(tokens, values) for tokens in lines]

    def line(self, tokens: list[str], values: dict[str, str] | None = None) -> str:
        args = [t.format(**values) if values and t.startswith("{") else t for t in tokens]
        for arg in args:
            if not _SAFE_TOKEN.fullmatch(arg):
                raise InvalidName(f"argument {arg!r} of a {self.name} command has characters a switch CLI could "
                                  "interpret; refused")
        return shlex.join(args) if self.quoting == "shell" else " ".join(args)

    def error_lines(self, output: str) -> list[str]:
        """The lines of `output` that match an error pattern (the switch's words, for the user)."""
        return [ln.strip() for ln in clean_output(output).splitlines()
                if any(re.search(p, ln.strip()) for p in self.errors.any + self.errors.unknown_interface)]

    def is_unknown_interface(self, output: str) -> bool:
        return any(re.search(p, clean_output(output), re.M) for p in self.errors.unknown_interface)


def switch_dialect_names() -> list[str]:
    return sorted(p.stem for p in DIALECT_DIR.glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def load_switch_dialect(name: str) -> SwitchDialect:
    """The dialect by name or alias (`nvue` → cumulus), or a site's own YAML file given by path
    (ending in .yaml/.yml). Raises InvalidProfile naming the known ones."""
    custom = name.endswith((".yaml", ".yml"))
    if custom and not Path(name).is_file():
        raise InvalidProfile(f"switch dialect file {name} does not exist; fix `dialect` in the switch inventory")
    for file in [Path(name)] if custom else sorted(DIALECT_DIR.glob("*.yaml")):
        try:
            raw = yaml.safe_load(file.read_text(encoding="utf-8")) if custom else datafiles.load_file(file)
        except yaml.YAMLError as err:
            raise InvalidProfile(f"switch dialect file {file}: not valid YAML ({err})") from None
        if not isinstance(raw, dict):
            raise InvalidProfile(f"switch dialect file {file}: must be a YAML mapping (name, commands, errors, state, ...)")
        if custom or name == file.stem or name in (raw.get("aliases") or []):
            try:
                return SwitchDialect.model_validate(raw)
            except ValidationError as err:
                first = err.errors()[0]
                raise InvalidProfile(f"switch dialect file {file}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    raise InvalidProfile(f"switch dialect {name!r} is not known (known: {', '.join(switch_dialect_names())}; "
                         "aliases: nvue, nx-os, arista-eos, mlnx-os); fix `dialect` in the switch inventory")


def check_interface(dialect: str, iface: str) -> str:
    """`iface` when it is in the grammar of `dialect`; InvalidName otherwise (one line, nothing sent)."""
    load_switch_dialect(dialect).check_interface(iface)
    return iface


def check_switch_name(name: str) -> str:
    if not isinstance(name, str) or not SWITCH_NAME.fullmatch(name):
        raise InvalidName(f"switch name {name!r} is not a host name (letters, digits, '.', '_', '-'): "
                          "fix it in the switch inventory")
    return name


def clean_output(text: str) -> str:
    """Terminal output as plain text: no colour/cursor escapes, `\n` line ends."""
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")


def _example(dialect: str) -> str:
    return {"sonic": "Ethernet0 or etp1", "cumulus": "swp1 or swp1s0", "nxos": "Ethernet1/1", "eos": "Ethernet1 or Et3/1",
            "onyx": "Eth1/1"}.get(dialect, "the names `show interfaces` prints")
