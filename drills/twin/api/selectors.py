"""Label and field selectors as the Kubernetes API server parses them (pure functions).

STUB: signatures are the contract; the implementation is being written.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["SelectorError", "parse_label_selector", "parse_field_selector"]


class SelectorError(ValueError):
    """A selector that does not parse; the message names the offending term."""


def parse_label_selector(text: str | None) -> Callable[[dict], bool]:
    """`app=x,tier!=db,env in (a,b),!canary,gpu` → predicate over a labels dict (None/"" matches all)."""
    raise NotImplementedError


def parse_field_selector(text: str | None) -> Callable[[dict], bool]:
    """`metadata.name=x,spec.nodeName!=n1,status.phase=Running` → predicate over a whole object."""
    raise NotImplementedError
