"""Steps and helpers every drill shares: judging a verdict in a step, reading durations from Gherkin.

A step fails with the verdict's own sentence as its message (`pytest.fail(..., pytrace=False)`), so
Allure shows "resumed from step 4000 but the latest checkpoint was 6000: …" on the failed step.
"""

from __future__ import annotations

import logging
import re

import pytest

from drills.timeline import Verdict

__all__ = ["expect", "duration_s"]

log = logging.getLogger(__name__)

_UNITS = {"second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}


def expect(verdict: Verdict) -> Verdict:
    """Fail the step with the verdict's reason unless it passed."""
    if not verdict.passed:
        pytest.fail(verdict.reason, pytrace=False)
    return verdict


def duration_s(text: str) -> float:
    """"15 minutes" → 900, "90 seconds" → 90, "1 hour" → 3600."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(seconds?|minutes?|hours?)\s*", text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (say e.g. \"15 minutes\")")
    return float(match.group(1)) * _UNITS[match.group(2)]
