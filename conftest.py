"""Only wires the plugins in fixtures/ and the options; behaviour lives in the plugins."""

from drills.core.runner import PLUGINS

pytest_plugins = list(PLUGINS)
