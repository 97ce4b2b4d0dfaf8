"""How many scenarios run at once by default: lanes share this machine's cores, so above 120× (where one wall
millisecond of waiting is a tenth of a cluster second or more) scenarios run one by one unless asked."""

from __future__ import annotations

from drills.core.runner import DEFAULT_LANES, RunOptions, _lanes
from drills.profile.model import load_target


def test_lanes_by_default_at_the_default_scale_one_at_600x_unless_asked():
    profile = load_target(None)  # the built-in twin profile, 60×
    assert _lanes(RunOptions(), profile) == DEFAULT_LANES
    assert _lanes(RunOptions(scale=600), profile) == 1
    assert _lanes(RunOptions(scale=600, lanes=3), profile) == 3
    assert _lanes(RunOptions(scale=60, dry_run=True), profile) == 1
