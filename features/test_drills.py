"""Binds every drill feature under features/ to pytest (pytest-bdd); the steps live in fixtures.steps."""

from pytest_bdd import scenarios

scenarios(".")
