"""Only wires the plugins in fixtures/ and the options; behaviour lives in the plugins."""

pytest_plugins = [
    "fixtures.twin",
    "fixtures.target",
    "fixtures.injectors",
    "fixtures.recorder",
    "fixtures.progress",
    "fixtures.load",
    "fixtures.pods",
    "fixtures.storage",
    "fixtures.network",
    "fixtures.steps",
]
