"""drills/measure."""
