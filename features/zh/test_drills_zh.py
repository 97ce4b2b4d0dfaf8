"""Binds every zh-CN drill feature under features/zh/ to pytest (pytest-bdd), to the same step functions as the
English ones (fixtures/steps/zh.py binds each step's zh-CN phrasing from fixtures/steps/zh-CN.yaml). Collected
only by a run in Chinese (`drills run --lang zh`; fixtures/selection.py ignores this tree otherwise)."""

from pytest_bdd import scenarios

scenarios(".")
