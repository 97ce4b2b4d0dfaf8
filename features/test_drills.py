"""Binds every English drill feature under features/ to pytest (pytest-bdd); the steps live in fixtures.steps.

Every folder and .feature file here but the other languages' trees (features/zh/, bound by its own
features/zh/test_drills_zh.py): an English run never collects a Chinese scenario (drills/core/languages.py)."""

from pathlib import Path

from pytest_bdd import scenarios

from drills.core.languages import english_paths

scenarios(*english_paths(Path(__file__).parent))
