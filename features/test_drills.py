"""Binds every drill feature under features/ to pytest (pytest-bdd); the steps live in drills.steps."""

from pytest_bdd import scenarios

scenarios(".")
