"""The YAML data files shipped inside the package (catalogs, dialects, stages, built-in profiles and defects,
report texts), parsed by libyaml when PyYAML has it.

Every process reads them at start (the twin, each drill lane, the CLI): the pure-Python parser took ≈ 0.15 s
of CPU for them per process, libyaml a tenth of that, with identical objects. Files a user writes (profiles, read
by every twin and every drill run) are parsed the same way by `load_user_text`; only when libyaml refuses one is it
parsed again by `yaml.safe_load`, whose error messages are the clearer ones, and they are what a user sees.

A text parsed once in a process is kept (pickled: unpickling a fresh copy is ~10× cheaper than libyaml's Python-side
construction, and the caller may change what it gets): a prefork server parses the built-in profiles, stages and
dialects once (drills/twin/warm.py) and every twin forked from it gets them for the price of a copy.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


_PARSED: dict[str, bytes] = {}  # text → its objects, pickled
_PARSED_MAX_CHARS = 8_000_000  # texts kept in all (a long-lived process parsing ever new texts keeps what fits)
_kept_chars = 0


def load_text(text: str) -> Any:
    return _parsed(text)


def load_user_text(text: str) -> Any:
    """A file a user wrote: libyaml's objects (the same constructor and resolver as `yaml.safe_load`), or, when
    the text is not valid YAML, the YAMLError the pure-Python parser raises (its problem and mark)."""
    try:
        return _parsed(text)
    except yaml.YAMLError:
        return yaml.safe_load(text)  # raises the error a user is shown (or, were libyaml stricter, reads it)


def _parsed(text: str) -> Any:
    global _kept_chars
    kept = _PARSED.get(text)
    if kept is not None:
        return pickle.loads(kept)  # noqa: S301 — our own pickle of objects libyaml's safe loader built
    data = yaml.load(text, Loader=_LOADER)  # noqa: S506 — a safe loader (libyaml's SafeLoader)
    if _kept_chars + len(text) <= _PARSED_MAX_CHARS:
        try:
            _PARSED[text] = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
            _kept_chars += len(text)
        except (pickle.PicklingError, TypeError, RecursionError):  # anchors making a cycle: not kept
            pass
    return data


def load_file(path: Path) -> Any:
    return load_text(Path(path).read_text(encoding="utf-8"))


def is_packaged(path: Path) -> bool:
    """A file shipped inside the `drills` package (not one a user wrote)."""
    return Path(path).resolve().is_relative_to(PACKAGE_ROOT)
