"""Client-side switch dialects as data: what to type to shut / unshut / show one port, how to tell an
error, and how to read the admin and oper state back from the switch's own output.

Each `dialects/<name>.yaml` is validated here; `read_state` turns a show command's output
into a `PortState` (tables are read by column, so names with spaces and right-aligned columns
work), or says why it cannot (usually: the profile names the wrong dialect).
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from drills.core.errors import InvalidProfile

__all__ = ["PortState", "SwitchDialect", "StateUnreadable", "load_switch_dialect", "switch_dialect_names", "read_state",
           "clean_output"]

log = logging.getLogger(__name__)

DIALECT_DIR = Path(__file__).parent / "dialects"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]")


@dataclass(frozen=True)
class PortState:
    """One interface as the switch reports it: admin and oper state, each "up" or "down"."""

    admin: str
    oper: str

    @property
    def admin_up(self) -> bool:
        return self.admin == "up"

    @property
    def oper_up(self) -> bool:
        return self.oper == "up"


class StateUnreadable(ValueError):
    """The output does not have the shape the dialect expects (the message says what is missing)."""


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
    command: str
    expect_empty: bool = True
    reason: str


class Commands(_Strict):
    show: str
    shutdown: list[str]
    startup: list[str]
    abort: list[str] = []  # sent after a failed change so no half-made change lingers
    preflight: list[Preflight] = []


class Errors(_Strict):
    unknown_interface: list[str]
    any: list[str]


class Row(_Strict):
    column: str
    equals: str


class StateSpec(_Strict):
    parse: Literal["table", "regex"]
    row: Row | None = None  # table: which row; None → exactly one data row
    columns: dict[Literal["admin", "oper"], str] = {}  # table: column per state
    status_column: str | None = None  # table: one column whose word gives both states
    status_words: dict[str, tuple[Literal["up", "down"], Literal["up", "down"]]] = {}
    admin: str | None = None  # regex with a `value` group
    oper: str | None = None


class SwitchDialect(_Strict):
    name: str
    description: str = ""
    aliases: list[str] = []
    exec_join: str
    shell: Shell
    commands: Commands
    errors: Errors
    state: StateSpec

    def command(self, which: str, iface: str) -> list[str]:
        lines = getattr(self.commands, which)
        return [lines.format(iface=iface)] if isinstance(lines, str) else [ln.format(iface=iface) for ln in lines]

    def error_lines(self, output: str) -> list[str]:
        """The lines of `output` that match an error pattern (the switch's words, for the user)."""
        return [ln.strip() for ln in clean_output(output).splitlines()
                if any(re.search(p, ln.strip()) for p in self.errors.any + self.errors.unknown_interface)]

    def is_unknown_interface(self, output: str) -> bool:
        return any(re.search(p, output, re.M) for p in self.errors.unknown_interface)


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
            raw = yaml.safe_load(file.read_text(encoding="utf-8"))
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
                         "aliases: nvue, nx-os, arista-eos); fix `dialect` in the switch inventory")


def read_state(dialect: SwitchDialect, output: str, iface: str) -> PortState:
    """Admin and oper state of `iface` from the show command's output. Raises StateUnreadable."""
    text = clean_output(output)
    spec = dialect.state
    if spec.parse == "regex":
        return PortState(_regex(spec.admin, text, "admin"), _regex(spec.oper, text, "oper"))
    wanted = list(spec.columns.values()) + ([spec.status_column] if spec.status_column else [])
    table = _table(text, [c for c in wanted if c] + ([spec.row.column] if spec.row and spec.row.column else []))
    rows = table
    if spec.row is not None:
        key = spec.row.equals.format(iface=iface)
        rows = [r for r in table if r.get(spec.row.column) == key]
    if len(rows) != 1:
        raise StateUnreadable(f"expected one row for {iface}, found {len(rows)}")
    row = rows[0]
    if spec.status_column:
        word = row.get(spec.status_column, "")
        if word not in spec.status_words:
            raise StateUnreadable(f"status {word!r} is none of {', '.join(spec.status_words)}")
        return PortState(*spec.status_words[word])
    return PortState(_updown(row.get(spec.columns["admin"]), "admin"), _updown(row.get(spec.columns["oper"]), "oper"))


def clean_output(text: str) -> str:
    """Terminal output as plain text: no colour/cursor escapes, `\n` line ends."""
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")


def _regex(pattern: str | None, text: str, what: str) -> str:
    match = re.search(pattern or "(?!)", text, re.M)
    if not match:
        raise StateUnreadable(f"no {what} state (pattern {pattern!r} does not match)")
    return _updown(match.group("value"), what)


def _updown(value: str | None, what: str) -> str:
    word = (value or "").strip().lower()
    if word not in ("up", "down"):
        raise StateUnreadable(f"{what} state {value!r} is neither up nor down")
    return word


def _table(text: str, columns: list[str]) -> list[dict[str, str]]:
    """Rows of the first table whose header has every named column. Column spans come from the dash
    rule under the header when it has one run per column, else from where the header words start."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        names = [m.group() for m in re.finditer(r"\S+(?: \S+)*", line)]  # words joined by single spaces
        if not names or not all(c == "" or c in names for c in columns):
            continue
        rule = lines[i + 1] if i + 1 < len(lines) and re.fullmatch(r"[\s-]*-[\s-]*", lines[i + 1]) else None
        runs = [m.span() for m in re.finditer(r"-+", rule)] if rule else []
        if len(runs) >= 2:
            spans = runs
        else:
            starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", line)]
            spans = [(s, starts[k + 1] if k + 1 < len(starts) else 10**6) for k, s in enumerate(starts)]
        header = [line[a:b].strip() for a, b in _widen(spans, line)]
        rows = []
        for body in lines[i + (2 if rule is not None else 1):]:
            if not body.strip():
                break
            if re.fullmatch(r"[\s-]+", body):
                continue
            rows.append({h: body[a:b].strip() for h, (a, b) in zip(header, _widen(spans, body))})
        return rows
    raise StateUnreadable(f"no table with the columns {', '.join(repr(c) for c in columns)}")


def _widen(spans: list[tuple[int, int]], line: str) -> list[tuple[int, int]]:
    """Columns own the gap before the next one, the last one runs to the end of the line."""
    out = []
    for k, (a, b) in enumerate(spans):
        end = spans[k + 1][0] if k + 1 < len(spans) else max(b, len(line))
        out.append((a if k else 0, end))
    return out
