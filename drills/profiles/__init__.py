"""Built-in target profiles (package data): twin.yaml is the default target."""
