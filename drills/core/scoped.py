"""Process-wide settings a run changes only for the length of its in-process pytest session, then restores."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Iterator

__all__ = ["working_dir", "no_bytecode_written", "installed_read_once"]


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


@contextlib.contextmanager
def installed_read_once() -> Iterator[None]:
    """The installed distributions' metadata read once for the session: pytest looks every `-p` plugin and every
    `pytest_plugins` entry up among all entry points (pluggy reads each distribution's entry_points.txt anew per
    lookup: ~30 lookups × every package per drill, a tenth of a drill's CPU). Nothing is installed during a run,
    so the files read once are the files read each time; a call with arguments is passed through."""
    real = importlib.metadata.distributions
    found: list[importlib.metadata.Distribution] | None = None

    def distributions(**kwargs):
        nonlocal found
        if kwargs:
            return real(**kwargs)
        if found is None:
            found = [_ReadOnce(d) for d in real()]
        return iter(found)

    importlib.metadata.distributions = distributions
    try:
        yield
    finally:
        importlib.metadata.distributions = real


class _ReadOnce(importlib.metadata.Distribution):
    """A distribution whose metadata files are read (and entry points parsed) on first use only."""

    def __init__(self, dist: importlib.metadata.Distribution) -> None:
        self._dist = dist
        self._texts: dict[str, str | None] = {}
        self._entry_points: importlib.metadata.EntryPoints | None = None

    def read_text(self, filename: str) -> str | None:
        if filename not in self._texts:
            self._texts[filename] = self._dist.read_text(filename)
        return self._texts[filename]

    def locate_file(self, path):
        return self._dist.locate_file(path)

    @property
    def entry_points(self) -> importlib.metadata.EntryPoints:
        if self._entry_points is None:
            self._entry_points = super().entry_points
        return self._entry_points
