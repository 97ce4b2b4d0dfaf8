"""Binds the acceptance runbook (features/acceptance/*.feature) to pytest for `drills accept` only: the feature
files collected are this run's rendering of them (drills/acceptance/runbook.py: Examples rows = the planned
nodes); the steps live in fixtures.acceptance. Not a test_*.py: `drills run` never collects it, and the
drills' binder (features/test_drills.py) leaves this folder out."""

from pytest_bdd import scenarios

from fixtures.acceptance import runbook_features

scenarios(runbook_features())
