"""Binds every English drill feature under features/ to pytest (pytest-bdd); the steps live in fixtures.steps.

Not bound here: the acceptance runbook (features/acceptance/: `drills accept` binds and runs it) and the other
languages' trees (features/zh/, bound by its own features/zh/test_drills_zh.py): an English run never collects a
Chinese scenario (drills/core/languages.py, drills/core/selection.py drill_feature_files)."""

from pathlib import Path

from pytest_bdd import scenarios

from drills.core.selection import drill_feature_files

scenarios(*drill_feature_files(Path(__file__).parent))
