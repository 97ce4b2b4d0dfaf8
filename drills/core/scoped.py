"""Process-wide settings a run changes only for the length of its in-process pytest session, then restores."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator

__all__ = ["working_dir", "no_bytecode_written"]


@contextlib.contextmanager
def working_dir(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def no_bytecode_written() -> Iterator[None]:
    """A user's features folder (its binder, a conftest) is read, never written: importing it — pytest's
    assert rewrite, Python's own import — would leave a __pycache__ in it wherever bytecode may be written."""
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before
