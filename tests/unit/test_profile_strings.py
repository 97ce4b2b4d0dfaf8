"""Injection attempts through every string a profile can carry are refused at profile load — before any session,
job file or command exists (issue 32) — each with one line naming its field; every numeric value outside its
documented range too. A new string field that reaches something must join the table (the walk below fails)."""

from __future__ import annotations

import typing

import pytest

from drills.core.errors import InvalidProfile
from drills.profile.model import TargetProfile, parse_profile
from tests.unit.profile_strings import EVIL, INJECTIONS, NUMBERS, with_value

CASES = [(path, tag, value) for path, other in INJECTIONS.items() for tag, value in (("newline", EVIL), ("shape", other))
         if value is not None]
# scalar string fields that take any text by design, each for a reason: never a command, file line, name or path
FREE_TEXT: dict[str, str] = {
    "switches.inventory": "a local file the profile names (LocalPath: no control character)",
}


@pytest.mark.parametrize("path, tag, value", CASES, ids=[f"{p}-{t}" for p, t, _ in CASES])
def test_a_string_that_would_start_another_line_or_option_is_refused(path, tag, value):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(with_value(path, value), source="p.yaml")
    line = str(err.value)
    assert line.startswith(f"profile p.yaml: {path}") and "\n" not in line, line


@pytest.mark.parametrize("path, tag, value", NUMBERS, ids=[f"{p}-{t}" for p, t, _ in NUMBERS])
def test_a_number_outside_its_range_is_refused(path, tag, value):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(with_value(path, value), source="p.yaml")
    assert str(err.value).startswith(f"profile p.yaml: {path}"), str(err.value)


def test_every_string_field_of_the_profile_is_in_the_table():
    missing = sorted(set(_string_fields(TargetProfile)) - set(INJECTIONS) - set(FREE_TEXT))
    assert missing == [], f"add these fields to tests/unit/profile_strings.py INJECTIONS: {missing}"


def _string_fields(model, prefix: str = "") -> typing.Iterator[str]:
    """Scalar str fields (Literal choices excluded: a closed set is its own grammar), through nested sections."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        leaves = _leaves(info.annotation)
        for leaf in leaves:
            if isinstance(leaf, type) and hasattr(leaf, "model_fields"):
                yield from _string_fields(leaf, f"{path}.")
        if str in leaves and typing.get_origin(info.annotation) not in (list, dict):
            yield path


def _leaves(annotation) -> list:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _leaves(args[0])
    if origin is typing.Literal:
        return []
    if origin in (list, dict):
        return []  # lists and maps: their items' grammars are tested with their owners (globs, selectors, fio)
    if args:
        return [t for a in args for t in _leaves(a)]
    return [annotation]
