"""drills/schedule."""
