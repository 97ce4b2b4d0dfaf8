"""The load's watermark: how far its results are complete.

Each flush of a locust worker's buckets (`drills.load.buckets`) ends with a line `{"upto": 1718000000.1}`: every
request that completed before `upto` (epoch wall seconds) is in the lines above it. A reader that must judge up
to a moment — a drill at its deadline — waits until the watermark of every worker passes it, instead of judging
the buckets the load has not written yet (at 600× the 0.25 s flush interval alone is 2.5 cluster minutes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from drills.load.buckets import WATERMARK_KEY

__all__ = ["watermark_line", "read_watermark", "WATERMARK_KEY"]


def watermark_line(upto: float) -> str:
    """The JSONL line saying that every request completed before `upto` (epoch seconds) was written above it."""
    return json.dumps({WATERMARK_KEY: round(upto, 6)}) + "\n"


def read_watermark(paths: Iterable[str | Path]) -> float | None:
    """Until when all the files are complete: the smallest of their latest watermarks (None while a file has
    none — a worker that has not flushed yet holds the others back)."""
    marks = []
    for path in paths:
        p = Path(path)
        if not p.exists():
            return None
        latest = None
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.startswith('{"' + WATERMARK_KEY + '"'):
                try:
                    latest = float(json.loads(line)[WATERMARK_KEY])
                except (ValueError, KeyError, TypeError):
                    continue
        if latest is None:
            return None
        marks.append(latest)
    return min(marks) if marks else None
