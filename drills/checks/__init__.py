"""Checks: one module per check; each measures and returns a value, judgement is elsewhere."""
