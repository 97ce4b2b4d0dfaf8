"""drills/core."""
