"""Label and field selectors as the Kubernetes API server parses them (pure functions).

Label selectors follow `k8s.io/apimachinery/pkg/labels` (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`,
`>`/`<` on integers); field selectors follow `k8s.io/apimachinery/pkg/fields` (`=`, `==`, `!=`, with `\\,`
`\\=` `\\\\` escapes) over the fields each kind makes selectable. A bad selector raises SelectorError
naming the term, which the server turns into a 400.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Iterable

__all__ = ["SelectorError", "parse_label_selector", "parse_field_selector", "match_label_selector",
           "label_equalities", "field_equalities", "field_value", "FIELD_SELECTORS"]

log = logging.getLogger(__name__)

Predicate = Callable[[dict], bool]


class SelectorError(ValueError):
    """A selector that does not parse; the message names the offending term."""


# Field selectors each kind supports (pkg/registry/*/strategy.go `*ToSelectableFields`); every kind has
# metadata.name and metadata.namespace. Booleans render "true"/"false" and default to "false".
FIELD_SELECTORS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": ("spec.unschedulable",),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type"),
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    "ReplicaSet": ("status.replicas",),
    "ReplicationController": ("status.replicas",),
    "Job": ("status.successful",),
}
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_BOOL_FIELDS = {"spec.unschedulable", "spec.hostNetwork"}
# Selector field → where its value lives when the names differ.
_FIELD_PATHS = {"source": "source.component", "status.successful": "status.succeeded"}


def parse_label_selector(text: str | None) -> Predicate:
    """`app=x,tier!=db,env in (a,b),!canary,gpu` → predicate over a labels dict (None/"" matches all)."""
    if text is None or not text.strip():
        return lambda labels: True
    requirements = [_parse_label_term(term) for term in _split_terms(text)]
    return lambda labels: all(req(labels or {}) for req in requirements)


def parse_field_selector(text: str | None, kind: str = "") -> Predicate:
    """`metadata.name=x,spec.nodeName!=n1,status.phase=Running` → predicate over a whole object.

    With `kind`, only that kind's selectable fields are accepted; without it, any field some kind supports.
    """
    if text is None or not text.strip():
        return lambda obj: True
    allowed = _supported_fields(kind)
    tests = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue  # "a=b," is accepted, as fields.ParseSelector skips empty terms
        field, op, value = _parse_field_term(term)
        if field not in allowed:
            raise SelectorError(f"field label not supported: {field}")
        tests.append((field, op == "!=", value))

    def predicate(obj: dict) -> bool:
        return all((_field_value(obj, field) != value) if negate else (_field_value(obj, field) == value)
                   for field, negate, value in tests)
    return predicate


def label_equalities(text: str | None) -> list[tuple[str, str]]:
    """The `key=value`, `key==value` and single-value `key in (value)` terms of a label selector (what an
    index can answer); call after `parse_label_selector` has accepted the text."""
    if text is None or not text.strip():
        return []
    out = []
    for term in _split_terms(text):
        if (m := _EQUALITY_RE.match(term)) and m["op"] != "!=":
            out.append((m["key"], m["value"] or ""))
        elif (m := _SET_RE.match(term)) and m["op"] == "in" and len(values := m["values"].split(",")) == 1:
            out.append((m["key"], values[0].strip()))
    return out


def field_equalities(text: str | None) -> dict[str, str]:
    """The `field=value` / `field==value` terms of a field selector; call after `parse_field_selector`."""
    if text is None or not text.strip():
        return {}
    out = {}
    for term in _split_unescaped(text, ","):
        if term.strip():
            field, op, value = _parse_field_term(term)
            if op != "!=":
                out[field] = value
    return out


def field_value(obj: dict, field: str) -> str:
    """The selectable value of `field` as the server compares it ("" when missing, "false" for booleans)."""
    return _field_value(obj, field)


def match_label_selector(selector: dict | None, labels: dict | None) -> bool:
    """Does a metav1.LabelSelector (`matchLabels` + `matchExpressions`) select these labels?

    None selects nothing and {} selects everything, as for PDBs and Deployments. A plain map without
    `matchLabels`/`matchExpressions` keys (a Service's `spec.selector`) is read as matchLabels.
    """
    if selector is None:
        return False
    labels = labels or {}
    if selector and not set(selector) <= {"matchLabels", "matchExpressions"}:
        selector = {"matchLabels": selector}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        if not _match_expression(expr, labels):
            return False
    return True


# -- label selector parsing ----------------------------------------------------------------------
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"^{_NAME}$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TOKEN = r"[^\s!=(),<>]+"
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!)?\s*(?P<key>{_TOKEN})\s*$")
_EQUALITY_RE = re.compile(rf"^\s*(?P<key>{_TOKEN})\s*(?P<op>==|=|!=)\s*(?P<value>{_TOKEN})?\s*$")
_SET_RE = re.compile(rf"^\s*(?P<key>{_TOKEN})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_ORDER_RE = re.compile(rf"^\s*(?P<key>{_TOKEN})\s*(?P<op>[<>])\s*(?P<value>{_TOKEN})\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` → [`a in (x,y)`, `b`]."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    for term in terms:
        if not term.strip():
            raise SelectorError(f"unable to parse requirement: empty term in {text!r}")
    return terms


def _parse_label_term(term: str) -> Callable[[dict], bool]:
    shown = term.strip()
    if m := _SET_RE.match(term):
        key, op = m["key"], m["op"]
        raw = m["values"].split(",") if m["values"].strip() else [""]
        values = {v.strip() for v in raw}
        _check_key(key, shown)
        for v in values:
            _check_value(v, shown)
        if op == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: labels.get(key) not in values if key in labels else True
    if m := _EQUALITY_RE.match(term):
        key, op, value = m["key"], m["op"], m["value"] or ""
        _check_key(key, shown)
        _check_value(value, shown)
        if op == "!=":
            return lambda labels: labels.get(key) != value if key in labels else True
        return lambda labels: key in labels and labels[key] == value
    if m := _ORDER_RE.match(term):
        key, op, value = m["key"], m["op"], m["value"]
        _check_key(key, shown)
        try:
            bound = int(value)
        except ValueError:
            raise SelectorError(f"unable to parse requirement {shown!r}: for '{op}' the value must be an integer, "
                                f"got {value!r}") from None
        return lambda labels: _int_compare(labels.get(key), op, bound)
    if m := _EXISTS_RE.match(term):
        key = m["key"]
        if key in ("in", "notin"):
            raise SelectorError(f"unable to parse requirement {shown!r}: expected a label key, found keyword {key!r}")
        _check_key(key, shown)
        if m["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement {shown!r}: expected 'key', '!key', 'key=value', 'key!=value', "
                        f"'key in (v1,v2)' or 'key notin (v1,v2)'")


def _int_compare(raw: str | None, op: str, bound: int) -> bool:
    try:
        value = int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return value > bound if op == ">" else value < bound


def _check_key(key: str, term: str) -> None:
    """A qualified name: optional DNS-subdomain prefix (≤253) + '/' + name (≤63, alphanumeric ends)."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix)):
        raise SelectorError(f"unable to parse requirement {term!r}: invalid label key {key!r}: prefix part must be "
                            f"a lowercase DNS subdomain of at most 253 characters")
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        raise SelectorError(f"unable to parse requirement {term!r}: invalid label key {key!r}: name part must be at "
                            f"most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an "
                            f"alphanumeric")


def _check_value(value: str, term: str) -> None:
    if value and (len(value) > 63 or not _NAME_RE.match(value)):
        raise SelectorError(f"unable to parse requirement {term!r}: invalid label value {value!r}: must be at most "
                            f"63 characters of alphanumerics, '-', '_' or '.', starting and ending with an "
                            f"alphanumeric")


def _match_expression(expr: dict, labels: dict) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op in ("In", "NotIn") and not values:
        raise SelectorError(f"matchExpressions[{key}]: operator {op} requires a non-empty values list")
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"matchExpressions[{key}]: operator {op} takes no values")
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise SelectorError(f"matchExpressions[{key}]: {op!r} is not a valid label selector operator "
                        f"(In, NotIn, Exists, DoesNotExist)")


# -- field selector parsing ----------------------------------------------------------------------
def _supported_fields(kind: str) -> set[str]:
    if kind:
        return set(_COMMON_FIELDS) | set(FIELD_SELECTORS.get(kind, ()))
    out = set(_COMMON_FIELDS)
    for fields in FIELD_SELECTORS.values():
        out.update(fields)
    return out


def _split_unescaped(text: str, sep: str) -> Iterable[str]:
    """Split on `sep` not preceded by a backslash escape (escapes are kept for `_unescape`)."""
    part, escaped = [], False
    for ch in text:
        if escaped:
            part.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            yield "".join(part)
            part = []
        else:
            part.append(ch)
    if escaped:
        raise SelectorError(f"invalid field selector {text!r}: ends with an unfinished escape")
    yield "".join(part)


def _parse_field_term(term: str) -> tuple[str, str, str]:
    """`key!=v`, `key==v`, `key=v` (checked in that order, as fields.ParseSelector does)."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                field = term[:i].strip()
                if not field:
                    raise SelectorError(f"invalid field selector term {term!r}: missing field name")
                return field, op, _unescape(term[i + len(op):], term)
        i += 1
    raise SelectorError(f"invalid selector: {term!r}; can't understand {term!r} (expected field=value, "
                        f"field==value or field!=value)")


def _unescape(value: str, term: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector term {term!r}: invalid escape sequence")
            out.append(value[i + 1])
            i += 2
            continue
        if value[i] in ",=":
            raise SelectorError(f"invalid field selector term {term!r}: unescaped {value[i]!r} in value")
        out.append(value[i])
        i += 1
    return "".join(out)


def _field_value(obj: dict, field: str) -> str:
    """The selectable value of `field`: missing → "" ("false" for booleans); scalars as the server prints them."""
    node = obj
    for part in _FIELD_PATHS.get(field, field).split("."):
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return "false" if field in _BOOL_FIELDS else ""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, (dict, list)):
        return ""
    return str(node)
