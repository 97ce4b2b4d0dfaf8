"""Binds every drill feature under features/ to pytest (pytest-bdd); the steps live in fixtures.steps. The
acceptance runbook (features/acceptance/) is not a drill: `drills accept` binds and runs it."""

from pathlib import Path

from pytest_bdd import scenarios

from drills.core.selection import drill_feature_files

scenarios(*drill_feature_files(Path(__file__).parent))
