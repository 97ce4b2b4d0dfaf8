"""Vendor CLI dialects as data: prompts, command grammar, error texts and output tables.

Each `dialects/<name>.yaml` says what a switch prints and accepts; this module loads and validates
them, compiles the command grammar, names ports, and renders show tables. The session engine that
runs commands against the fabric is `cli.py`.

Grammar notation (`match:`): words separated by spaces; `conf[igure]` accepts any abbreviation from
`conf` to `configure`; `<iface>` is an interface name (`Ethernet1/1`, `eth 1/1`, `swp1`), `<word>`
any one word. `regex:` takes a raw anchored regex instead (named groups: iface, state, word).
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from drills.core import datafiles
from drills.core.errors import InvalidProfile

__all__ = [
    "ACTIONS",
    "Dialect",
    "CommandRule",
    "ErrorText",
    "TableSpec",
    "dialect_names",
    "load_dialect",
    "render_table",
]

log = logging.getLogger(__name__)

DIALECT_DIR = Path(__file__).parent / "dialects"

ACTIONS = (
    "show_status",  # the status table (optionally filtered to <iface>)
    "show_detail",  # one interface, `detail:` names the template (switch-wide values when the rule takes none)
    "show_rows",  # `output:` as a header, then the `detail:` template once per interface
    "show_lldp",  # `output:` as a header, `detail:` per live port with an LLDP neighbour, then `<detail>_end`
    "shutdown",  # admin down (<iface> or the interface mode's interface)
    "startup",  # admin up
    "set_link",  # admin <state> (up|down)
    "enter_mode",  # `to:` config | interface (needs <iface>)
    "exit",  # one mode up; logout from the top mode
    "end",  # back to the top mode
    "logout",  # close the session
    "commit",  # apply pending changes (dialects with staging)
    "discard",  # drop pending changes
    "show_pending",  # print pending changes
    "noop",  # accepted, prints nothing (terminal length 0)
    "text",  # prints `output:`
    "error",  # prints the error named by `error:`
)

_IFACE_RE = r"(?P<iface>[A-Za-z][A-Za-z-]*\s?\d[\d/.:]*|\S+)"
_WORD_RE = r"(?P<word>\S+)"


class ErrorText(BaseModel):
    """What the switch prints for a class of error, and the exec exit status."""

    model_config = ConfigDict(extra="forbid")
    text: str
    exit: int = 1


class TableSpec(BaseModel):
    """A show table: (header, value template) columns, alignment and rule style."""

    model_config = ConfigDict(extra="forbid")
    align: Literal["left", "right"] = "left"
    rule: Literal["per_column", "full_width", "none"] = "per_column"
    indent: int = 0
    gap: int = 2
    columns: list[tuple[str, str]]


class IfaceName(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: str
    canonical: str


class ShortName(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: str
    replace: str


class CommandRule(BaseModel):
    """One grammar rule: in which modes, what text, which action."""

    model_config = ConfigDict(extra="forbid")
    mode: str | list[str] = "exec"
    match: str | None = None
    regex: str | None = None
    action: Literal[ACTIONS]  # type: ignore[valid-type]
    to: Literal["enable", "config", "interface"] | None = None
    error: str | None = None
    detail: str | None = None
    output: str = ""
    iface_error: str | None = None  # error key when <iface> is not on this switch

    @model_validator(mode="after")
    def _one_pattern(self) -> "CommandRule":
        if (self.match is None) == (self.regex is None):
            raise ValueError("a command needs exactly one of match: or regex:")
        return self

    def modes(self) -> list[str] | None:
        """None means any mode."""
        if self.mode == "any":
            return None
        return [self.mode] if isinstance(self.mode, str) else list(self.mode)


class Dialect(BaseModel):
    """A vendor CLI, validated from YAML; compiled patterns are cached on the instance."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    username: str = "admin"
    case_insensitive: bool = False
    staging: bool = False
    errors_to_stderr: bool = False  # Linux-shell CLIs print errors on stderr; modal CLIs on the terminal
    malformed_iface_error: str = "unknown_interface"  # for text that is no interface name at all
    prompts: dict[str, str]
    exec_request_mode: str = "exec"  # the mode an SSH exec request runs in (Onyx: enable)
    port_name: str
    lanes_per_port: int = 1
    iface_names: list[IfaceName]
    short_names: list[ShortName] = Field(default_factory=list)
    separators: list[str] = Field(default_factory=lambda: [r"\s*;\s*"])
    constants: dict[str, str] = Field(default_factory=dict)
    commands: list[CommandRule]
    errors: dict[str, ErrorText]
    outputs: dict[str, str] = Field(default_factory=dict)
    status_table: TableSpec
    status_words: dict[str, str] = Field(
        default_factory=lambda: {"connected": "up", "disabled": "down", "notconnect": "down"}
    )
    details: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> "Dialect":
        if "exec" not in self.prompts:
            raise ValueError("prompts needs an 'exec' entry")
        for key in ("unknown_command", "unknown_interface", self.malformed_iface_error):
            if key not in self.errors:
                raise ValueError(f"errors needs {key!r}")
        for rule in self.commands:
            if rule.action == "error" and rule.error not in self.errors:
                raise ValueError(f"command {rule.match or rule.regex!r} names unknown error {rule.error!r}")
            if rule.iface_error and rule.iface_error not in self.errors:
                raise ValueError(f"command {rule.match or rule.regex!r} names unknown error {rule.iface_error!r}")
            if rule.action in ("show_detail", "show_rows", "show_lldp") and rule.detail not in self.details:
                raise ValueError(f"command {rule.match or rule.regex!r} names unknown detail {rule.detail!r}")
            if rule.action == "enter_mode" and (rule.to is None or rule.to not in self.prompts):
                raise ValueError(f"command {rule.match or rule.regex!r} enters a mode without a prompt")
        return self

    # -- compiled grammar ----------------------------------------------------------------
    @functools.cached_property
    def compiled(self) -> list[tuple[re.Pattern, CommandRule]]:
        flags = re.IGNORECASE if self.case_insensitive else 0
        return [(re.compile(r.regex if r.regex else _words_to_regex(r.match), flags), r) for r in self.commands]

    @functools.cached_property
    def word_rules(self) -> list[tuple[list[re.Pattern], CommandRule]]:
        """Per-word patterns of `match:` rules, to find where an unknown command stops parsing."""
        flags = re.IGNORECASE if self.case_insensitive else 0
        out = []
        for r in self.commands:
            if r.match:
                out.append(([re.compile("^" + _word_regex(w, bare=True) + "$", flags) for w in r.match.split()], r))
        return out

    @functools.cached_property
    def separator_re(self) -> re.Pattern:
        return re.compile("|".join(f"(?:{s})" for s in self.separators))

    # -- names ---------------------------------------------------------------------------
    def port(self, index: int) -> str:
        """The name of the `index`-th (0-based) front-panel port, e.g. Ethernet8, Ethernet1/2, swp2."""
        return self.port_name.format(i=index, n=index + 1, lane=index * self.lanes_per_port)

    def canonical_iface(self, text: str) -> str | None:
        """`eth 1/1` → `Ethernet1/1`; None when the text is not an interface name at all."""
        flags = re.IGNORECASE if self.case_insensitive else 0
        text = text.strip()
        for rule in self.iface_names:
            m = re.match(rule.match, text, flags)
            if m:
                return m.expand(rule.canonical)
        return None

    def short_iface(self, name: str) -> str:
        for rule in self.short_names:
            name = re.sub(rule.match, rule.replace, name)
        return name

    def prompt(self, mode: str, hostname: str, user: str, iface: str = "") -> str:
        """The prompt of `mode`; `{short}` / `{port}` name the interface being configured (EOS, Onyx)."""
        short = self.short_iface(iface) if iface else ""
        port = re.sub(r"^\D+", "", iface) if iface else ""
        return self.prompts.get(mode, self.prompts["exec"]).format(hostname=hostname, user=user, short=short, port=port)


def dialect_names() -> list[str]:
    return sorted(p.stem for p in DIALECT_DIR.glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def load_dialect(name: str) -> Dialect:
    """Load and validate `dialects/<name>.yaml`; an unknown or invalid dialect is one clear line."""
    path = DIALECT_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InvalidProfile(f"unknown switch dialect {name!r}; known: {', '.join(dialect_names())}")
    try:
        dialect = Dialect.model_validate(datafiles.load_file(path))
        dialect.compiled  # compile now so a bad regex fails at load, not at the first command
    except (ValidationError, re.error, yaml.YAMLError) as err:
        raise InvalidProfile(f"switch dialect {path.name} is invalid: {err}") from err
    return dialect


def render_table(spec: TableSpec, rows: list[dict[str, str]]) -> str:
    """Render rows (template contexts) as the dialect's table, aligned like the vendor's CLI."""
    headers = [h for h, _ in spec.columns]
    cells = [[tmpl.format(**row) for _, tmpl in spec.columns] for row in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    just = str.rjust if spec.align == "right" else str.ljust
    pad, sep = " " * spec.indent, " " * spec.gap

    def line(values: list[str]) -> str:
        return (pad + sep.join(just(v, w) for v, w in zip(values, widths))).rstrip()

    out = []
    if spec.rule == "full_width":
        rule = "-" * max(80, len(line(headers)))
        out += [rule, line(headers), rule]
    elif spec.rule == "none":
        out += [line(headers)]
    else:
        out += [line(headers), (pad + sep.join("-" * w for w in widths)).rstrip()]
    out += [line(c) for c in cells]
    return "\n".join(out)


def _words_to_regex(words: str) -> str:
    return "^" + r"\s+".join(_word_regex(w) for w in words.split()) + "$"


def _word_regex(word: str, bare: bool = False) -> str:
    """`conf[igure]` → conf(?:i(?:g(?:u(?:r(?:e)?)?)?)?)?; `<iface>` / `<word>` → named groups."""
    if word == "<iface>":
        return r"[A-Za-z][A-Za-z-]*\s?\d[\d/.:]*|\S+" if bare else _IFACE_RE
    if word == "<word>":
        return r"\S+" if bare else _WORD_RE
    m = re.fullmatch(r"([^\[\]]+)\[([^\[\]]+)\]", word)
    if not m:
        return re.escape(word)
    head, tail = m.groups()
    nested = ""
    for ch in reversed(tail):
        nested = f"(?:{re.escape(ch)}{nested})?"
    return re.escape(head) + nested
