"""gpu-drills: chaos and acceptance drills for AI compute clusters."""

__all__ = ["__version__"]

__version__ = "0.1.0"
