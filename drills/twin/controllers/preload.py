"""Every controller module the twin's manager starts, imported at once: the prefork server (drills/core/prefork.py)
preloads this, so a twin forked from it finds them in sys.modules instead of importing them as it starts."""

from __future__ import annotations

import importlib

from drills.twin.controllers.manager import CONTROLLERS

__all__ = ["MODULES"]

MODULES = tuple(dict.fromkeys(spec.partition(":")[0] for spec in CONTROLLERS))
for _name in MODULES:
    importlib.import_module(_name)
