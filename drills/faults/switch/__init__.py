"""drills/faults/switch."""
