"""The `/bin/sh` of a simulated container: not a shell, the subset a client's exec commands use —
command lists (`;`, newlines, `&&`, `||`), pipelines (`|`), `for NAME in WORDS; do LIST; done`, `$(…)`,
`$NAME`/`${NAME}`/`$?`, quotes, redirections `>&2`, `2>&1`, `>/dev/null`, and `exit [N]`. Each command is
a `Program` of the container's image (container_exec._PROGRAMS: what it prints for its arguments and
stdin, and its exit code); any other name is sh's "not found", exit 127. Syntax outside the subset is
sh's syntax error, exit 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Output", "Program", "Shell"]

_OPS = ("&&", "||", ">&2", "2>&1", ";", "|", "\n", ">")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\?")


class ShellSyntaxError(Exception):
    pass


class Exit(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@dataclass
class Output:
    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0
    seconds: float = 0.0  # twin seconds the commands took (`sleep`)
    # annotations the command sets on its node (a node agent's state: `dcgmi test --inject` writes DCGM's field
    # cache); the exec handler writes them through the store once the command ran (drills/twin/api/remotecommand.py)
    node_annotations: dict | None = None


Program = Callable[[list[str], bytes], Output]  # (argv, stdin) → output
Word = list[tuple[str, str]]  # parts: ("lit", text) | ("var", name) | ("sub", source)


@dataclass
class Shell:
    """`lookup(name)` is the image's program of that name (None: not found); `env` the environment."""

    lookup: Callable[[str], Program | None]
    env: dict[str, str]
    last: int = 0
    _vars: dict[str, str] = field(default_factory=dict)

    def run(self, source: str, stdin: bytes = b"") -> tuple[Output, bool]:
        """What `source` prints and its exit status; True when it ran `exit` (the shell ends there)."""
        out = Output()
        try:
            self._list(_parse(_lex(source)), stdin, out)
        except ShellSyntaxError as err:
            self.last = out.code = 2
            out.stderr += f"sh: syntax error: {err}\n".encode()
            return out, False
        except Exit as done:
            self.last = out.code = done.code
            return out, True
        out.code = self.last
        return out, False

    # -- execution --------------------------------------------------------------------------------------
    def _list(self, items: list, stdin: bytes, out: Output) -> None:
        for connector, node in items:
            if connector == "&&" and self.last != 0 or connector == "||" and self.last == 0:
                continue
            if node[0] == "for":
                _, name, words, body = node
                for value in [v for w in words for v in self._expand(w, split=True)]:
                    self._vars[name] = value
                    self._list(body, stdin, out)
            else:
                self._pipeline(node[1], stdin, out)

    def _pipeline(self, commands: list, stdin: bytes, out: Output) -> None:
        data = stdin
        for i, (words, redirects) in enumerate(commands):
            argv = [v for w in words for v in self._expand(w, split=True)]
            result = self._command(argv, data)
            stdout, stderr = result.stdout, result.stderr
            for r in redirects:
                if r == ">&2":
                    stdout, stderr = b"", stderr + stdout
                elif r == "2>&1":
                    stdout, stderr = stdout + stderr, b""
                elif r == ">/dev/null":
                    stdout = b""
            out.stderr += stderr
            out.seconds += result.seconds
            self.last = result.code
            if i == len(commands) - 1:
                out.stdout += stdout
            data = stdout

    def _command(self, argv: list[str], stdin: bytes) -> Output:
        if not argv:
            return Output()
        if argv[0] == "exit":
            raise Exit(int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else self.last)
        program = self.lookup(argv[0])
        if program is None:
            return Output(stderr=f"sh: {argv[0]}: not found\n".encode(), code=127)
        return program(argv, stdin)

    def _expand(self, word: Word, split: bool) -> list[str]:
        text, quoted = "", False
        for kind, value in word:
            if kind == "lit" or kind == "qlit":
                text += value
                quoted = quoted or kind == "qlit"
            elif kind == "var":
                text += str(self.last) if value == "?" else self._vars.get(value, self.env.get(value, ""))
            else:
                sub = Output()
                saved = self.last
                self._list(_parse(_lex(value)), b"", sub)
                self.last = saved
                text += sub.stdout.decode(errors="replace").rstrip("\n")
        if split and not quoted and not any(k == "qlit" for k, _ in word):
            return text.split()
        return [text]


# -- lexing and parsing ------------------------------------------------------------------------------------
def _lex(source: str) -> list:
    """Tokens: ("op", text) or ("word", Word)."""
    tokens: list = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in " \t":
            i += 1
            continue
        if c == "#":
            while i < n and source[i] != "\n":
                i += 1
            continue
        op = next((o for o in _OPS if source.startswith(o, i)), None)
        if op is not None:
            if op == ">":
                target = re.match(r">\s*([^\s;|&]+)", source[i:])
                if not target or target.group(1) != "/dev/null":
                    raise ShellSyntaxError("redirection to a file")
                tokens.append(("op", ">/dev/null"))
                i += target.end()
                continue
            tokens.append(("op", op))
            i += len(op)
            continue
        word, i = _word(source, i)
        if not word:
            raise ShellSyntaxError(f'unexpected "{c}"')
        tokens.append(("word", word))
    return tokens


def _word(s: str, i: int) -> tuple[Word, int]:
    parts: Word = []
    while i < len(s) and s[i] not in " \t;|&\n>" and not s.startswith("2>&1", i):
        c = s[i]
        if c == "'":
            end = s.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated quoted string")
            parts.append(("qlit", s[i + 1:end]))
            i = end + 1
        elif c == '"':
            i += 1
            start = len(parts)
            while i < len(s) and s[i] != '"':
                if s[i] == "$":
                    i = _dollar(s, i, parts)
                else:
                    if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in '"\\$`':
                        i += 1
                    parts.append(("qlit", s[i]))
                    i += 1
            if i >= len(s):
                raise ShellSyntaxError("unterminated quoted string")
            if len(parts) == start:
                parts.append(("qlit", ""))
            i += 1
        elif c == "$":
            i = _dollar(s, i, parts)
        elif c == "\\" and i + 1 < len(s):
            parts.append(("qlit", s[i + 1]))
            i += 2
        else:
            parts.append(("lit", c))
            i += 1
    return parts, i


def _dollar(s: str, i: int, parts: Word) -> int:
    if s.startswith("$(", i):
        depth, j = 1, i + 2
        while j < len(s) and depth:
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            j += 1
        if depth:
            raise ShellSyntaxError("unterminated $(")
        parts.append(("sub", s[i + 2:j - 1]))
        return j
    braced = s.startswith("${", i)
    m = _NAME.match(s, i + (2 if braced else 1))
    if not m:
        parts.append(("lit", "$"))
        return i + 1
    parts.append(("var", m.group(0)))
    end = m.end()
    if braced:
        if not s.startswith("}", end):
            raise ShellSyntaxError("bad substitution")
        end += 1
    return end


def _parse(tokens: list) -> list:
    items, pos = _parse_list(tokens, 0, ())
    if pos != len(tokens):
        raise ShellSyntaxError(f"unexpected {_show(tokens[pos])}")
    return items


def _parse_list(tokens: list, pos: int, stop: tuple[str, ...]) -> tuple[list, int]:
    """[(connector, node)], node = ("pipe", [(words, redirects)]) | ("for", name, words, body)."""
    items: list = []
    connector = ";"
    while pos < len(tokens):
        kind, value = tokens[pos]
        if kind == "op" and value in (";", "\n"):
            pos += 1
            continue
        if kind == "word" and _literal(value) in stop:
            break
        if kind == "word" and _literal(value) == "for":
            node, pos = _parse_for(tokens, pos + 1)
        else:
            node, pos = _parse_pipeline(tokens, pos)
        items.append((connector, node))
        connector = ";"
        if pos < len(tokens) and tokens[pos] in (("op", "&&"), ("op", "||")):
            connector = tokens[pos][1]
            pos += 1
    return items, pos


def _parse_for(tokens: list, pos: int) -> tuple[tuple, int]:
    if pos >= len(tokens) or tokens[pos][0] != "word" or not _NAME.fullmatch(_literal(tokens[pos][1]) or ""):
        raise ShellSyntaxError("bad for loop variable")
    name = _literal(tokens[pos][1])
    pos += 1
    words: list = []
    if pos < len(tokens) and tokens[pos][0] == "word" and _literal(tokens[pos][1]) == "in":
        pos += 1
        while pos < len(tokens) and tokens[pos][0] == "word":
            words.append(tokens[pos][1])
            pos += 1
    while pos < len(tokens) and tokens[pos] in (("op", ";"), ("op", "\n")):
        pos += 1
    if pos >= len(tokens) or _literal(tokens[pos][1]) != "do":
        raise ShellSyntaxError('expecting "do"')
    body, pos = _parse_list(tokens, pos + 1, ("done",))
    if pos >= len(tokens):
        raise ShellSyntaxError('expecting "done"')
    return ("for", name, words, body), pos + 1


def _parse_pipeline(tokens: list, pos: int) -> tuple[tuple, int]:
    commands: list = []
    words: list = []
    redirects: list[str] = []
    while pos < len(tokens):
        kind, value = tokens[pos]
        if kind == "word":
            words.append(value)
        elif value in (">&2", "2>&1", ">/dev/null"):
            redirects.append(value)
        elif value == "|":
            if not words:
                raise ShellSyntaxError('unexpected "|"')
            commands.append((words, redirects))
            words, redirects = [], []
        else:
            break
        pos += 1
    if not words:
        raise ShellSyntaxError(f"unexpected {_show(tokens[pos]) if pos < len(tokens) else 'end of file'}")
    commands.append((words, redirects))
    return ("pipe", commands), pos


def _literal(word) -> str | None:
    if not isinstance(word, list) or any(kind not in ("lit",) for kind, _ in word):
        return None
    return "".join(v for _, v in word)


def _show(token) -> str:
    return f'"{token[1]}"' if token[0] == "op" else f'word "{_literal(token[1])}"'
