"""Injectors: one module per fault kind, each an inject/revert pair returning small frozen records."""
