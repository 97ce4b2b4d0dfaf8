"""drills/validate."""
