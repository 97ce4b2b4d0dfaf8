"""drills/profile."""
