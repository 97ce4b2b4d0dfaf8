"""drills/faults/storage."""
