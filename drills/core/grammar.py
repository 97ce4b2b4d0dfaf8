"""One grammar per kind of value that reaches a command line, a job file, a label, a path or a CLI (DESIGN §6).

Every command — run, validate, accept, schedule, revert — and every profile section checks its strings here,
by kind, before anything starts: a value outside its kind's grammar is refused with one line naming the
object, what is accepted and an example; it never reaches a session, a file another program reads (fio's
job file), an object's label or a shell. The kinds are data (`KINDS`); `check(kind, value)` raises
`GrammarError` (a ValueError: pydantic turns it into the profile's one InvalidProfile line) and `check_flag`
raises the CLI's DrillError. Numbers are bounded where they are declared (pydantic `Field` bounds, never
`.inf` or `.nan`: `Strict` forbids them); `number_ranges(model)` lists every numeric profile value with its
range, and a unit test holds every one of them to a lower and an upper bound.
"""

from __future__ import annotations

import logging
import re
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Iterator

from pydantic import AfterValidator

from drills.core.errors import DrillError

__all__ = ["Grammar", "GrammarError", "KINDS", "check", "check_flag", "valid", "number_ranges",
           "DnsLabel", "DnsSubdomain", "LabelKey", "LabelValue", "RemotePath", "LocalPath", "NameOrYaml", "Text", "HostName",
           "Selector", "EnvName", "Glob", "FioOptionName", "UserName", "KubeContext", "HttpHeader", "Interface", "SwitchName",
           "HttpUrl", "HostPort", "CONTROL"]

log = logging.getLogger(__name__)

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # newline, NUL, escape, … never in a value


@dataclass(frozen=True)
class Grammar:
    """A kind of value: its pattern (full match), its longest length, what it is, and an example."""

    kind: str
    pattern: re.Pattern
    max_len: int
    says: str
    example: str
    min_len: int = 1

    def matches(self, value: Any) -> bool:
        return (isinstance(value, str) and self.min_len <= len(value) <= self.max_len and not CONTROL.search(value)
                and self.pattern.fullmatch(value) is not None)


class GrammarError(ValueError):
    """A value outside its kind's grammar; `kind` says which (the sentence is for people)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_NAME63 = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(?:\.{_LABEL})*"
KINDS: dict[str, Grammar] = {g.kind: g for g in (
    Grammar("dns_label", re.compile(_LABEL), 63, "a lowercase DNS label (RFC 1123: a-z, 0-9, '-')", "ai-platform"),
    Grammar("dns_subdomain", re.compile(_SUBDOMAIN), 253, "a lowercase DNS name (RFC 1123 subdomain)",
            "gpu-node-01"),
    Grammar("label_key", re.compile(rf"(?:{_SUBDOMAIN}/)?{_NAME63}"), 317,
            "a Kubernetes label key ([prefix/]name)", "network.gpu-drills.io/leaf"),
    Grammar("label_value", re.compile(rf"(?:{_NAME63})?"), 63, "a Kubernetes label value (≤ 63 of A-Z a-z 0-9 - _ .)",
            "leaf-1", min_len=0),
    Grammar("selector", re.compile(rf"(?:{_SUBDOMAIN}/)?{_NAME63}(?:!?=|==){_NAME63}?"
                                   rf"(?:,(?:{_SUBDOMAIN}/)?{_NAME63}(?:!?=|==){_NAME63}?)*"), 1024,
            "a label selector of key=value terms joined by ','", "app=llama-7b-infer"),
    # a path another machine or program reads (fio's job file, a pod's mount): no ':' (fio's list separator),
    # no '$' (fio and shells expand it), no space, no '..' step
    Grammar("remote_path", re.compile(r"(?!.*/\.\.(?:/|\Z))/(?:[A-Za-z0-9._@+,=~-]+/?)*"), 1024,
            "an absolute path of letters, digits and . _ @ + , = ~ - (no ':', '$', space or '..')", "/mnt/ckpt"),
    Grammar("local_path", re.compile(r"[^\x00]+"), 4096, "a file path on this machine (no control character)",
            "profiles/site.yaml"),
    # a built-in name, or a YAML file of one's own (a twin profile, a switch dialect): `minimal`, `site/lying.yaml`
    Grammar("name_or_yaml", re.compile(rf"{_LABEL}|[^\x00]+\.ya?ml"), 4096,
            "a built-in name (a lowercase DNS label) or the path of a .yaml file", "minimal"),
    Grammar("text", re.compile(r"[^\x00]+"), 1024, "printable text on one line", "llama-7b"),
    Grammar("host", re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                               r"[A-Za-z0-9])?)*|\[?[0-9A-Fa-f:.]+\]?)"), 253,
            "a host name or an IP address", "10.0.0.5"),
    # a switch interface in any dialect's spelling (each dialect's own grammar is stricter: faults/switch/dialects)
    Grammar("interface", re.compile(r"[A-Za-z][A-Za-z0-9/._:-]{0,63}"), 64, "a switch interface name",
            "Ethernet248"),
    Grammar("switch_name", re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}"), 253, "a switch name (a host name)",
            "leaf-1"),
    Grammar("env_name", re.compile(r"[A-Za-z_][A-Za-z0-9_]*"), 128, "an environment variable's name",
            "SWITCH_PASSWORD"),
    Grammar("glob", re.compile(r"[A-Za-z0-9*?\[\]!._/:=-]+"), 253, "a name glob (letters, digits, . _ - / : and * ? [ ])",
            "gpu-node-*"),
    Grammar("user_name", re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*"), 64, "a login name", "admin"),
    Grammar("fio_option", re.compile(r"[a-z][a-z0-9_]*"), 64, "a fio option name (lowercase letters, digits, '_')",
            "rate"),
    Grammar("run_id", re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"), 100,
            "one folder name under --reports (letters, digits, '.', '_', '-')", "nightly-42"),
    Grammar("context", re.compile(r"[^\s\x00]+"), 253, "a kubeconfig context name (no space)", "prod-east"),
    Grammar("http_header", re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"), 128, "an HTTP header name", "X-Replica"),
    Grammar("time_zone", re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+){0,2}"), 64,
            "an IANA time zone name", "Europe/Berlin"),
    Grammar("image", re.compile(r"[a-z0-9][a-z0-9._/:-]*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?"
                                r"(?:@sha256:[0-9a-f]{64})?"), 512, "an image reference (registry/repository[:tag][@digest])",
            "registry.example.com/gpu-drills:0.1.0"),
    Grammar("config_key", re.compile(r"[-._a-zA-Z0-9]+"), 253, "a ConfigMap or Secret key", "api-key"),
    # a monitoring endpoint the drills only read (Prometheus, Alertmanager): scheme, host, optional port and path
    Grammar("http_url", re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~%/-]*)?"), 2048,
            "an http(s) URL (scheme, host, optional port and path; no query, no credentials)",
            "http://prometheus.monitoring:9090"),
    Grammar("host_port", re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})?:\d{1,5}"), 260,
            "a scrape target host:port", "10.0.0.5:9400"),
    # `drills run --random SEED`: a non-negative integer that fits in 63 bits (or `auto`, handled by drills.core.picks)
    Grammar("seed", re.compile(r"0|[1-9][0-9]{0,17}|[1-8][0-9]{18}"), 19,
            "a non-negative whole number below 9×10^18, or auto (a fresh seed, recorded)", "42"),
)}


def check(kind: str, value: Any, what: str = "") -> str:
    """`value` if it is in `kind`'s grammar; GrammarError (what, what is accepted, an example) otherwise."""
    grammar = KINDS[kind]
    if grammar.matches(value):
        return value
    shown = _shown(value)
    raise GrammarError(kind, f"{what + ' ' if what else ''}{shown} must be {grammar.says}, e.g. {grammar.example!r}"
                       if what else f"must be {grammar.says}, e.g. {grammar.example!r} (got {shown})")


def valid(kind: str, value: Any) -> bool:
    try:
        check(kind, value)
    except GrammarError:
        return False
    return True


def check_flag(flag: str, kind: str, value: Any) -> str:
    """A command-line value in its grammar, or the CLI's one DrillError line naming the flag."""
    try:
        return check(kind, value, flag)
    except GrammarError as err:
        raise DrillError(f"{err}; fix {flag}") from None


def number_ranges(model, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(field path, lower bound, upper bound) of every int/float field of a pydantic model, recursively; a
    bound nobody declared is None (the unit test refuses it)."""
    import annotated_types as at

    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        types = _leaf_types(info.annotation)
        for sub in types:
            if isinstance(sub, type) and hasattr(sub, "model_fields"):
                yield from number_ranges(sub, f"{path}.")
        if not any(t in (int, float) for t in types) or typing.get_origin(info.annotation) is dict:
            continue  # a mapping's values have their own grammar (fio options: fio_options.py)
        low = high = None
        for meta in [*info.metadata, *_inner_metadata(info.annotation)]:
            if isinstance(meta, (at.Gt, at.Ge)):
                low = meta.gt if isinstance(meta, at.Gt) else meta.ge
            if isinstance(meta, (at.Lt, at.Le)):
                high = meta.lt if isinstance(meta, at.Lt) else meta.le
        yield path, low, high


def _inner_metadata(annotation) -> list:
    """Bounds declared inside an Optional (`Seconds | None`): the Annotated member's metadata."""
    out = []
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Annotated:
            for meta in typing.get_args(arg)[1:]:
                out += list(getattr(meta, "metadata", [])) if hasattr(meta, "metadata") else [meta]
    return out


def _leaf_types(annotation) -> list:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _leaf_types(args[0])
    if args and origin not in (typing.Literal,):
        return [t for a in args for t in _leaf_types(a)]
    return [annotation]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…'"


def _kind(kind: str):
    def validate(value):
        return value if value is None else check(kind, value)

    return AfterValidator(validate)


DnsLabel = Annotated[str, _kind("dns_label")]
DnsSubdomain = Annotated[str, _kind("dns_subdomain")]
LabelKey = Annotated[str, _kind("label_key")]
LabelValue = Annotated[str, _kind("label_value")]
RemotePath = Annotated[str, _kind("remote_path")]
LocalPath = Annotated[str, _kind("local_path")]
NameOrYaml = Annotated[str, _kind("name_or_yaml")]
Text = Annotated[str, _kind("text")]
HostName = Annotated[str, _kind("host")]
Selector = Annotated[str, _kind("selector")]
EnvName = Annotated[str, _kind("env_name")]
Glob = Annotated[str, _kind("glob")]
FioOptionName = Annotated[str, _kind("fio_option")]
UserName = Annotated[str, _kind("user_name")]
Interface = Annotated[str, _kind("interface")]
SwitchName = Annotated[str, _kind("switch_name")]
KubeContext = Annotated[str, _kind("context")]
HttpHeader = Annotated[str, _kind("http_header")]
HttpUrl = Annotated[str, _kind("http_url")]
HostPort = Annotated[str, _kind("host_port")]
