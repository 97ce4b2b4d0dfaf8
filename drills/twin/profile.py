"""Load a twin profile (YAML) with named defects applied, validated into a `TwinProfile`.

A profile is a name (`drills/twin/profiles/<name>.yaml`) or a path. A defect is a named overlay
(`drills/twin/defects/<name>.yaml`: a one-line `description` and an `overlay`) deep-merged onto the
profile before validation: mappings merge, `"*"` addresses every entry of a named mapping, lists
and scalars replace, `null` sets a value to null. Stage files (`stage_files`) form the base of
`stages`, which the profile and defects may override by stage name. Any problem is one
`InvalidProfile` line naming the file, the field path and the fix.
"""

from __future__ import annotations

import copy
import difflib
import logging
import types
import typing
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ValidationError

from drills.core import datafiles
from drills.core.errors import InvalidProfile
from drills.twin.profile_model import TwinProfile
from drills.twin.stages import load_stage_files, stage_file_names

__all__ = ["TwinProfile", "load_profile", "list_defects", "list_profiles", "deep_merge", "PROFILES_DIR", "DEFECTS_DIR"]

log = logging.getLogger(__name__)

PROFILES_DIR = Path(__file__).parent / "profiles"
DEFECTS_DIR = Path(__file__).parent / "defects"
DEFAULT_STAGE_FILES = ["pod"]


def load_profile(name_or_path: str = "minimal", defects: Sequence[str] = ()) -> TwinProfile:
    """The validated profile `name_or_path` with its own defects and then `defects` applied."""
    path = _profile_path(name_or_path)
    raw = _read_yaml(path, f"profile {path.name}")
    if not isinstance(raw, dict):
        raise InvalidProfile(f"profile {path.name}: must be a mapping of fields, got {type(raw).__name__}")
    raw.setdefault("name", path.stem)
    enabled = _unique([*(raw.get("defects") or []), *defects])
    catalog = _defect_catalog()
    for defect in enabled:
        if defect not in catalog:
            raise InvalidProfile(_unknown_defect(defect, catalog))
        raw = deep_merge(raw, catalog[defect]["overlay"])
    raw["defects"] = enabled
    raw["stages"] = _stages(raw, path.name)
    try:
        profile = TwinProfile.model_validate(raw)
    except ValidationError as err:
        raise InvalidProfile(_one_line(err, path.name, "profile")) from None
    log.debug("profile %s loaded: %d nodes, defects %s", profile.name, len(profile.nodes()), enabled or "none")
    return profile


def list_defects() -> list[tuple[str, str]]:
    """(name, one-line description) of every known defect, sorted by name."""
    return sorted((name, d["description"]) for name, d in _defect_catalog().items())


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def deep_merge(base: Any, overlay: Any) -> Any:
    """`overlay` onto `base` (neither is changed): dicts merge, `"*"` hits every entry, rest replaces."""
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        return copy.deepcopy(overlay)
    out = copy.deepcopy(base)
    wildcard = overlay.get("*")
    if wildcard is not None:
        for key in out:
            out[key] = deep_merge(out[key] if out[key] is not None else {}, wildcard)
    for key, value in overlay.items():
        if key != "*":
            current = out.get(key)
            if isinstance(value, dict) and not isinstance(current, dict):
                current = {}  # so a wildcard below an absent key matches nothing instead of naming "*"
            out[key] = deep_merge(current, value)
    return out


# -- helpers ------------------------------------------------------------------------------------
def _profile_path(name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.parent != Path("."):
        if not candidate.is_file():
            raise InvalidProfile(f"profile {name_or_path}: no such file; give a YAML path or one of "
                                 f"{', '.join(list_profiles())}")
        return candidate
    path = PROFILES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        close = difflib.get_close_matches(name_or_path, list_profiles(), n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        raise InvalidProfile(f'unknown profile "{name_or_path}"{hint}: known profiles are '
                             f"{', '.join(list_profiles())}, or give a path to a YAML file")
    return path


def _read_yaml(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        return datafiles.load_text(text) if datafiles.is_packaged(path) else datafiles.load_user_text(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InvalidProfile(f"{what}:{where}: not valid YAML ({problem}); fix the syntax") from None
    except OSError as err:
        raise InvalidProfile(f"{what}: cannot read {path} ({err.strerror})") from None


_CATALOG: tuple[tuple, dict] | None = None  # (the files' names and mtimes, the catalog they gave)


def _defect_catalog() -> dict[str, dict]:
    """name → {description, overlay} from one file per defect (and/or a `defects.yaml` catalog); parsed once per
    process while no file changed (each twin and drill loads a profile; a prefork server parses it for all)."""
    global _CATALOG
    paths = sorted(DEFECTS_DIR.glob("*.yaml"))
    key = tuple((p.name, p.stat().st_mtime_ns) for p in paths)
    if _CATALOG is None or _CATALOG[0] != key:
        _CATALOG = (key, _parse_defects(paths))
    return _CATALOG[1]


def _parse_defects(paths: list[Path]) -> dict[str, dict]:
    catalog: dict[str, dict] = {}
    for path in paths:
        data = _read_yaml(path, f"defect {path.name}") or {}
        entries = data.items() if path.stem == "defects" else [(path.stem, data)]
        for name, entry in entries:
            if not isinstance(entry, dict) or set(entry) - {"description", "overlay"} or "description" not in entry:
                raise InvalidProfile(f"defect {path.name}: {name} must have exactly `description` (one line) "
                                     f"and `overlay` (a mapping merged onto the profile)")
            catalog[name] = {"description": str(entry["description"]).strip(), "overlay": entry.get("overlay") or {}}
    return catalog


def _unknown_defect(name: str, catalog: dict) -> str:
    close = difflib.get_close_matches(name, list(catalog), n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return (f'unknown defect "{name}"{hint}: known defects are {", ".join(sorted(catalog))}; '
            f"list them with `drills twin defects`")


def _stages(raw: dict, source: str) -> dict:
    files = raw.pop("stage_files", DEFAULT_STAGE_FILES)
    try:
        base = load_stage_files(list(files))
    except FileNotFoundError as err:
        raise InvalidProfile(f"profile {source}: stage_files: {err}") from None
    except (yaml.YAMLError, KeyError, TypeError) as err:
        raise InvalidProfile(f"profile {source}: stage_files: a stage file does not parse ({err}); "
                             f"known files: {', '.join(stage_file_names())}") from None
    return deep_merge(base, raw.get("stages") or {})


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _one_line(err: ValidationError, source: str, what: str) -> str:
    first = err.errors()[0]
    loc = first["loc"]
    path = _format_loc(loc)
    kind, got = first["type"], first.get("input")
    ctx = first.get("ctx") or {}
    if kind == "extra_forbidden":
        known = _fields_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        fix = f'did you mean "{close[0]}"?' if close else f"known fields: {', '.join(known)}"
        message = f"unknown field; {fix}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        message = f"must be {sign} {bound} (got {got!r})"
    elif kind == "missing":
        message = "is required; add it"
    elif kind == "literal_error":
        message = f"must be one of {ctx.get('expected', '?')} (got {got!r})"
    elif kind == "value_error":
        message = str(ctx.get("error", first["msg"]))
    else:
        message = f"{first['msg'][0].lower()}{first['msg'][1:]} (got {got!r})"
    more = len(err.errors()) - 1
    tail = f" (+{more} more)" if more else ""
    return f"{what} {source}: {path + ': ' if path else ''}{message}{tail}"


def _format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith(("function-", "dict[", "list[")):
            continue  # pydantic's internal validator steps
        else:
            out += f".{part}" if out else str(part)
    return out


def _fields_at(loc: tuple) -> list[str]:
    """Field names of the model that `loc` points into (for 'did you mean'), best effort."""
    model: Any = TwinProfile
    for part in loc:
        if isinstance(model, type) and issubclass(model, BaseModel):
            if part not in model.model_fields:
                return []
            model = model.model_fields[part].annotation
        else:
            model = _inner(model)
        model = _unwrap(model)
    model = _unwrap(_inner(model)) if not (isinstance(model, type) and issubclass(model, BaseModel)) else model
    return sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _unwrap(tp: Any) -> Any:
    """Strip Optional/Annotated so the model inside shows."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), args[0])
        else:
            return tp


def _inner(tp: Any) -> Any:
    """The element type of list[...] / dict[str, ...]."""
    args = typing.get_args(_unwrap(tp))
    return args[-1] if args else tp
