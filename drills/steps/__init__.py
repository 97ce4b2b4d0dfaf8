"""pytest-bdd step definitions, loaded as one pytest plugin (`drills.steps`): thin steps per domain."""

pytest_plugins = ["drills.steps.common", "drills.steps.training", "drills.steps.inference", "drills.steps.network",
                  "drills.steps.storage"]
