"""drills/faults."""
