"""drills/verdicts."""
