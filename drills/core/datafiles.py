"""The YAML data files shipped inside the package (catalogs, dialects, stages, built-in profiles and defects,
report texts), parsed by libyaml when PyYAML has it.

Every process reads them at start (the twin, each drill lane, the CLI): the pure-Python parser took ≈ 0.15 s
of CPU for them per process, libyaml a tenth of that, with identical objects. Files a user writes (profiles, read
by every twin and every drill run) are parsed the same way by `load_user_text`; only when libyaml refuses one is it
parsed again by `yaml.safe_load`, whose error messages are the clearer ones, and they are what a user sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def load_text(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 — a safe loader (libyaml's SafeLoader)


def load_user_text(text: str) -> Any:
    """A file a user wrote: libyaml's objects (the same constructor and resolver as `yaml.safe_load`), or, when
    the text is not valid YAML, the YAMLError the pure-Python parser raises (its problem and mark)."""
    try:
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 — a safe loader (libyaml's SafeLoader)
    except yaml.YAMLError:
        return yaml.safe_load(text)  # raises the error a user is shown (or, were libyaml stricter, reads it)


def load_file(path: Path) -> Any:
    return load_text(Path(path).read_text(encoding="utf-8"))


def is_packaged(path: Path) -> bool:
    """A file shipped inside the `drills` package (not one a user wrote)."""
    return Path(path).resolve().is_relative_to(PACKAGE_ROOT)
