"""kwok-style lifecycle stages: which objects (selector) → after how long (delay ± jitter) → what
changes (patches, events, delete). The data lives in `drills/twin/stages/*.yaml`; a controller
watches the resource, asks `Stage.matches`, waits `Stage.delay.seconds(...)`, then writes what
`Stage.render` returns through the API.

Paths in selectors and templates are jq-like: `.status.phase`, `.spec.containers[0].image`,
`.status.conditions[type=Ready].status`, `.metadata.labels["app.kubernetes.io/name"]`. A path that
does not start with `.` reads a context value the controller supplies (`now`, `host_ip`, `pod_ip`,
`image_cached`, `readiness`, `delay`, …). Template strings substitute `${expr}`, where `expr` is
`obj.<path>` or a context name, optionally piped through a filter (`${obj.metadata.uid|digest}`);
a string that is exactly one `${expr}` keeps the value's type. `{"$forEach": path, "as": name,
"item": template}` renders a list.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import re
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import Field

from drills.core import datafiles
from drills.twin.profile_types import Duration, Fraction, Strict

__all__ = [
    "STAGES_DIR", "Condition", "Selector", "Delay", "EventSpec", "PatchSpec", "Next", "Stage", "Rendered",
    "get_path", "evaluate", "render_template", "load_stage_files", "stage_file_names",
]

log = logging.getLogger(__name__)

STAGES_DIR = Path(__file__).parent / "stages"


class Condition(Strict):
    """`path` compared with `values` (as strings; booleans are `"true"`/`"false"`)."""

    path: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = "In"
    values: list[str | int | bool] = []

    def holds(self, obj: Mapping, context: Mapping[str, Any]) -> bool:
        value = evaluate(self.path, obj, context)
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        found = value is not None and _text(value) in {_text(v) for v in self.values}
        return found if self.operator == "In" else not found


class Selector(Strict):
    match_labels: dict[str, str] = {}
    match_annotations: dict[str, str] = {}
    conditions: list[Condition] = []


class Delay(Strict):
    """`duration`, or the named source `duration_from` (a timings field or a context value), ± jitter."""

    duration: Duration = 0.0
    duration_from: str | None = None
    jitter: Fraction | None = None  # None: the profile's timings.jitter

    def seconds(self, timings: Any, context: Mapping[str, Any] | None = None, rng: random.Random | None = None) -> float:
        base = self.duration
        if self.duration_from is not None:
            if context and self.duration_from in context:
                base = float(context[self.duration_from])
            elif hasattr(timings, self.duration_from):
                base = float(getattr(timings, self.duration_from))
            else:
                raise KeyError(f"delay source {self.duration_from!r} is neither a timing nor in the context")
        jitter = getattr(timings, "jitter", 0.0) if self.jitter is None else self.jitter
        return max(0.0, base * (1 + (rng or random).uniform(-jitter, jitter))) if jitter else base


class EventSpec(Strict):
    type: Literal["Normal", "Warning"] = "Normal"
    reason: str
    message: str = ""
    source: str = "kubelet"


class PatchSpec(Strict):
    """A patch body; `root` nests the rendered template under that key (kwok's `root: status`)."""

    subresource: str | None = None  # "status" for status fields
    root: str | None = None
    type: Literal["merge", "strategic", "json"] = "strategic"
    template: Any

    def body(self, obj: Mapping, context: Mapping[str, Any]) -> Any:
        rendered = render_template(self.template, obj, context)
        return {self.root: rendered} if self.root else rendered


class Next(Strict):
    patches: list[PatchSpec] = []
    events: list[EventSpec] = []
    delete: bool = False


class Stage(Strict):
    """One lifecycle step. `enter_events` are written when the delay starts (e.g. Pulling)."""

    name: str
    resource: str = "Pod"  # a kind
    description: str = ""
    selector: Selector = Selector()
    delay: Delay = Delay()
    enter_events: list[EventSpec] = []
    next: Next = Field(default_factory=Next)
    weight: int = 0

    def matches(self, obj: Mapping, context: Mapping[str, Any] | None = None) -> bool:
        ctx = context or {}
        meta = obj.get("metadata") or {}
        for key, want in self.selector.match_labels.items():
            if (meta.get("labels") or {}).get(key) != want:
                return False
        for key, want in self.selector.match_annotations.items():
            if (meta.get("annotations") or {}).get(key) != want:
                return False
        return all(c.holds(obj, ctx) for c in self.selector.conditions)

    def render(self, obj: Mapping, context: Mapping[str, Any] | None = None) -> "Rendered":
        """The concrete patches and events for `obj` (context: now, host_ip, delay, …)."""
        ctx = dict(context or {})
        patches = [(p.subresource, p.type, p.body(obj, ctx)) for p in self.next.patches]
        return Rendered(patches=patches, events=[_event(e, obj, ctx) for e in self.next.events],
                        delete=self.next.delete)

    def render_enter_events(self, obj: Mapping, context: Mapping[str, Any] | None = None) -> list[dict]:
        ctx = dict(context or {})
        return [_event(e, obj, ctx) for e in self.enter_events]


class Rendered(Strict):
    patches: list[tuple[str | None, str, Any]] = []  # (subresource, patch type, body)
    events: list[dict] = []  # {type, reason, message, source}
    delete: bool = False


def stage_file_names() -> list[str]:
    return sorted(p.stem for p in STAGES_DIR.glob("*.yaml"))


def load_stage_files(names: list[str]) -> dict[str, dict]:
    """Raw stage mappings (name → data) from `stages/<name>.yaml`, in file then list order."""
    out: dict[str, dict] = {}
    for name in names:
        path = STAGES_DIR / f"{name}.yaml"
        if not path.is_file():
            raise FileNotFoundError(f"stage file {name!r} not found; known: {', '.join(stage_file_names())}")
        data = datafiles.load_file(path) or {}
        for entry in data.get("stages", []):
            out[entry["name"]] = entry
    return out


# -- paths and templates (pure) -----------------------------------------------------------------
_TOKEN = re.compile(r'\.([A-Za-z0-9_\-]+)|\[(\d+)\]|\[([A-Za-z0-9_.\-]+)=([^\]]*)\]|\["([^"]+)"\]')
_EXPR = re.compile(r"\$\{([^}]+)\}")
_FILTERS = {
    "digest": lambda v: "sha256:" + hashlib.sha256(str(v).encode()).hexdigest(),
    "hex": lambda v: hashlib.sha256(str(v).encode()).hexdigest(),
    "lower": lambda v: str(v).lower(),
    "repo": lambda v: re.sub(r":[^/:@]+$", "", str(v).split("@")[0]),  # image without tag or digest
    "int": lambda v: int(float(v)),
    "round1": lambda v: round(float(v), 1),
}


def get_path(obj: Any, path: str) -> Any:
    """Value at jq-like `path` in `obj`, or None when any step is missing."""
    cur = obj
    for key, index, fkey, fval, quoted, bad in _steps(path):
        if bad is not None:
            raise ValueError(bad)
        if index is not None:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) else None
        elif fkey is not None:
            cur = next((i for i in cur if isinstance(i, dict) and _text(i.get(fkey)) == fval), None) \
                if isinstance(cur, list) else None
        else:
            cur = cur.get(key if key is not None else quoted) if isinstance(cur, dict) else None
        if cur is None:
            return None
    return cur


@functools.lru_cache(maxsize=4096)
def _steps(path: str) -> tuple[tuple[str | None, ...], ...]:
    """`path` tokenised once (stage paths are a few fixed strings read on every object): its steps, the last one a
    `bad` message where the path stops parsing — raised only when a walk gets that far, as before."""
    pos, out = 0, []
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            out.append((None, None, None, None, None, f"bad path {path!r} at {path[pos:]!r}"))
            break
        pos = m.end()
        out.append((*m.groups(), None))
    return tuple(out)


def evaluate(expr: str, obj: Any, context: Mapping[str, Any]) -> Any:
    """`.path` reads `obj`; `obj.path` too; `name.path` reads a context value; `|filter` applies."""
    expr, filters, head, end = _parsed(expr)
    if head is None:
        value = get_path(obj, expr)
    else:
        if end < 0:
            raise ValueError(f"bad expression {expr!r}")
        if head == "obj":
            root = obj
        elif head in context:
            root = context[head]
        else:
            raise KeyError(f"template needs {head!r}, which the context does not provide")
        value = get_path(root, expr[end:]) if end < len(expr) else root
    for name in filters:
        if name not in _FILTERS:
            raise ValueError(f"unknown template filter {name!r}; known: {', '.join(_FILTERS)}")
        value = None if value is None else _FILTERS[name](value)
    return value


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[str, tuple[str, ...], str | None, int]:
    """An expression split once (a stage's few fixed expressions are evaluated on every object): (expression,
    filters, head name or None for a `.path`, where the head ends or -1 when the expression has none)."""
    expr, *filters = [part.strip() for part in text.split("|")]
    if expr.startswith("."):
        return expr, tuple(filters), None, 0
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", expr)
    return (expr, tuple(filters), m.group(0), m.end()) if m else (expr, tuple(filters), "", -1)


def render_template(template: Any, obj: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(template, dict):
        if "$forEach" in template:
            items = evaluate(template["$forEach"], obj, context) or []
            var = template.get("as", "item")
            return [render_template(template["item"], obj, {**context, var: item}) for item in items]
        return {k: render_template(v, obj, context) for k, v in template.items()}
    if isinstance(template, list):
        return [render_template(v, obj, context) for v in template]
    if isinstance(template, str):
        whole = _EXPR.fullmatch(template)
        if whole:
            return evaluate(whole.group(1), obj, context)
        return _EXPR.sub(lambda m: _text(evaluate(m.group(1), obj, context)), template)
    return template


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _event(spec: EventSpec, obj: Mapping, ctx: Mapping[str, Any]) -> dict:
    return {"type": spec.type, "reason": spec.reason, "message": render_template(spec.message, obj, ctx),
            "source": spec.source}
